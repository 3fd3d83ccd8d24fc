"""The reliability metric kinds: pass^k, G-Pass@k at a threshold and mG-Pass@k, as records.

Each record wraps a closed form of ``bonbench.metrics.reliability`` (docs/metrics.md): exact for
every k <= n on 0/1 grades, every k of every problem in one call. pyproject.toml's
``bonbench.metrics`` entry points name these records.

What it does not do: parse names, bootstrap or check the inputs (``bonbench.api.metric.values``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bonbench.api.metric.kind import MetricKind, Param
from bonbench.metrics.estimators import ProblemOutcome
from bonbench.metrics.reliability import (
    gpass_at_k,
    gpass_curve,
    mgpass_at_k,
    mgpass_curve,
    pass_hat_at_k,
    pass_hat_curve,
)


def _k(k: int | None) -> int:
    assert k is not None, "these kinds take a k (the grammar requires one)"
    return k


def _tau(param: float | None) -> float:
    assert param is not None, "gpass@k needs tau (the grammar requires it)"
    return param


def _pass_hat_one(o: ProblemOutcome, k: int | None, param: float | None) -> float:
    return pass_hat_at_k(o.correct, _k(k))


def _pass_hat_curve(outcomes: Sequence[ProblemOutcome], ks: Sequence[int], param: float | None, seed: int) -> np.ndarray:
    return pass_hat_curve([o.correct for o in outcomes], ks)


def _gpass_one(o: ProblemOutcome, k: int | None, param: float | None) -> float:
    return gpass_at_k(o.correct, _k(k), _tau(param))


def _gpass_curve(outcomes: Sequence[ProblemOutcome], ks: Sequence[int], param: float | None, seed: int) -> np.ndarray:
    return gpass_curve([o.correct for o in outcomes], ks, _tau(param))


def _mgpass_one(o: ProblemOutcome, k: int | None, param: float | None) -> float:
    return mgpass_at_k(o.correct, _k(k))


def _mgpass_curve(outcomes: Sequence[ProblemOutcome], ks: Sequence[int], param: float | None, seed: int) -> np.ndarray:
    return mgpass_curve([o.correct for o in outcomes], ks)


PASS_HAT = MetricKind(
    "pass^", "all k of a random k-subset of the n samples are correct (tau-bench's pass^k), every k <= n",
    reads=frozenset({"grades"}), per_problem=_pass_hat_one, curve=_pass_hat_curve, order=11, color="#8c564b")
GPASS = MetricKind(
    "gpass", "at least ceil(tau k) of a random k-subset are correct (G-Pass@k; tau 0 is pass@k, 1 is pass^k)",
    reads=frozenset({"grades"}), param=Param("tau", 0.0, 1.0, example=0.5), per_problem=_gpass_one,
    curve=_gpass_curve, order=12, color="#17becf")
MGPASS = MetricKind(
    "mgpass", "G-Pass@k averaged over tau in (1/2, 1] (mG-Pass@k, the exact integral)",
    reads=frozenset({"grades"}), per_problem=_mgpass_one, curve=_mgpass_curve, order=13, color="#bcbd22")
