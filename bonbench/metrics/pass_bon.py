"""Exact unbiased pass@k (max@k on rewards) and bon@k of one problem or of every k at once.

What it does: ``pass_at_k`` / ``pass_curve`` (Chen et al. 2021, arXiv 2107.03374, product form; on
real-valued rewards the expected best of k, max@k), ``bon_at_k`` / ``bon_curve`` / ``bon_weights``
(expected ``correct`` of the top-scored sample of a uniformly random k-subset, score ties broken
uniformly: rank weights C(i-1, k-1)/C(n, k) averaged over each tie block) and ``mean_correct``.
Every value averages over all k-subsets exactly, without enumerating them (math-reference §1).
All counts are products of non-negative numbers (no cancellation), so there is no n limit.

What it does not do: maj@k (``bonbench.metrics.maj``), bootstraps (``bonbench.metrics.bootstrap``),
metric names (``bonbench.api.metric``), user-facing errors (per-problem functions
raise ``ValueError``; ``bonbench.api.metric.values.compute_metrics`` turns input into
``BonbenchError``s). Users may import these names from the facade ``bonbench.metrics.estimators``;
modules of bonbench import them from here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from bonbench.metrics.checks import as_values, check_k, expand_ks, is_binary

# ----------------------------------------------------------------------------------------------
# pass@k


# tables are n x n floats (8 MB at n = 1024): keep a few distinct n, not every one ever seen
@lru_cache(maxsize=16)
def _pass_table(n: int) -> np.ndarray:
    """Q[c, k-1] = C(n-c, k)/C(n, k) = prod_{i=n-c+1}^{n} (1 - k/i), c = 0..n, k = 1..n."""
    k = np.arange(1, n + 1, dtype=np.float64)
    i = np.arange(n, 0, -1, dtype=np.float64)[:, None]  # i = n, n-1, ..., 1
    # factors with i < k are never reached with a non-zero prefix (the i = k factor is 0 first);
    # clipping them keeps the table free of -0.0 and sign noise
    factors = np.clip(1.0 - k[None, :] / i, 0.0, None)
    table = np.ones((n + 1, n))
    np.cumprod(factors, axis=0, out=table[1:])
    table.setflags(write=False)
    return table


def pass_at_k(correct: Sequence[bool] | Sequence[float], k: int) -> float:
    """Unbiased pass@k of one problem (Chen et al. 2021): 1 - C(n-c, k)/C(n, k), product form.

    ``correct`` holds one 0/1 (or bool) per sample. Real-valued rewards give max@k, the expected
    maximum reward of k samples, which equals pass@k on 0/1 input. Raises ValueError if k > n.
    """
    z = as_values(correct)
    check_k(k, z.size)
    if not is_binary(z):
        return bon_at_k(z, z, k)
    n, c = z.size, int(z.sum())
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1, dtype=np.float64)))


def _as_matrix(rows: Sequence[Sequence[float] | np.ndarray] | np.ndarray) -> np.ndarray | None:
    """[P, n] float matrix when every problem has the same n (one conversion, no per-row work)."""
    try:
        mat = np.asarray(rows, dtype=np.float64)
    except ValueError:  # ragged: problems differ in n
        return None
    return mat if mat.ndim == 2 else None


def _groups_by_n(rows: Sequence[Sequence[float] | np.ndarray] | np.ndarray,
                 what: str = "correct") -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """{n: (problem indices, [len, n] values)} with finite values checked."""
    mat = _as_matrix(rows)
    if mat is not None:
        if not np.all(np.isfinite(mat)):
            raise ValueError(f"{what} values must be finite")
        return {mat.shape[1]: (np.arange(mat.shape[0]), mat)}
    vals = [as_values(r, what) for r in rows]
    by_n: dict[int, list[int]] = defaultdict(list)
    for p, v in enumerate(vals):
        by_n[v.size].append(p)
    return {n: (np.array(idx), np.stack([vals[p] for p in idx]).reshape(len(idx), n)) for n, idx in by_n.items()}


def pass_curve(correct_per_problem: Sequence[Sequence[float] | np.ndarray] | np.ndarray,
               ks: Sequence[int] | None = None) -> np.ndarray:
    """pass@k for every problem (rows) and every k in ``ks`` (default 1..max n); NaN where n < k.

    Closed form, vectorised: one table of C(n-c, k)/C(n, k) per distinct n, indexed by c.
    Problems with real-valued rewards get max@k (see ``pass_at_k``).
    """
    groups = _groups_by_n(correct_per_problem)
    kk = expand_ks(ks, max(groups, default=0))
    out = np.full((len(correct_per_problem), kk.size), np.nan)
    for n, (idx, mat) in groups.items():
        if n == 0:
            continue
        cols = np.flatnonzero(kk <= n)
        binary = np.all((mat == 0.0) | (mat == 1.0), axis=1)
        c = mat[binary].sum(axis=1).astype(np.int64)
        out[np.ix_(idx[binary], cols)] = 1.0 - _pass_table(n)[c][:, kk[cols] - 1]
        if not binary.all():
            real = mat[~binary]
            out[np.ix_(idx[~binary], cols)] = _bon_rows(real, real, kk[cols])
    return out


# ----------------------------------------------------------------------------------------------
# bon@k


@lru_cache(maxsize=16)
def _rank_weights(n: int) -> np.ndarray:
    """W[i-1, k-1] = C(i-1, k-1)/C(n, k): probability that the i-th smallest of n is the top of a
    random k-subset. Recurrence w_n = k/n, w_{i-1} = w_i (i-k)/(i-1) (no big binomials)."""
    k = np.arange(1, n + 1, dtype=np.float64)
    w = np.empty((n, n))
    w[n - 1] = k / n
    if n > 1:
        i = np.arange(n, 1, -1, dtype=np.float64)[:, None]  # i = n..2 gives row i-2 from row i-1
        ratios = np.clip((i - k[None, :]) / (i - 1.0), 0.0, None)
        w[n - 2 :: -1] = (k / n)[None, :] * np.cumprod(ratios, axis=0)
    w.setflags(write=False)
    return w


def _sorted_block_means(scores: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sort each row by score; return (order, block ids, z replaced by its tie-block mean), all [P, n].

    Replacing z by the mean of its tie block and then using the untied rank weights is exact: the
    rank weights summed over a block equal the block's share of subsets (hockey-stick identity).
    """
    P, n = scores.shape
    order = np.argsort(scores, axis=1, kind="stable")
    s = np.take_along_axis(scores, order, axis=1)
    zs = np.take_along_axis(z, order, axis=1)
    new_block = np.ones((P, n), dtype=np.int64)
    new_block[:, 1:] = s[:, 1:] != s[:, :-1]
    block = np.cumsum(new_block, axis=1) - 1 + (np.arange(P) * n)[:, None]
    sums = np.bincount(block.ravel(), weights=zs.ravel(), minlength=P * n)
    counts = np.bincount(block.ravel(), minlength=P * n)
    means = sums[block] / counts[block]
    return order, block, means


def _check_scores(scores: Sequence[float] | np.ndarray, n: int) -> np.ndarray:
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if s.size != n:
        raise ValueError(f"scores and correct differ in length ({s.size} vs {n})")
    if np.isnan(s).any():
        raise ValueError("verifier scores must not be NaN (ties and order would be undefined)")
    return s


def bon_weights(scores: Sequence[float], k: int) -> np.ndarray:
    """Per-sample probability of being picked as the best of a random k-subset, in input order.

    Ties in score share the average weight of their tie block (uniform random tie-break).
    """
    s = _check_scores(scores, len(scores))
    check_k(k, s.size)
    # hand each sample the weight of its rank, then let the block averaging spread ties evenly
    w_in = np.empty(s.size)
    w_in[np.argsort(s, kind="stable")] = _rank_weights(s.size)[:, k - 1]
    order, _, w_mean = _sorted_block_means(s[None, :], w_in[None, :])
    out = np.empty(s.size)
    out[order[0]] = w_mean[0]
    return out


def bon_at_k(scores: Sequence[float] | np.ndarray, correct: Sequence[float] | np.ndarray, k: int) -> float:
    """Expected ``correct`` of the top-scored sample of a uniformly random k-subset (ties uniform).

    ``correct`` may be 0/1 or a real reward. With scores == correct (an oracle) this is pass@k; with
    k = 1 the mean of ``correct``; with k = n the mean over the top-score tie block.
    """
    z = as_values(correct)
    s = _check_scores(scores, z.size)
    check_k(k, z.size)
    return float(_bon_rows(s[None, :], z[None, :], np.array([k]))[0, 0])


def _bon_rows(scores: np.ndarray, z: np.ndarray, ks: np.ndarray) -> np.ndarray:
    """bon@k of each row of [P, n] scores / correct, for every k in ``ks`` (all <= n)."""
    _, _, zbar = _sorted_block_means(scores, z)
    return zbar @ _rank_weights(z.shape[1])[:, ks - 1]


def bon_curve(scores_per_problem: Sequence[Sequence[float] | np.ndarray] | np.ndarray,
              correct_per_problem: Sequence[Sequence[float] | np.ndarray] | np.ndarray,
              ks: Sequence[int] | None = None) -> np.ndarray:
    """bon@k for every problem (rows) and every k in ``ks`` (default 1..max n); NaN where n < k.

    Vectorised per distinct n: sort, tie-block means, one matmul with the rank-weight matrix.
    """
    if len(scores_per_problem) != len(correct_per_problem):
        raise ValueError("scores_per_problem and correct_per_problem differ in length")
    groups = _groups_by_n(correct_per_problem)
    s_mat = _as_matrix(scores_per_problem)
    kk = expand_ks(ks, max(groups, default=0))
    out = np.full((len(correct_per_problem), kk.size), np.nan)
    for n, (idx, z) in groups.items():
        if s_mat is not None and s_mat.shape == (len(correct_per_problem), n):
            s = s_mat[idx]
        else:
            s = np.stack([_check_scores(scores_per_problem[p], n) for p in idx]).reshape(len(idx), n)
        if s.shape != z.shape:
            raise ValueError(f"scores and correct differ in length ({s.shape[1]} vs {n})")
        if np.isnan(s).any():
            raise ValueError("verifier scores must not be NaN (ties and order would be undefined)")
        if n == 0:
            continue
        cols = np.flatnonzero(kk <= n)
        out[np.ix_(idx, cols)] = _bon_rows(s, z, kk[cols])
    return out


def mean_correct(correct_per_problem: Sequence[Sequence[float]]) -> np.ndarray:
    """Mean ``correct`` per problem (= pass@1 = maj-free accuracy); NaN for a problem with no samples."""
    return np.array([float(np.mean(as_values(c))) if len(c) else np.nan for c in correct_per_problem])

