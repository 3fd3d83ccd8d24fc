"""The exact metric kinds of every run: pass@k, bon@k, maj@k, max@k and mean, as records.

Each record wraps estimators of ``bonbench.metrics`` (math-reference §1): the curve functions
compute every requested k of all problems in one call, the per-problem functions one value. What
each reads, its companions and its display are declared here once; the run's rules, scoring, the
gate and the plots read them from the registry. pyproject.toml's ``bonbench.metrics`` entry points
name these records.

What it does not do: parse names, bootstrap or check the inputs (``bonbench.api.metric.values``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bonbench.api.metric.kind import MetricKind
from bonbench.metrics.estimators import ProblemOutcome
from bonbench.metrics.maj import maj_at_k, maj_curve
from bonbench.metrics.pass_bon import bon_at_k, bon_curve, mean_correct, pass_at_k, pass_curve


def _scores(o: ProblemOutcome) -> Sequence[float]:
    assert o.scores is not None, f"{o.problem_id!r} has no scores (bonbench.api.metric.values checks this first)"
    return o.scores


def _pass_curve(outcomes: Sequence[ProblemOutcome], ks: Sequence[int], param: float | None, seed: int) -> np.ndarray:
    return pass_curve([o.correct for o in outcomes], ks)


def _bon_curve(outcomes: Sequence[ProblemOutcome], ks: Sequence[int], param: float | None, seed: int) -> np.ndarray:
    return bon_curve([_scores(o) for o in outcomes], [o.correct for o in outcomes], ks)


def _maj_curve(outcomes: Sequence[ProblemOutcome], ks: Sequence[int], param: float | None, seed: int) -> np.ndarray:
    return maj_curve([o.answers for o in outcomes], [o.correct for o in outcomes], ks)


def _pass_one(o: ProblemOutcome, k: int | None, param: float | None) -> float:
    assert k is not None
    return pass_at_k(o.correct, k)


def _bon_one(o: ProblemOutcome, k: int | None, param: float | None) -> float:
    assert k is not None
    return bon_at_k(_scores(o), o.correct, k)


def _maj_one(o: ProblemOutcome, k: int | None, param: float | None) -> float:
    assert k is not None
    return maj_at_k(o.answers, o.correct, k)


def _mean_one(o: ProblemOutcome, k: int | None, param: float | None) -> float:
    return float(mean_correct([o.correct])[0])


PASS = MetricKind(
    "pass", "unbiased pass@k (Chen et al. 2021): some sample of k of n is correct, every k <= n",
    reads=frozenset({"grades"}), per_problem=_pass_one, curve=_pass_curve, always_on=("grades",), default_curve=True,
    order=10, color="#1f77b4", scaling_law=True)
BON = MetricKind(
    "bon", "expected outcome of the verifier's top pick among k of n (ties uniform)",
    reads=frozenset({"grades", "rewards", "scores"}), per_problem=_bon_one, curve=_bon_curve,
    companions=("pass", "maj", "max"), default_curve=True, order=20, color="#d62728", scaling_law=True)
MAJ = MetricKind(
    "maj", "probability that the plurality answer of k of n is correct (ties uniform, abstentions vote for nothing)",
    reads=frozenset({"grades", "answers"}), per_problem=_maj_one, curve=_maj_curve, default_curve=True,
    order=30, color="#2ca02c", scaling_law=True)
MEAN = MetricKind(
    "mean", "mean correctness or reward over all samples", reads=frozenset({"grades", "rewards"}),
    takes_k=False, per_problem=_mean_one, always_on=("rewards",), order=40)
MAX = MetricKind(
    "max", "expected maximum reward of k of n (pass@k's estimator on rewards)",
    reads=frozenset({"rewards"}), per_problem=_pass_one, curve=_pass_curve, default_curve=True, selection_kl=True,
    order=50, color="#9467bd", scaling_law=True)
