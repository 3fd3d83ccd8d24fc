"""Argument checks shared by the estimator modules (``pass_bon``, ``maj``, ``estimators``).

What it does: validates k against n, converts per-sample values to a finite float64 vector, expands
a requested list of ks, and tells binary correctness from partial credit. What it does not do: no
estimation; it raises ``ValueError`` for bad arguments and leaves user-facing ``BonbenchError``
messages to ``bonbench.api.metric.values.compute_metrics``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def check_k(k: int, n: int) -> None:
    """Raise ``ValueError`` unless ``k`` is an integer (not a bool) with 1 <= k <= n."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"k must be an integer, got {k!r}")
    if k < 1 or k > n:
        raise ValueError(f"k must satisfy 1 <= k <= n = {n}, got k = {k}")


def as_values(correct: Sequence[float] | np.ndarray, what: str = "correct") -> np.ndarray:
    """``correct`` as a flat float64 vector; ``ValueError`` (naming ``what``) on NaN or infinity."""
    z = np.asarray(correct, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(z)):
        raise ValueError(f"{what} values must be finite")
    return z


def expand_ks(ks: Sequence[int] | None, n_max: int) -> np.ndarray:
    """The requested ks as an int64 vector (None: every k = 1..n_max); ``ValueError`` on a k < 1."""
    if ks is None:
        return np.arange(1, n_max + 1)
    arr = np.asarray(list(ks), dtype=np.int64).reshape(-1)
    if arr.size and arr.min() < 1:
        raise ValueError(f"every k must be >= 1, got {arr.min()}")
    return arr


def is_binary(z: np.ndarray) -> bool:
    """Whether every value is exactly 0.0 or 1.0 (grades, not partial credit or rewards)."""
    return bool(np.all((z == 0.0) | (z == 1.0)))
