"""What a metric's curve function returns when some of its values are Monte Carlo estimates.

A metric is exact when its value is the expectation over every k-subset of a problem's n samples,
computed without sampling. Where no exact computation is affordable (``wmaj@k`` on many samples),
a metric averages its per-subset value over random k-subsets instead; the estimate is unbiased and
its Monte Carlo variance is known. ``SampledCurve`` carries both, so that the dataset value can be
shown with its Monte Carlo standard error beside the bootstrap CI.

What it does: the record and the dataset-level Monte Carlo standard error. What it does not do:
draw anything (each metric draws its own subsets), bootstrap, or I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SampledCurve:
    """Per-problem values of one metric at each k, some of them Monte Carlo estimates.

    ``values[p, j]``: problem p's value at ``ks[j]`` (NaN where the problem has fewer than k
    samples); ``mc_var[p, j]``: the variance of that estimate over the random draws (0 where it is
    exact); ``draws``: the random k-subsets (or permutations) each sampled value averages, 0 when
    every value is exact; ``sampled[p, j]``: whether that value is a Monte Carlo estimate (None:
    every value with ``mc_var > 0``). A sampled value whose draws all agreed has variance 0 and is
    still sampled: ``sampled`` is what says a value is exact, not its variance.
    """

    values: np.ndarray
    mc_var: np.ndarray
    draws: int = 0
    sampled: np.ndarray | None = None

    def __post_init__(self) -> None:
        assert self.values.shape == self.mc_var.shape, "values and mc_var must have one shape"
        assert self.sampled is None or self.sampled.shape == self.values.shape, "sampled must have the values' shape"

    def sampled_at(self) -> np.ndarray:
        """[K] booleans: whether some problem's value at that k is a Monte Carlo estimate."""
        if self.draws == 0:
            return np.zeros(self.values.shape[1], dtype=bool)
        mask = self.sampled if self.sampled is not None else self.mc_var > 0
        return np.asarray(mask.any(axis=0))

    @property
    def exact(self) -> bool:
        """True when no value was sampled."""
        return not bool(self.sampled_at().any())

    def dataset_mc_se(self) -> np.ndarray:
        """Monte Carlo standard error of the dataset mean at each k: sqrt(sum_p var_p) / P over the
        problems with a value (per-problem draws are independent)."""
        ok = ~np.isnan(self.values)
        count = ok.sum(axis=0)
        total = np.where(ok, self.mc_var, 0.0).sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(count > 0, np.sqrt(total) / np.maximum(count, 1), np.nan)
