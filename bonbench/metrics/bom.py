"""Exact Best-of-Majority, bom@k: a frequency filter on the answers, then the verifier's best sample.

Best-of-Majority (Di et al. 2025, arXiv 2510.03199) on one k-subset S with V voters (samples with a
non-None answer): the eligible answer classes are those with count_S(c) >= share * V (within 1e-9,
so at least t(V) = max(1, ceil(share V - 1e-9)) members in S); the chosen sample is the
highest-scored member of S in an eligible class (score ties broken uniformly among the eligible
samples at the top score); its own ``correct`` is the subset's value. A subset without an eligible
class (or without voters) scores 0. share = 0 makes every present class eligible (bon@k among the
voters); share = 1 leaves only subsets whose voters all agree. ``bom_at_k`` / ``bom_curve`` give the
exact mean over all k-subsets, for every k.

How (generating functions, no enumeration): condition on the chosen sample i, with score s and
class c_i, and on t = t(V). Sample i is chosen when its class has >= t members in S and none of
them above s, and every other class c has either < t members in S (ineligible: all its members are
free) or >= t and none above s. As a polynomial in x counting the voters taken from class c:

    F_c(x) = sum_{q < t} C(n_c, q) x^q + sum_{q >= t} [x^q] (1 + y x)^{e_c} (1 + x)^{b_c},

with e_c and b_c the members of c tied with s and below it (for c_i: x times the terms q >= t of the
same product over its other members). Members tied with s in an eligible class carry y: integrating
y^T over [0, 1] gives the 1/(T+1) of a uniform tie-break among T+1 tied eligible samples. The
integrand has degree L-1 in y (L = the size of i's tie block), so ceil(L/2)-point Gauss-Legendre is
exact; its nodes lie in (0, 1) with positive weights, so every count stays a sum of products of
non-negative numbers (no cancellation). Then [x^V] prod_c F_c for the V with t(V) = t, times the
C(s0, k - V) ways to add abstainers, summed over i (weighted by ``correct``) gives the k-subsets'
total for every k at once. Samples of one tie block and class share their polynomials, and samples
with ``correct`` 0 add nothing, so only the right samples' blocks are computed.

Cost per problem: rows R = (distinct thresholds t) x (tie blocks with a non-zero ``correct``, per
class) x (quadrature nodes), each a product of m class polynomials of degree <= n: O(R n^2) flops,
O(n^4) at worst. About 1 ms per problem at n = 64, 17 ms at n = 128 and 0.3 s at n = 256 (share
0.5; benchmarks/bench_metrics.py times n = 64). Counts reach C(n, k), which float64 holds up to
n = 1024; above that ``ValueError``.

What it does not do: bon@k or maj@k (``bonbench.metrics.pass_bon``, ``maj``), bootstraps, metric
names, I/O; answers are compared with ``==``/hash, never canonicalised here.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from functools import lru_cache

import numpy as np

from bonbench.metrics.checks import as_values, check_k, expand_ks

BOM_MAX_N = 1024  # C(1024, 512) ~ 4.5e306 still fits float64
_SHARE_SLACK = 1e-9  # count >= share * V within this (share * V may land a rounding error off an integer)


@lru_cache(maxsize=8)
def _binom(n: int) -> np.ndarray:
    """B[a, b] = C(a, b) for 0 <= a, b <= n, each rounded once from exact integers."""
    b = np.zeros((n + 1, n + 1))
    row = [1]
    for a in range(n + 1):
        b[a, : a + 1] = [float(v) for v in row]
        row = [1] + [row[i] + row[i + 1] for i in range(a)] + [1]
    b.setflags(write=False)
    return b


@lru_cache(maxsize=64)
def _nodes(points: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes and weights on [0, 1]: exact for polynomials of degree <= 2 points - 1."""
    x, w = np.polynomial.legendre.leggauss(points)
    return (x + 1.0) / 2.0, w / 2.0


def _conv_rows(p: np.ndarray, h: np.ndarray) -> np.ndarray:
    """Row-wise full convolution of p [R, L] with per-row kernels h [R, a]."""
    rows, length = p.shape
    a = h.shape[1]
    if a <= 4:
        out = np.zeros((rows, length + a - 1))
        for t in range(a):
            out[:, t : t + length] += h[:, t : t + 1] * p
        return out
    padded = np.zeros((rows, length + 2 * (a - 1)))
    padded[:, a - 1 : a - 1 + length] = p
    windows = np.lib.stride_tricks.sliding_window_view(padded, a, axis=1)  # [R, L+a-1, a], no copy
    return np.einsum("rwj,rj->rw", windows, h[:, ::-1])


def check_share(share: float) -> float:
    """The share as a float; ValueError unless 0 <= share <= 1."""
    if isinstance(share, bool) or not isinstance(share, (int, float, np.floating)) or not 0.0 <= float(share) <= 1.0:
        raise ValueError(f"bom@k needs a vote share in [0, 1], got {share!r}")
    return float(share)


def _parse(answers: Sequence[Hashable | None], correct: Sequence[float] | np.ndarray,
           scores: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(class id per voter, correct per voter, score per voter, abstainers); ValueError on bad input."""
    z = as_values(correct)
    n = z.size
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if len(answers) != n or s.size != n:
        raise ValueError(f"answers, correct and scores differ in length ({len(answers)}, {n}, {s.size})")
    if not np.all(np.isfinite(s)):
        raise ValueError("bom@k needs finite verifier scores (NaN or infinity makes the order undefined)")
    if n > BOM_MAX_N:
        raise ValueError(f"bom@k supports n <= {BOM_MAX_N} samples per problem (float64 counts), got n = {n}")
    ids: dict[Hashable, int] = {}
    cls = np.array([-1 if a is None else ids.setdefault(a, len(ids)) for a in answers], dtype=np.int64)
    voter = cls >= 0
    return cls[voter], z[voter], s[voter], int(n - voter.sum())


def _thresholds(n_voters: int, share: float) -> np.ndarray:
    """t[V] for V = 0..n_voters: the fewest members an eligible class needs among V voters."""
    v = np.arange(n_voters + 1, dtype=np.float64)
    return np.maximum(1, np.ceil(share * v - _SHARE_SLACK)).astype(np.int64)


def _rows(cls: np.ndarray, z: np.ndarray, s: np.ndarray, m: int) -> tuple[np.ndarray, ...]:
    """Per (tie block, class of the chosen sample, quadrature node): the block's tied / below counts
    per class, the chosen class, the node y and the weight (sum of ``correct`` x quadrature weight)."""
    levels, block = np.unique(-s, return_inverse=True)  # block 0 = the highest score
    counts = np.zeros((levels.size, m), dtype=np.int64)
    np.add.at(counts, (block, cls), 1)
    credit = np.zeros((levels.size, m))
    np.add.at(credit, (block, cls), z)
    above = np.cumsum(counts, axis=0) - counts
    below = counts.sum(axis=0)[None, :] - above - counts
    bs, cs = np.nonzero(credit)
    blk, c0, y, w = [], [], [], []
    for b, c in zip(bs.tolist(), cs.tolist(), strict=True):
        tied = int(counts[b].sum())
        nodes, weights = _nodes(max(1, -(-tied // 2))) if tied > 1 else (np.array([0.5]), np.array([1.0]))
        blk += [b] * nodes.size
        c0 += [c] * nodes.size
        y += nodes.tolist()
        w += (credit[b, c] * weights).tolist()
    return counts, below, np.array(blk, dtype=np.int64), np.array(c0, dtype=np.int64), np.array(y), np.array(w)


def _factor(size: int, own: np.ndarray, e: np.ndarray, b: np.ndarray, y: np.ndarray, t_r: np.ndarray,
            binom: np.ndarray) -> np.ndarray:
    """F_c per row [R, size+1]: coefficient q = ways to take q of the class's members (see the module
    docstring). ``own``: rows whose chosen sample is in this class; ``e``, ``b``: its members tied with
    and below the chosen score (the chosen sample left out); ``y``: the tie variable's node."""
    q = np.arange(size + 1)
    # h[r, q] = sum_u C(e, u) y^u C(b, q - u): tied members carry y, members below are free
    below = binom[b, : size + 1]
    h = below.copy()  # u = 0
    for u in range(1, int(e.max()) + 1):
        h[:, u:] += (binom[e, u] * y**u)[:, None] * below[:, : size + 1 - u]
    eligible = q[None, :] >= t_r[:, None]
    shifted = np.zeros_like(h)
    shifted[:, 1:] = h[:, :-1]  # the chosen sample itself is one of its class's q members
    free = np.where(eligible, h, binom[size, : size + 1][None, :])
    return np.where(own[:, None], np.where(eligible, shifted, 0.0), free)


def _wins(cls: np.ndarray, z: np.ndarray, s: np.ndarray, s0: int, share: float) -> np.ndarray:
    """wins[k], k = 0..n: the sum over k-subsets of the chosen sample's ``correct``."""
    n_v = z.size
    n = n_v + s0
    wins = np.zeros(n + 1)
    if n_v == 0 or not np.any(z):
        return wins
    m = int(cls.max()) + 1
    sizes = np.bincount(cls, minlength=m)
    binom = _binom(n)
    counts, below, blk, c0, y, w = _rows(cls, z, s, m)
    t_of_v = _thresholds(n_v, share)
    ts, v_lo, width = np.unique(t_of_v[1:], return_index=True, return_counts=True)  # t(V) is non-decreasing in V
    # rows: every (block, class, node) at every distinct threshold t
    g = blk.size
    t_r, v_r, width_r = np.repeat(ts, g), np.repeat(v_lo + 1, g), np.repeat(width, g)
    blk, c0, y, w = np.tile(blk, ts.size), np.tile(c0, ts.size), np.tile(y, ts.size), np.tile(w, ts.size)
    # a chosen sample whose class has fewer than t members is never eligible: drop those rows
    live = sizes[c0] >= t_r
    if not live.any():
        return wins
    t_r, v_r, width_r, blk, c0, y, w = (x[live] for x in (t_r, v_r, width_r, blk, c0, y, w))

    def factor(c: int) -> np.ndarray:
        own = c0 == c
        return _factor(int(sizes[c]), own, counts[blk, c] - own, below[blk, c], y, t_r, binom)

    # smallest classes first keeps the running products short; the largest class is not multiplied
    # in: only the coefficients V with t(V) = t_r of the last product are needed
    order = np.argsort(sizes, kind="stable")
    prod = np.ones((t_r.size, 1))
    for c in order[:-1]:
        prod = _conv_rows(prod, factor(int(c)))
    last = factor(int(order[-1]))
    a = last.shape[1]
    v = v_r[:, None] + np.arange(int(width.max()))[None, :]  # [R, W] the V each row keeps
    keep = np.arange(v.shape[1])[None, :] < width_r[:, None]
    pad = np.zeros((t_r.size, a - 1 + prod.shape[1] + a))
    pad[:, a - 1 : a - 1 + prod.shape[1]] = prod
    # [x^V] prod * last = sum_q prod[V - q] last[q]; pad offsets V - q by a - 1 and clips V beyond the degree
    idx = np.minimum(v[:, :, None] - np.arange(a)[None, None, :] + a - 1, pad.shape[1] - 1)
    coef = np.einsum("rwq,rq->rw", np.take_along_axis(pad[:, None, :], idx, axis=2), last)
    by_v = np.bincount(v[keep], weights=(w[:, None] * coef)[keep], minlength=n_v + 1)
    for vv in range(1, n_v + 1):
        if by_v[vv]:
            wins[vv : vv + s0 + 1] += by_v[vv] * binom[s0, : s0 + 1]
    return wins


def _curve_row(answers: Sequence[Hashable | None], correct: Sequence[float] | np.ndarray,
               scores: Sequence[float] | np.ndarray, share: float) -> np.ndarray:
    """bom@k for k = 1..n of one problem."""
    cls, z, s, s0 = _parse(answers, correct, scores)
    n = z.size + s0
    return _wins(cls, z, s, s0, share)[1:] / _binom(n)[n, 1:]


def bom_at_k(answers: Sequence[Hashable | None], correct: Sequence[float], scores: Sequence[float], k: int,
             share: float) -> float:
    """Exact Best-of-Majority of one problem: the mean over all k-subsets of the ``correct`` of the
    best-scored sample among the answer classes holding at least ``share`` of the subset's votes.

    ``None`` answers take a slot but do not vote; scores may be any finite reals (only their order
    matters). ValueError for share outside [0, 1], k > n, mismatched lengths or non-finite values.
    """
    sh = check_share(share)
    check_k(k, len(correct))
    return float(_curve_row(answers, correct, scores, sh)[k - 1])


def bom_curve(answers: Sequence[Sequence[Hashable | None]], correct: Sequence[Sequence[float]],
              scores: Sequence[Sequence[float]], ks: Sequence[int], share: float) -> np.ndarray:
    """bom@k for every problem (rows) and every k in ``ks``; NaN where a problem has fewer than k samples."""
    sh = check_share(share)
    if not len(answers) == len(correct) == len(scores):
        raise ValueError("answers, correct and scores differ in the number of problems")
    kk = expand_ks(ks, max((len(c) for c in correct), default=0))
    out = np.full((len(correct), kk.size), np.nan)
    for p in range(len(correct)):
        full = _curve_row(answers[p], correct[p], scores[p], sh)
        ok = kk <= full.size
        out[p, ok] = full[kk[ok] - 1]
    return out

