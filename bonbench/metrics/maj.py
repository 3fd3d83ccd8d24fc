"""Exact unbiased maj@k for every k <= n: the generating-function machinery (math-reference §1.3).

What it does: ``maj_at_k`` / ``maj_curve`` give the exact probability that the plurality answer of
a uniformly random k-subset of a problem's n samples is correct (ties uniform, ``None`` answers
abstaining, a subset without votes scoring 0), for every k from one pass over the target
cluster's count a: the 1/(T+1) tie weight integrated exactly (bivariate polynomials packed
y = x^D, no quadrature), clusters too small to reach a folded into a binomial row, levels a that
share their constrained clusters summed as one tensor when small (``_band_tensor``), the other
levels' polynomial products batched across problems (``_levels_batched``), and win counts cached
by the problem's signature (cluster sizes, abstainers; ``WINS_CACHE``).

Numerics: counts are sums of products of non-negative numbers (no cancellation, no FFT), kept in
float64 up to n = ``FLOAT64_MAX_N`` (C(1024, 512) fits) and in the platform's extended
``longdouble`` above that when it has the range (x86-64 Linux); otherwise ``ValueError``.

What it does not do: pass@k, bon@k (``bonbench.metrics.pass_bon``), bootstraps and metric specs
(``bonbench.metrics.bootstrap``, ``names``); the facade ``bonbench.metrics.estimators`` hands on
``maj_at_k``, ``maj_curve``, ``FLOAT64_MAX_N`` and the names the benchmarks use (``WINS_CACHE``, ``maj_terms``);
answers are compared with ``==``/hash, never canonicalised here.
"""

from __future__ import annotations

from collections import Counter, OrderedDict, defaultdict
from collections.abc import Hashable, Iterable, Sequence
from functools import lru_cache
from itertools import compress

import numpy as np

from bonbench.metrics.checks import as_values, check_k, expand_ks, is_binary

# C(1024, 512) ~ 4.5e306 still fits float64 (max 1.8e308); C(1030, 515) would not.
FLOAT64_MAX_N = 1024
_LONGDOUBLE_OK = np.finfo(np.longdouble).maxexp > 1024


def _dtype_for(n: int) -> type:
    if n <= FLOAT64_MAX_N:
        return np.float64
    if _LONGDOUBLE_OK:
        return np.longdouble
    raise ValueError(f"maj@k with n = {n} > {FLOAT64_MAX_N} needs an extended-range longdouble, "
                     "which this platform lacks")


def _binom_table(n: int, dtype: type) -> np.ndarray:
    """B[m, b] = C(m, b) for 0 <= b <= m <= n; one shared table per size class (256, 1024, ...)."""
    size = 256 if n <= 256 else FLOAT64_MAX_N if n <= FLOAT64_MAX_N else -(-n // 512) * 512
    return _binom_rows(size, dtype)


@lru_cache(maxsize=4)
def _binom_rows(n: int, dtype: type) -> np.ndarray:
    b: np.ndarray = np.zeros((n + 1, n + 1), dtype=dtype)
    if dtype is np.float64:
        # Pascal's rule in exact integers, rounded once: float additions would drift ~m ulps by row m
        row = np.array([1], dtype=object)
        for m in range(n + 1):
            b[m, : m + 1] = row.astype(np.float64)
            row = np.concatenate([row, [0]]) + np.concatenate([[0], row])
    else:
        # longdouble cannot take a Python int above 1e308 directly; its extra 11 bits of mantissa keep
        # the Pascal additions' drift far below float64 resolution
        b[:, 0] = 1
        for m in range(1, n + 1):
            b[m, 1 : m + 1] = b[m - 1, 0:m] + b[m - 1, 1 : m + 1]
    b.setflags(write=False)
    return b


def _conv_rows(P: np.ndarray, H: np.ndarray) -> np.ndarray:
    """Row-wise full convolution of P [B, L] with per-row kernels H [B, a]."""
    B, L = P.shape
    a = H.shape[1]
    if a <= 4:
        out = np.zeros((B, L + a - 1), dtype=P.dtype)
        for t in range(a):
            out[:, t : t + L] += H[:, t : t + 1] * P
        return out
    padded = np.zeros((B, L + 2 * (a - 1)), dtype=P.dtype)
    padded[:, a - 1 : a - 1 + L] = P
    windows = np.lib.stride_tricks.sliding_window_view(padded, a, axis=1)  # [B, L+a-1, a], no copy
    return np.einsum("bwj,bj->bw", windows, H[:, ::-1])


def _levels_batched(a: int, sizes: np.ndarray, scale: np.ndarray, binom: np.ndarray) -> np.ndarray:
    """Rows scale_i * P_a(x) for B level tasks sharing (a, J): P_a = int_0^1 prod_j (A_j + y C(s_j, a) x^a) dy
    over the row's J constrained cluster sizes ``sizes[i]`` (all >= a), A_j = sum_{b<a} C(s_j, b) x^b.

    Batched over tasks (of any problems) so each factor costs a few numpy calls for all B rows.
    """
    B, J = sizes.shape
    dtype = binom.dtype.type
    # int_0^1 y^T dy = 1/(T+1); `scale` rides on these weights instead of on the result
    weights = scale[:, None] / np.arange(1, J + 2, dtype=dtype)
    if a == 1:
        # every factor is 1 + s x y: a polynomial in z = x y, so T is the x degree
        e = np.zeros((B, J + 1), dtype=dtype)
        e[:, 0] = 1
        for i in range(J):  # in-place shifted add: numpy buffers the overlapping operands
            e[:, 1 : i + 2] += sizes[:, i : i + 1].astype(dtype) * e[:, : i + 1]
        return e * weights
    # Pack y = x^D with D above any x degree (J*a): row T of a packed vector holds y^T. A factor has
    # a + 1 non-zero terms, so apply it as conv(prod, A) + C(s, a) * shift(prod, D + a) rather than
    # as a dense packed convolution.
    D = J * a + 1
    prod = np.zeros((B, (J + 1) * D), dtype=dtype)
    prod[:, 0] = 1
    used = 1
    for i in range(J):
        s = sizes[:, i]
        tied = binom[s, a][:, None] * prod[:, :used]
        if a == 2:
            prod[:, 1 : used + 1] += binom[s, 1][:, None] * prod[:, :used]
        else:
            prod[:, : used + a - 1] = _conv_rows(prod[:, :used], binom[s, :a])
        prod[:, D + a : D + a + used] += tied
        used += D + a
    return (weights[:, None, :] @ prod.reshape(B, J + 1, D))[:, 0, :]


# A band of levels is done as one tensor sum when it has at most this many terms per level (cheaper
# than a per-level polynomial product below this size; measured on the benchmark's data).
_BAND_TERMS_PER_LEVEL = 10


def _band_tensor(con: list[tuple[int, int]], lo: int, hi: int, s_t: int, binom: np.ndarray,
                 acc: np.ndarray) -> None:
    """acc += sum_{a=lo..hi} C(s_t, a) x^a P_a(x) by direct summation over every choice (b_j <= a) of
    the constrained clusters' counts: weight prod_j C(s_j, b_j) / (1 + #{b_j = a}) at x^(a + sum b_j).
    One broadcast tensor of (hi-lo+1) * (hi+1)^J terms instead of hi-lo+1 polynomial products."""
    a = np.arange(lo, hi + 1)
    b = np.arange(hi + 1)
    weight, degree, ties, over = binom[s_t, lo : hi + 1], a, np.zeros(a.size, dtype=np.int64), np.zeros(a.size, bool)
    for s, m in con:
        for _ in range(m):
            a_b = a.reshape((a.size,) + (1,) * weight.ndim)  # a broadcast against the new axis
            weight = weight[..., None] * binom[s, : hi + 1]
            degree = degree[..., None] + b
            ties = ties[..., None] + (b == a_b)
            over = over[..., None] | (b > a_b)
    weight = np.where(over, 0.0, weight / (1 + ties))
    if acc.dtype == np.float64:
        acc += np.bincount(degree.ravel(), weights=weight.ravel(), minlength=acc.size)[: acc.size]
    else:  # bincount is float64-only
        keep = ~over
        np.add.at(acc, degree[keep], weight[keep])


Signature = tuple[int, tuple[int, ...], int]  # (target cluster size, other sizes descending, abstainers)

# 4096 signatures of n = 1024 take 33 MB; within one dataset that is plenty of reuse. Public so that a
# benchmark can clear it to time a cold cache (benchmarks/bench_estimators.py).
WINS_CACHE: OrderedDict[Signature, np.ndarray] = OrderedDict()
_WINS_CACHE_MAX = 4096
# signatures solved together, counted in total n: enough to batch level tasks well (about 1000
# problems at n = 256), few enough to bound the per-level accumulators (~10 arrays of n+1 per problem)
_WINS_CHUNK_N = 1 << 18


def _maj_wins_batch(keys: Sequence[Signature]) -> dict[Signature, np.ndarray]:
    """W[k] for each signature: the number of k-subsets in which a target cluster of size s_t wins,
    a tie with T other clusters counting 1/(T+1). Length n+1 (k = 0..n).

    wins(x) = sum_a C(s_t, a) x^a (1+x)^(U_a + s0) P_a(x), where a is the target's count,
    P_a = int_0^1 prod_{s_j >= a} (A_j(x) + y C(s_j, a) x^a) dy, A_j = sum_{b<a} C(s_j, b) x^b, and
    U_a = total size of the other clusters smaller than a (they cannot reach a, so they are free).
    Levels a between two consecutive distinct sizes share their constrained clusters (a "band"):
    small bands are summed as one tensor per signature; the other levels are pooled across all
    signatures by (a, J) and computed batched (``_levels_batched``).
    """
    plans = []
    tasks: dict[tuple[int, int, int, type], list[tuple[np.ndarray, tuple[int, ...], float]]] = defaultdict(list)
    for key in keys:
        s_t, others, s0 = key
        n = s_t + sum(others) + s0
        dtype = _dtype_for(n)
        binom = _binom_table(n, dtype)
        sizes = sorted(Counter(others).items(), reverse=True)  # (size, multiplicity), size descending
        top = sizes[0][0] if sizes else 0
        groups: dict[int, np.ndarray] = {}  # U -> sum over levels sharing U_a of C(s_t,a) x^a P_a(x)
        free = sum(others)
        J = U = 0
        expanded: tuple[int, ...] = ()  # constrained sizes, one entry per cluster
        for i, (size, mult) in enumerate(sizes):
            # band: levels where exactly sizes[:i+1] are constrained
            J, U = J + mult, U + size * mult
            expanded += (size,) * mult
            lo = (sizes[i + 1][0] if i + 1 < len(sizes) else 0) + 1
            hi = min(size, s_t)
            if lo > hi:
                continue
            acc = groups.setdefault(free - U, np.zeros(n + 1, dtype=dtype))
            if J == 1 or (hi + 1) ** J <= _BAND_TERMS_PER_LEVEL:
                _band_tensor(sizes[: i + 1], lo, hi, s_t, binom, acc)
                continue
            for a in range(lo, hi + 1):
                tasks[(a, J, binom.shape[0], dtype)].append((acc, expanded, binom[s_t, a]))
        if s_t > top:
            # no other cluster can reach a > top: every other sample is free
            acc = groups.setdefault(free, np.zeros(n + 1, dtype=dtype))
            acc[top + 1 : s_t + 1] += binom[s_t, top + 1 : s_t + 1]
        plans.append((key, groups, n, s0, binom))
    for (a, _J, table, dtype), items in tasks.items():
        rows = _levels_batched(a, np.array([e for _, e, _ in items]), np.array([c for _, _, c in items], dtype=dtype),
                               _binom_rows(table, dtype))
        for (acc, _, _), row in zip(items, rows, strict=True):
            acc[a : a + row.size] += row
    out = {}
    for key, groups, n, s0, binom in plans:
        # sum_U acc_U (1+x)^(U+s0), Horner-style from the largest U so each step multiplies by a short row
        total = np.zeros(n + 1, dtype=binom.dtype)
        prev = None
        for U in sorted(groups, reverse=True):
            if prev is not None and prev > U:
                total = np.convolve(total, binom[prev - U, : prev - U + 1])[: n + 1]
            total += groups[U]
            prev = U
        if prev is not None and prev + s0 > 0:
            total = np.convolve(total, binom[prev + s0, : prev + s0 + 1])[: n + 1]
        total.setflags(write=False)
        out[key] = total
    return out


def _maj_wins(keys: Iterable[Signature]) -> dict[Signature, np.ndarray]:
    """Win counts per signature, from the cache where possible (problems often share signatures)."""
    out: dict[Signature, np.ndarray] = {}
    todo: dict[Signature, None] = {}  # insertion-ordered set: each missing signature solved once
    for key in keys:
        if key in out or key in todo:
            continue
        hit = WINS_CACHE.get(key)
        if hit is None:
            todo[key] = None
        else:
            WINS_CACHE.move_to_end(key)
            out[key] = hit
    chunk: list[Signature] = []
    budget = 0
    for i, key in enumerate(todo):
        chunk.append(key)
        budget += key[0] + sum(key[1]) + key[2] + 1
        if budget >= _WINS_CHUNK_N or i == len(todo) - 1:
            for done, wins in _maj_wins_batch(chunk).items():
                out[done] = WINS_CACHE[done] = wins
                if len(WINS_CACHE) > _WINS_CACHE_MAX:
                    WINS_CACHE.popitem(last=False)
            chunk, budget = [], 0
    return out


def maj_terms(answers: Sequence[Hashable | None],
               correct: Sequence[float] | np.ndarray) -> tuple[int, list[tuple[float, Signature]]]:
    """n and the (value, signature) terms whose sum of value * wins / C(n, k) is maj@k.

    A signature (target cluster size, other cluster sizes descending, abstainers) is what the win
    counts depend on; problems sharing one reuse its cached counts (``WINS_CACHE``).
    """
    z = as_values(correct)
    n = z.size
    if len(answers) != n:
        raise ValueError(f"answers and correct differ in length ({len(answers)} vs {n})")
    size_of = Counter(answers)
    s0 = size_of.pop(None, 0)
    zl = z.tolist()
    if is_binary(z):  # the common case, counted at C speed
        credit: Counter[Hashable] | defaultdict[Hashable, float] = Counter(compress(answers, zl))
    else:
        credit = defaultdict(float)
        for ans, v in zip(answers, zl, strict=True):
            credit[ans] += v
    credit.pop(None, None)
    # linear in the cluster values: clusters of equal size share one win polynomial
    value_by_size: dict[int, float] = defaultdict(float)
    for ans, c in credit.items():
        if c != 0.0:
            value_by_size[size_of[ans]] += c / size_of[ans]
    all_sizes = Counter(size_of.values())
    terms = []
    for s_t, v in value_by_size.items():
        rest = all_sizes.copy()
        rest[s_t] -= 1
        terms.append((v, (s_t, tuple(sorted(rest.elements(), reverse=True)), s0)))
    return n, terms


def _maj_full(answers_per_problem: Sequence[Sequence[Hashable | None]],
              correct_per_problem: Sequence[Sequence[float]]) -> list[np.ndarray]:
    """maj@k for k = 1..n of each problem (float64 arrays of length n)."""
    parsed = [maj_terms(ans, cor) for ans, cor in zip(answers_per_problem, correct_per_problem, strict=True)]
    wins = _maj_wins(key for _, terms in parsed for _, key in terms)
    curves = []
    for n, terms in parsed:
        dtype = _dtype_for(n)
        total: np.ndarray = np.zeros(n + 1, dtype=dtype)
        for v, key in terms:
            total += dtype(v) * wins[key]
        curves.append(np.asarray(total[1:] / _binom_table(n, dtype)[n, 1 : n + 1], dtype=np.float64))
    return curves


def maj_at_k(answers: Sequence[Hashable | None], correct: Sequence[bool] | Sequence[float], k: int) -> float:
    """Exact probability that the plurality answer of a uniformly random k-subset is correct.

    ``None`` answers take a slot but do not vote; ties between top clusters are broken uniformly; a
    subset with no votes scores 0. A cluster's value is the mean ``correct`` of its members (so
    partial credit is allowed). Exact generating-function computation (math-reference §1.3).
    """
    n = len(correct)
    if len(answers) != n:
        raise ValueError(f"answers and correct differ in length ({len(answers)} vs {n})")
    check_k(k, n)
    return float(_maj_full([answers], [correct])[0][k - 1])


def maj_curve(answers_per_problem: Sequence[Sequence[Hashable | None]], correct_per_problem: Sequence[Sequence[float]],
              ks: Sequence[int] | None = None) -> np.ndarray:
    """maj@k for every problem (rows) and every k in ``ks`` (default 1..max n); NaN where n < k."""
    if len(answers_per_problem) != len(correct_per_problem):
        raise ValueError("answers_per_problem and correct_per_problem differ in length")
    n_max = max((len(c) for c in correct_per_problem), default=0)
    kk = expand_ks(ks, n_max)
    out = np.full((len(correct_per_problem), kk.size), np.nan)
    for p, full in enumerate(_maj_full(answers_per_problem, correct_per_problem)):
        ok = kk <= full.size
        out[p, ok] = full[kk[ok] - 1]
    return out
