"""Percentile bootstrap confidence intervals of means over problems, single and paired.

What it does: ``bootstrap_ci`` (95% by default; a [P, K] matrix of per-problem values is resampled
once per NaN pattern, never per column) and ``paired_bootstrap_diff`` (mean difference of two
per-problem vectors, its interval and a one-sided bootstrap p). Resampling is seeded: the same
values and seed give the same interval in every process.

What it does not do: compute per-problem values (``bonbench.metrics.pass_bon``, ``maj``), read or
write files, or choose the seed or number of resamples (the caller's settings do).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

Z95 = 1.959963984540054  # the normal quantile of a two-sided 95% interval: a CI's half-width in standard errors

# ----------------------------------------------------------------------------------------------
# bootstrap


def _boot_means(values: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """[n_boot, K] bootstrap means of the rows of a NaN-free [m, K] array: one multinomial count
    matrix, one matmul. A fresh generator per call makes a column's CI independent of its
    neighbours (the same column bootstraps identically alone or in a matrix)."""
    m = values.shape[0]
    # multinomial counts via resampled indices + bincount: same distribution as rng.multinomial,
    # several times faster for thousands of problems
    idx = np.random.default_rng(seed).integers(0, m, size=(n_boot, m))
    idx += (np.arange(n_boot) * m)[:, None]
    counts = np.bincount(idx.ravel(), minlength=n_boot * m).reshape(n_boot, m).astype(np.float64)
    return (counts @ values) / m  # float counts: a BLAS matmul


def bootstrap_ci(values: np.ndarray, n_boot: int = 1000, seed: int = 0,
                 alpha: float = 0.05) -> tuple[Any, Any]:  # floats for 1-D values, arrays for 2-D: ndim decides
    """Percentile bootstrap CI of the mean over problems (rows).

    1-D [P] gives ``(lo, hi)`` floats; 2-D [P, K] gives two length-K arrays. NaN rows are dropped per
    column; columns sharing a NaN pattern (usually all of them) share one resampling matrix. A column
    with no finite value gets NaN bounds.
    """
    if n_boot < 1 or not 0.0 < alpha < 1.0:
        raise ValueError("need n_boot >= 1 and 0 < alpha < 1")
    v = np.asarray(values, dtype=np.float64)
    if v.ndim not in (1, 2):
        raise ValueError(f"values must be 1-D [P] or 2-D [P, K], got shape {v.shape}")
    mat = v[:, None] if v.ndim == 1 else v
    K = mat.shape[1]
    lo, hi = np.full(K, np.nan), np.full(K, np.nan)
    valid = ~np.isnan(mat)
    if mat.shape[0] == 0:
        return (math.nan, math.nan) if v.ndim == 1 else (lo, hi)
    # one resampling matrix per distinct NaN pattern (one per distinct n in a curve), never per column
    _, group = np.unique(np.packbits(valid, axis=0).T, axis=0, return_inverse=True)
    for g in range(int(group.max()) + 1):
        cols = np.flatnonzero(group.reshape(-1) == g)
        rows = valid[:, cols[0]]
        if not rows.any():
            continue
        means = _boot_means(mat[np.ix_(rows, cols)], n_boot, seed)
        lo[cols], hi[cols] = np.quantile(means, [alpha / 2, 1 - alpha / 2], axis=0)
    if v.ndim == 1:
        return float(lo[0]), float(hi[0])
    return lo, hi


def paired_bootstrap_diff(a: np.ndarray, b: np.ndarray, n_boot: int = 1000,
                          seed: int = 0) -> tuple[float, float, float, float]:
    """Paired bootstrap of mean(a - b) over problems: ``(diff, lo, hi, p_one_sided)``.

    ``a`` and ``b`` are per-problem values in the same problem order; pairs with a NaN on either side
    are dropped. ``(lo, hi)`` is the 95% percentile interval; ``p_one_sided`` is the bootstrap share of
    resampled mean differences <= 0, i.e. small when ``a`` is confidently better than ``b``.
    """
    x, y = np.asarray(a, dtype=np.float64).reshape(-1), np.asarray(b, dtype=np.float64).reshape(-1)
    if x.size != y.size:
        raise ValueError(f"paired values differ in length ({x.size} vs {y.size})")
    d = (x - y)[~(np.isnan(x) | np.isnan(y))]
    if d.size == 0:
        return math.nan, math.nan, math.nan, math.nan
    means = _boot_means(d[:, None], n_boot, seed)[:, 0]
    lo, hi = np.quantile(means, [0.025, 0.975])
    return float(d.mean()), float(lo), float(hi), float(np.mean(means <= 0.0))

