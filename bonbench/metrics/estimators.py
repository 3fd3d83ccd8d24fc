"""The pipeline's metric entry points: dataset means with bootstrap CIs, and every curve point.

Every estimator averages an inference procedure (pass / verifier best-of / majority vote) over all
k-subsets of a problem's n samples, exactly, without enumerating subsets (math-reference §1):

* ``pass_at_k``: Chen et al. 2021 (arXiv 2107.03374) product form. For real rewards it is max@k,
  the expected best reward of k samples (the oracle-verifier bon@k).
* ``bon_at_k``: expected ``correct`` of the top-scored sample of a random k-subset, score ties broken
  uniformly (rank weights C(i-1, k-1)/C(n, k), averaged over each tie block).
* ``maj_at_k``: exact probability that the plurality answer of a random k-subset is correct, ties
  uniform, ``None`` answers abstaining, a subset without votes scoring 0; every k from one
  generating-function pass (math-reference §1.3). About 0.5 ms of CPU per problem at n = 256
  (benchmarks/bench_estimators.py).

What it does: ``compute_metrics`` (requested metrics over a dataset: means, 95% bootstrap CIs and
per-problem values) and ``compute_curves`` (every k = 1..n_min), the pipeline's entry points; they
raise ``BonbenchError`` for user-fixable input. Per-problem functions raise ``ValueError`` for k < 1,
k > n or mismatched lengths; the ``*_curve`` functions return NaN where a problem has fewer than k
samples (never 1.0).

Numerics: all counts are sums of products of non-negative numbers (no cancellation, no FFT), so
every coefficient keeps float64 relative precision. maj@k counts reach C(n, n/2), which float64 holds
up to n = 1024; above that the counts are kept in the platform's extended ``longdouble`` when it has
the range (x86-64 Linux), otherwise maj@k raises ``ValueError``. pass@k and bon@k have no n limit.

Layout: pass@k / bon@k are ``bonbench.metrics.pass_bon``, maj@k ``bonbench.metrics.maj``, the
bootstrap ``bonbench.metrics.bootstrap``, metric specs and names ``bonbench.metrics.names`` and the
shared argument checks ``bonbench.metrics.checks``. This module is also the metrics' documented
facade for users: it hands on their public names, so ``from bonbench.metrics.estimators import ...``
reaches every estimator. Nothing inside bonbench imports through it (each module imports a name
from the module that defines it; ``tests/layer_rules.py`` FACADES).

What it does not do: grading, answer canonicalisation (answers are compared with ``==``/hash), Monte
Carlo estimates, scaling-law fits, I/O.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from bonbench.core.errors import BonbenchError
from bonbench.core.records import MetricValue

# the facade (see the docstring): users import every estimator, the metric specs and names, and the
# maj internals benchmarks/bench_estimators.py times, from this module
from bonbench.metrics.bootstrap import bootstrap_ci, paired_bootstrap_diff
from bonbench.metrics.maj import FLOAT64_MAX_N, WINS_CACHE, maj_at_k, maj_curve, maj_terms
from bonbench.metrics.names import (
    KINDS,
    MetricSpec,
    group_metric_name,
    metric_sort_key,
    parse_metrics,
    split_metric_name,
)
from bonbench.metrics.pass_bon import (
    bon_at_k,
    bon_curve,
    bon_weights,
    mean_correct,
    pass_at_k,
    pass_curve,
)

__all__ = [
    "FLOAT64_MAX_N", "KINDS", "WINS_CACHE", "MetricSpec", "ProblemOutcome", "bon_at_k", "bon_curve", "bon_weights",
    "bootstrap_ci", "compute_curves", "compute_metrics", "group_metric_name", "maj_at_k", "maj_curve", "maj_terms",
    "mean_correct", "metric_sort_key", "paired_bootstrap_diff", "parse_metrics", "pass_at_k", "pass_curve",
    "split_metric_name",
]


@dataclass(frozen=True)
class ProblemOutcome:
    """One problem's samples, in sample order: grader ``correct`` (0/1 or a reward), canonical
    ``answers`` (None abstains) and verifier ``scores`` (None when no verifier ran)."""

    problem_id: str
    correct: tuple[float, ...]
    answers: tuple[Hashable | None, ...]
    scores: tuple[float, ...] | None = None


def _check_outcomes(outcomes: Sequence[ProblemOutcome]) -> None:
    if not outcomes:
        raise BonbenchError("no problems to score; check the task selection (--limit, split)")
    for o in outcomes:
        n = len(o.correct)
        if n == 0:
            raise BonbenchError(f"problem {o.problem_id!r} has no samples; run `bonbench run` again with the same flags "
                                "(it samples only what is missing)")
        if len(o.answers) != n or (o.scores is not None and len(o.scores) != n):
            raise BonbenchError(f"problem {o.problem_id!r} has {n} grades but {len(o.answers)} answers / "
                                f"{'no' if o.scores is None else len(o.scores)} scores; rerun grading and scoring")


def _per_problem(outcomes: Sequence[ProblemOutcome], kind: str, ks: Sequence[int]) -> np.ndarray:
    """[P, len(ks)] per-problem values of one kind; NaN where n < k."""
    correct = [o.correct for o in outcomes]
    if kind in ("pass", "max"):
        return pass_curve(correct, ks)
    if kind == "bon":
        return bon_curve([_scores(o) for o in outcomes], correct, ks)
    if kind == "maj":
        return maj_curve([o.answers for o in outcomes], correct, ks)
    raise AssertionError(f"no curve for metric kind {kind!r}")


def _scores(o: ProblemOutcome) -> Sequence[float]:
    assert o.scores is not None, f"bon@k of {o.problem_id!r} without scores (compute_metrics checks this first)"
    return o.scores


def compute_metrics(outcomes: Sequence[ProblemOutcome], specs: Sequence[MetricSpec | str], n_boot: int = 1000,
                    seed: int = 0) -> tuple[dict[str, MetricValue], dict[str, dict[str, float]]]:
    """Dataset means with 95% bootstrap CIs, and ``per_problem[metric][problem_id]`` values.

    Raises BonbenchError when a bon@k has no verifier scores or a k exceeds some problem's n.
    """
    spec_list: list[MetricSpec] = []
    for item in specs:
        for s in parse_metrics([item]) if isinstance(item, str) else [item]:
            if s not in spec_list:
                spec_list.append(s)
    if not spec_list:
        raise BonbenchError("no metric given; use pass@k, bon@k, maj@k, max@k or mean (k >= 1)")
    _check_outcomes(outcomes)
    n_min = min(len(o.correct) for o in outcomes)
    short = min(outcomes, key=lambda o: len(o.correct))
    for s in spec_list:
        if s.kind == "bon" and any(o.scores is None for o in outcomes):
            raise BonbenchError(f"bon@k needs verifier scores for every problem ({s.name}); "
                                "pass --verifier (e.g. --verifier logprob) or drop bon@k")
        if s.k is not None and s.k > n_min:
            raise BonbenchError(f"{s.name} needs k = {s.k} samples per problem but problem "
                                f"{short.problem_id!r} has n = {n_min}; rerun with --n {s.k} or more")
    ids = [o.problem_id for o in outcomes]
    values: dict[str, MetricValue] = {}
    per_problem: dict[str, dict[str, float]] = {}
    by_kind: dict[str, list[MetricSpec]] = defaultdict(list)
    for s in spec_list:
        by_kind[s.kind].append(s)
    for kind, group in by_kind.items():
        if kind == "mean":
            mat = mean_correct([o.correct for o in outcomes])[:, None]
        else:
            mat = _per_problem(outcomes, kind, [s.k for s in group if s.k is not None])  # None only for mean
        lo, hi = bootstrap_ci(mat, n_boot=n_boot, seed=seed)
        for j, s in enumerate(group):
            values[s.name] = MetricValue(name=s.name, value=float(mat[:, j].mean()),
                                         ci95=(float(lo[j]), float(hi[j])), n_problems=len(outcomes),
                                         n_samples=n_min)
            per_problem[s.name] = {pid: float(v) for pid, v in zip(ids, mat[:, j], strict=True)}
    return {s.name: values[s.name] for s in spec_list}, {s.name: per_problem[s.name] for s in spec_list}


def compute_curves(outcomes: Sequence[ProblemOutcome], kinds: Sequence[str] = ("pass", "bon", "maj"),
                   n_boot: int = 1000, seed: int = 0) -> dict[str, dict[str, list]]:
    """Every k = 1..n_min for each kind: ``{"k", "value", "lo", "hi"}`` lists (JSON-ready).

    n_min is the smallest per-problem n, so every point averages the same problems. 'bon' is skipped
    when any problem lacks verifier scores.
    """
    _check_outcomes(outcomes)
    n_min = min(len(o.correct) for o in outcomes)
    ks = list(range(1, n_min + 1))
    curves: dict[str, dict[str, list]] = {}
    for kind in kinds:
        if kind not in ("pass", "bon", "maj", "max"):
            raise BonbenchError(f"unknown curve kind {kind!r}; use pass, bon, maj or max")
        if kind == "bon" and any(o.scores is None for o in outcomes):
            continue
        mat = _per_problem(outcomes, kind, ks)
        lo, hi = bootstrap_ci(mat, n_boot=n_boot, seed=seed)
        curves[kind] = {"k": ks, "value": [float(v) for v in mat.mean(axis=0)],
                        "lo": [float(v) for v in lo], "hi": [float(v) for v in hi]}
    return curves

