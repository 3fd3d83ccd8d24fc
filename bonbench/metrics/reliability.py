"""Exact reliability metrics on 0/1 grades: pass^k, G-Pass@k at a threshold tau, and mG-Pass@k.

With c correct samples out of n, the number X of correct samples in a uniformly random k-subset is
hypergeometric(n, c, k). Each metric is a closed form in its distribution, exact for every k <= n:

* ``pass_hat_at_k``: pass^k = P(X = k) = C(c, k)/C(n, k), all k samples right (tau-bench, inspect);
* ``gpass_at_k``: G-Pass@k_tau = P(X >= m), m = max(1, ceil(tau k)) (the GPassK paper, arXiv
  2412.13147); tau = 0 is pass@k, tau = 1 is pass^k. tau k within 1e-9 of an integer counts as
  that integer, so that 0.7 * 10 (7.000000000000001 in floats) gives m = 7, not 8;
* ``mgpass_at_k``: mG-Pass@k = 2 * int_{1/2}^{1} G-Pass@k_tau dtau, exactly. G-Pass@k_tau is a step
  function of tau (threshold i on tau in ((i-1)/k, i/k]), so the integral is
  (2/k) sum_{i > k/2} w_i P(X >= i) with w_i = 1, except w = 1/2 for the interval that 1/2 cuts in
  half when k is odd (i = (k+1)/2). For even k this is the paper's (2/k) sum_{i=k/2+1}^{k}
  G-Pass@k_{i/k}; for odd k the paper's sum leaves out that half interval (its mG-Pass@1 is 0), which
  is not copied here.

Numerics: the distribution of X is built for every k at once by drawing samples one by one
without replacement: P_k(j) = P_{k-1}(j) (n-c-(k-1-j))/(n-k+1) + P_{k-1}(j-1) (c-j+1)/(n-k+1).
Every step is a sum of products of non-negative numbers (no cancellation, no big binomials), so every
value keeps float64 relative precision (about 1e-13 after 256 steps) and n has no limit. Curves
compute each distinct (n, c) once: cost O(C k_max^2) per distinct n, C the number of distinct c.

What it does not do: pass@k (``bonbench.metrics.pass_bon``), partial credit (these metrics read
0/1 grades; anything else is a ``ValueError`` naming the metric), bootstraps, metric names, I/O.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from bonbench.metrics.checks import as_values, check_k, expand_ks, is_binary

# tau k within this of an integer counts as that integer (float products such as 0.7 * 10)
_TAU_SLACK = 1e-9


def _grades(correct: Sequence[float] | np.ndarray, metric: str) -> np.ndarray:
    z = as_values(correct)
    if not is_binary(z):
        raise ValueError(f"{metric} needs 0/1 grades (correct), got values other than 0 and 1")
    return z


def _check_tau(tau: float) -> float:
    if not isinstance(tau, (int, float, np.floating)) or isinstance(tau, bool) or not 0.0 <= float(tau) <= 1.0:
        raise ValueError(f"gpass@k needs a threshold tau in [0, 1], got {tau!r}")
    return float(tau)


def gpass_threshold(k: int, tau: float) -> int:
    """m = max(1, ceil(tau k)): the fewest right samples out of k that G-Pass@k_tau accepts."""
    return max(1, math.ceil(_check_tau(tau) * k - _TAU_SLACK))


def _distributions(n: int, cs: np.ndarray, kmax: int) -> Iterator[tuple[int, np.ndarray]]:
    """(k, P) for k = 1..kmax: P[i, j] = P(X = j), j = 0..k, X hypergeometric(n, cs[i], k)."""
    c = cs.astype(np.float64)[:, None]
    j = np.arange(kmax + 1, dtype=np.float64)[None, :]
    # factor of a right draw landing in j from j-1 (c - (j-1) right samples left); constant in k
    right = np.clip(c - j[:, :-1], 0.0, None)
    wrong_base = (n - c) + j  # minus (k-1): wrong samples left when j of the k-1 drawn were right
    pmf = np.ones((cs.size, 1))
    for k in range(1, kmax + 1):
        nxt = np.empty((cs.size, k + 1))
        nxt[:, :k] = pmf * np.clip(wrong_base[:, :k] - (k - 1), 0.0, None)
        nxt[:, k] = 0.0
        nxt[:, 1:] += pmf * right[:, :k]
        nxt /= n - k + 1
        pmf = nxt
        yield k, pmf


def _mgpass_weights(k: int) -> np.ndarray:
    """w[j] (j = 0..k) with mG-Pass@k = sum_j P(X = j) w[j]: (2/k) times the sum of the interval
    weights w_i over the thresholds i <= j above k/2."""
    lo = k // 2 + 1  # the first threshold whose interval ((i-1)/k, i/k] reaches above 1/2
    per_i = np.zeros(k + 1)
    per_i[lo:] = 1.0
    if k % 2 == 1:
        per_i[lo] = 0.5  # 1/2 cuts ((k-1)/2k, (k+1)/2k] in half
    return np.cumsum(per_i) * (2.0 / k)


Stat = Callable[[int, np.ndarray], np.ndarray]  # (k, P [C, k+1]) -> value per c


def _pass_hat(k: int, pmf: np.ndarray) -> np.ndarray:
    return pmf[:, k]


def _gpass(tau: float) -> Stat:
    return lambda k, pmf: pmf[:, gpass_threshold(k, tau):].sum(axis=1)


def _mgpass(k: int, pmf: np.ndarray) -> np.ndarray:
    return pmf @ _mgpass_weights(k)


def _one(correct: Sequence[float] | np.ndarray, k: int, stat: Stat, metric: str) -> float:
    z = _grades(correct, metric)
    check_k(k, z.size)
    for kk, pmf in _distributions(z.size, np.array([int(z.sum())]), k):
        if kk == k:
            return float(stat(k, pmf)[0])
    raise AssertionError("unreachable: _distributions yields k")


def _curve(correct_per_problem: Sequence[Sequence[float]] | np.ndarray, ks: Sequence[int], stat: Stat,
           metric: str) -> np.ndarray:
    """[P, len(ks)] values of ``stat``; NaN where a problem has fewer than k samples."""
    by_n: dict[int, list[tuple[int, int]]] = defaultdict(list)  # n -> [(problem, c)]
    mat = None
    try:
        mat = np.asarray(correct_per_problem, dtype=np.float64)
    except ValueError:  # ragged: problems differ in n
        pass
    if mat is not None and mat.ndim == 2:
        z = _grades(mat, metric).reshape(mat.shape)
        counts = z.sum(axis=1).astype(np.int64)
        by_n[mat.shape[1]] = list(enumerate(counts.tolist()))
    else:
        for p, row in enumerate(correct_per_problem):
            z = _grades(row, metric)
            by_n[z.size].append((p, int(z.sum())))
    kk = expand_ks(ks, max(by_n, default=0))
    out = np.full((len(correct_per_problem), kk.size), np.nan)
    for n, items in by_n.items():
        cols = np.flatnonzero(kk <= n)
        if n == 0 or cols.size == 0:
            continue
        problems = np.array([p for p, _ in items])
        cs, inverse = np.unique(np.array([c for _, c in items]), return_inverse=True)
        wanted = defaultdict(list)  # k -> columns asking for it
        for col in cols:
            wanted[int(kk[col])].append(col)
        for k, pmf in _distributions(n, cs, max(wanted)):
            if k in wanted:
                vals = stat(k, pmf)[inverse]
                for col in wanted[k]:
                    out[problems, col] = vals
    return out


def pass_hat_at_k(correct: Sequence[float], k: int) -> float:
    """pass^k of one problem: the probability that all k samples of a random k-subset are right,
    C(c, k)/C(n, k). ``correct`` holds 0/1 grades; ValueError if k > n or a grade is not 0/1."""
    return _one(correct, k, _pass_hat, "pass^k")


def gpass_at_k(correct: Sequence[float], k: int, tau: float) -> float:
    """G-Pass@k_tau of one problem: P(at least m of a random k-subset are right), m = max(1, ceil(tau k)).

    tau = 0 gives pass@k, tau = 1 pass^k; tau outside [0, 1] is a ValueError.
    """
    stat = _gpass(_check_tau(tau))
    return _one(correct, k, stat, "gpass@k")


def mgpass_at_k(correct: Sequence[float], k: int) -> float:
    """mG-Pass@k of one problem: 2 * int_{1/2}^{1} G-Pass@k_tau dtau, exactly (see the module docstring
    for how it differs from the paper's sum at odd k). mG-Pass@1 = pass@1."""
    return _one(correct, k, _mgpass, "mgpass@k")


def pass_hat_curve(correct: Sequence[Sequence[float]] | np.ndarray, ks: Sequence[int]) -> np.ndarray:
    """pass^k for every problem (rows) and every k in ``ks``; NaN where n < k."""
    return _curve(correct, ks, _pass_hat, "pass^k")


def gpass_curve(correct: Sequence[Sequence[float]] | np.ndarray, ks: Sequence[int], tau: float) -> np.ndarray:
    """G-Pass@k_tau for every problem (rows) and every k in ``ks``; NaN where n < k."""
    return _curve(correct, ks, _gpass(_check_tau(tau)), "gpass@k")


def mgpass_curve(correct: Sequence[Sequence[float]] | np.ndarray, ks: Sequence[int]) -> np.ndarray:
    """mG-Pass@k for every problem (rows) and every k in ``ks``; NaN where n < k."""
    return _curve(correct, ks, _mgpass, "mgpass@k")
