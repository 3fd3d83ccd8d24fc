"""The selection metric kinds that weigh votes by a verifier: weighted majority (wmaj@k) and
Best-of-Majority (bom@k:share), as records.

``wmaj`` wraps ``bonbench.metrics.weighted.wmaj_curve``: exact where the subsets can be counted,
else an unbiased Monte Carlo over random permutations whose standard error is stored beside the
value (``SampledCurve``; each problem seeded by the run's seed and its id). ``bom`` wraps
``bonbench.metrics.bom``, exact for every k. Both read the grader's answer classes and the verifier's
scores, so their stored values name the verifier, as bon@k's do. pyproject.toml's
``bonbench.metrics`` entry points name these records.

What it does not do: parse names, bootstrap or check the inputs (``bonbench.api.metric.values``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bonbench.api.metric.kind import MetricKind, Param
from bonbench.metrics.bom import bom_at_k, bom_curve
from bonbench.metrics.estimators import ProblemOutcome
from bonbench.metrics.montecarlo import SampledCurve
from bonbench.metrics.weighted import wmaj_curve

_READS = frozenset({"grades", "answers", "scores"})


def _scores(o: ProblemOutcome) -> Sequence[float]:
    assert o.scores is not None, f"{o.problem_id!r} has no scores (metric_values checks this first)"
    return o.scores


def _wmaj_curve(outcomes: Sequence[ProblemOutcome], ks: Sequence[int], param: float | None, seed: int) -> SampledCurve:
    return wmaj_curve([o.answers for o in outcomes], [o.correct for o in outcomes], [_scores(o) for o in outcomes],
                      ks, keys=[o.problem_id for o in outcomes], seed=seed)


def _share(param: float | None) -> float:
    assert param is not None, "bom@k needs its share (the grammar requires it)"
    return param


def _bom_one(o: ProblemOutcome, k: int | None, param: float | None) -> float:
    assert k is not None, "bom takes a k (the grammar requires one)"
    return bom_at_k(o.answers, o.correct, _scores(o), k, _share(param))


def _bom_curve(outcomes: Sequence[ProblemOutcome], ks: Sequence[int], param: float | None, seed: int) -> np.ndarray:
    return bom_curve([o.answers for o in outcomes], [o.correct for o in outcomes], [_scores(o) for o in outcomes],
                     ks, _share(param))


WMAJ = MetricKind(
    "wmaj", "the answer class with the largest sum of verifier scores in k of n wins (ties uniform; scores >= 0)",
    reads=_READS, curve=_wmaj_curve, estimate="monte_carlo", order=31, color="#e377c2", scaling_law=True)
BOM = MetricKind(
    "bom", "Best-of-Majority: the verifier's best sample among the answer classes with at least a share of the votes",
    reads=_READS, param=Param("share", 0.0, 1.0, example=0.5), per_problem=_bom_one, curve=_bom_curve,
    order=32, color="#7f7f7f")
