"""The k-sample estimator engine behind ``tang``'s passk / majk / softmaxk objectives.

Tang et al. 2025 (arXiv 2503.19595; math-reference §4) optimise J_k = E[f(y_1..k)] for an
aggregation f of k iid samples. Every estimator they use (plain REINFORCE, leave-one-out, the
mean-centred "biased" variant, leave-p-out in both forms) and its U-statistic extension to a group
of G >= k samples (§4.7: average the k-sample estimator over all k-subsets of the group) reduces to

    w_i = c * (P_a[i] - N_b[i]),     P_m[i] = mean of f over the m-subsets of the group that contain i,
                                     N_m[i] = mean of f over the m-subsets that do not contain i,

with (c, a, b) per baseline (derivation in ``ksample_weights``; f of the empty tuple is 0). So an
aggregation only has to supply the means of f over m-subsets, which are exactly the evaluation
estimators of math-reference §1: max@m by sorted ranks (``max_means``), maj@m by the exact
generating-function DP of ``bonbench.metrics.estimators`` (``maj_means``), anything else by enumerating
multisets of distinct rewards (``enumerated_means``, capped). Ties are exact throughout.

Also here: the aggregations on one tuple (``max_value``, ``majority_value``, ``softmax_value``,
``logsumexp_value``) and the paper's advantages computed straight from their definitions
(``loo_advantages``, ``biased_advantages``), which the tests hold the engine to.

Not here: registration and option defaults (``tang``), token-level anything, Monte Carlo subsets.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from functools import cache, lru_cache
from typing import NamedTuple

import numpy as np

from bonbench.core.errors import BonbenchError
from bonbench.metrics.maj import maj_curve

BASELINES = ("loo", "biased", "leave_p_out", "none")
FORMS = ("unbiased", "paper")
MAX_ENUMERATED = 8_000_000  # rows x m of the multiset enumeration (int32: 32 MB)


# ------------------------------------------------------------------------------------------------
# aggregations f on one tuple (the last axis); f of an empty tuple is 0


def max_value(rewards: np.ndarray) -> np.ndarray:
    """pass@k / max@k aggregation: f(y) = max_i r(y_i) (§4.3)."""
    return np.max(np.asarray(rewards, dtype=np.float64), axis=-1)


def softmax_value(rewards: np.ndarray, beta: float) -> np.ndarray:
    """Softmax interpolation (§4.8): f_beta(y) = sum_i p_i r_i, p = softmax(beta r); beta = 0 mean, -> inf max."""
    r = np.asarray(rewards, dtype=np.float64)
    e = np.exp(beta * (r - r.max(axis=-1, keepdims=True)))
    return (e * r).sum(axis=-1) / e.sum(axis=-1)


def logsumexp_value(rewards: np.ndarray, tau: float) -> np.ndarray:
    """Log-sum-exp interpolation (§4.8 option): tau log(1/k sum_i exp(r_i / tau)); tau = inf mean, -> 0 max."""
    r = np.asarray(rewards, dtype=np.float64)
    if math.isinf(tau):
        return r.mean(axis=-1)
    top = r.max(axis=-1)
    return top + tau * np.log(np.exp((r - top[..., None]) / tau).mean(axis=-1))


def majority_value(answers: Sequence[Hashable | None], rewards: Sequence[float]) -> float:
    """Majority-vote aggregation (§4.5) of one tuple.

    The plurality answer wins; tied top answers are picked uniformly, so f is the mean of their
    values. An answer's value is the mean reward of the tuple's samples giving it (their common
    reward when the reward is a function of the answer). ``None`` abstains: it fills one of the k
    slots but casts no vote and its reward is ignored. A tuple where everyone abstains scores 0.
    """
    votes: dict[Hashable, list[float]] = defaultdict(list)
    for a, r in zip(answers, rewards, strict=True):
        if a is not None:
            votes[a].append(float(r))
    if not votes:
        return 0.0
    top = max(len(v) for v in votes.values())
    return float(np.mean([np.mean(v) for v in votes.values() if len(v) == top]))


# ------------------------------------------------------------------------------------------------
# the paper's advantages, straight from the definitions (one group of exactly k samples)


def loo_advantages(f: Callable[[tuple[int, ...]], float], k: int) -> np.ndarray:
    """Leave-one-out advantages A_i = f(y) - f(y_{-i}) (§4.2), f called on index tuples of 0..k-1."""
    full = f(tuple(range(k)))
    return np.array([full - (f(tuple(j for j in range(k) if j != i)) if k > 1 else 0.0) for i in range(k)])


def biased_advantages(f: Callable[[tuple[int, ...]], float], k: int) -> np.ndarray:
    """Mean-centred advantages A'_i = A_i - mean_j A_j (§4.4); unbiased for grad J_{k-1}."""
    a = loo_advantages(f, k)
    return a - a.mean()


# ------------------------------------------------------------------------------------------------
# means of f over m-subsets: U (all), P[i] (containing i), N[i] (not containing i)


class SubsetMeans(NamedTuple):
    U: float
    P: np.ndarray
    N: np.ndarray


def _complete(G: int, m: int, U: float, P: np.ndarray | None = None, N: np.ndarray | None = None) -> SubsetMeans:
    """Fill P or N from  G U = m P[i] + (G - m) N[i]  (each m-subset either holds i or not)."""
    if N is None:
        assert P is not None, "_complete needs P or N"
        N = np.asarray((G * U - m * P) / (G - m)) if G > m else np.zeros(G)
    if P is None:
        P = np.asarray((G * U - (G - m) * N) / m)
    return SubsetMeans(float(U), np.asarray(P, dtype=np.float64), np.asarray(N, dtype=np.float64))


def _empty(G: int) -> SubsetMeans:
    return SubsetMeans(0.0, np.zeros(G), np.zeros(G))


def max_means(rewards: np.ndarray) -> Callable[[int], SubsetMeans]:
    """Means of max over m-subsets by sorted ranks (math-reference §1.2, 4.7).

    Sort ascending (ties in any order: a subset's max value does not depend on which tied sample
    is its top); the j-th smallest (1-based) is the max of C(j-1, m-1) of the C(G, m) subsets.
    Dropping the sample at position j moves every higher sample down one rank, so
    N[j] = (sum_{l<j} v_l C(l-1, m-1) + sum_{l>j} v_l C(l-2, m-1)) / C(G-1, m).
    """
    r = np.asarray(rewards, dtype=np.float64)
    G = r.size
    order = np.argsort(r, kind="stable")
    v = r[order]

    @cache
    def means(m: int) -> SubsetMeans:
        if m == 0:
            return _empty(G)
        rank = np.arange(1, G + 1)
        U = float(v @ _ratios(rank - 1, m - 1, G, m))
        if G == m:
            return _complete(G, m, U, P=np.full(G, U))
        a = v * _ratios(rank - 1, m - 1, G - 1, m)  # rank kept (samples below the removed one)
        b = v * _ratios(rank - 2, m - 1, G - 1, m)  # rank shifted down by one (samples above it)
        below = np.concatenate([[0.0], np.cumsum(a)[:-1]])
        above = np.concatenate([np.cumsum(b[::-1])[::-1][1:], [0.0]])
        N = np.empty(G)
        N[order] = below + above
        return _complete(G, m, U, N=N)

    return means


def _ratios(top: np.ndarray, low: int, n: int, m: int) -> np.ndarray:
    """C(top, low) / C(n, m) elementwise, exact integers divided once (C(a, b) = 0 outside 0..a)."""
    den = math.comb(n, m)
    return np.array([math.comb(int(t), low) / den if t >= 0 else 0.0 for t in top])


def maj_means(answers: Sequence[Hashable | None], rewards: np.ndarray) -> Callable[[int], SubsetMeans]:
    """Means of the majority value over m-subsets: maj@m of ``bonbench.metrics.estimators`` (exact DP, §1.3).

    maj@m values a cluster by its mean reward in the group; summed over subsets that equals the
    tuple-level value of ``majority_value`` (which member rewards a subset holds averages out).
    N[i] is maj@m of the group without i, one batched call for all distinct (answer, reward).
    """
    r = [float(x) for x in rewards]
    G = len(r)
    keys = [(a, x) for a, x in zip(answers, r, strict=True)]
    distinct = list(dict.fromkeys(keys))
    groups = [list(answers)]
    values = [r]
    for key in distinct if G > 1 else []:
        i = keys.index(key)
        groups.append(list(answers[:i]) + list(answers[i + 1 :]))
        values.append(r[:i] + r[i + 1 :])
    curves = maj_curve(groups, values, ks=range(1, G + 1))
    where = {key: 1 + j for j, key in enumerate(distinct)}

    def means(m: int) -> SubsetMeans:
        if m == 0:
            return _empty(G)
        U = float(curves[0, m - 1])
        if G == m:
            return _complete(G, m, U, P=np.full(G, U))
        return _complete(G, m, U, N=np.array([curves[where[key], m - 1] for key in keys]))

    return means


def enumerated_means(rewards: np.ndarray, f_rows: Callable[[np.ndarray], np.ndarray], what: str) -> Callable[[int], SubsetMeans]:
    """Means of any symmetric f of the rewards over m-subsets, by enumerating multisets of distinct
    rewards: a multiset with counts c_t stands for prod_t C(n_t, c_t) subsets. Exact; refuses (one
    line) when the enumeration would pass ``MAX_ENUMERATED`` entries."""
    r = np.asarray(rewards, dtype=np.float64)
    G = r.size
    uniq, inverse, mult = np.unique(r, return_inverse=True, return_counts=True)

    def means(m: int) -> SubsetMeans:
        if m == 0:
            return _empty(G)
        rows = _multisets(mult, m, what)
        # a row's subset count prod_t C(n_t, c_t) = prod over positions (n_t - rho + 1) / rho,
        # rho = 1, 2, .. the position's index within its run of equal types
        rho = np.ones(rows.shape, dtype=np.float64)
        for j in range(1, m):
            rho[:, j] = np.where(rows[:, j] == rows[:, j - 1], rho[:, j - 1] + 1, 1)
        count = np.prod((mult[rows] - rho + 1) / rho, axis=1)
        fw = count * f_rows(uniq[rows])
        U = fw.sum() / math.comb(G, m)
        # F+_t: every member of type t lies in the fraction c_t / n_t of a row's subsets
        plus = np.bincount(rows.ravel(), weights=np.repeat(fw, m) / mult[rows].ravel(), minlength=uniq.size)
        return _complete(G, m, U, P=plus[inverse] / math.comb(G - 1, m - 1))

    return lru_cache(maxsize=None)(means)


def _multisets(mult: np.ndarray, m: int, what: str) -> np.ndarray:
    """All non-decreasing length-m sequences of type indices using type t at most mult[t] times."""
    poly = [1] + [0] * m  # number of rows = [x^m] prod_t (1 + x + .. + x^n_t)
    for n_t in mult:
        poly = [sum(poly[d - c] for c in range(min(int(n_t), d) + 1)) for d in range(m + 1)]
    if poly[m] * m > MAX_ENUMERATED:
        raise BonbenchError(f"{what}: the exact U-statistic needs {poly[m]:,} distinct {m}-subsets of this group "
                            f"(limit {MAX_ENUMERATED // m:,}); use fewer samples per prompt or a smaller k")
    T = mult.size
    room = np.concatenate([np.cumsum(mult[::-1])[::-1], [0]])  # room[t] = slots types >= t can fill
    rows = np.zeros((1, 0), dtype=np.int32)
    run = np.zeros(1, dtype=np.int64)
    for pos in range(m):
        if pos == 0:
            start = np.zeros(1, dtype=np.int64)
        else:
            last = rows[:, -1].astype(np.int64)
            start = np.where(run < mult[last], last, last + 1)
        width = np.clip(T - start, 0, None)
        parent = np.repeat(np.arange(rows.shape[0]), width)
        cand = start[parent] + np.arange(parent.size) - np.repeat(np.cumsum(width) - width, width)
        same = (cand == rows[parent, -1]) if pos > 0 else np.zeros(parent.size, dtype=bool)
        new_run = np.where(same, run[parent] + 1, 1)
        ok = (mult[cand] - new_run) + room[cand + 1] >= m - pos - 1  # the rest can still be filled
        rows = np.hstack([rows[parent[ok]], cand[ok, None].astype(np.int32)])
        run = new_run[ok]
    return rows


# ------------------------------------------------------------------------------------------------
# the estimators


def check_options(what: str, k: int, baseline: str, p: int, form: str) -> None:
    """One-line BonbenchErrors for bad k-sample options."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise BonbenchError(f"{what}: k must be an integer >= 1, got {k!r}")
    if baseline not in BASELINES:
        raise BonbenchError(f"{what}: unknown baseline {baseline!r}; choose from {', '.join(BASELINES)}")
    if form not in FORMS:
        raise BonbenchError(f"{what}: unknown leave_p_out_form {form!r}; choose from {', '.join(FORMS)}")
    if baseline == "leave_p_out" and (isinstance(p, bool) or not isinstance(p, (int, np.integer)) or not 1 <= p <= k - 1):
        raise BonbenchError(f"{what}: leave-p-out needs an integer 1 <= p <= k - 1 = {k - 1}, got p = {p!r}")


def ksample_weights(means: Callable[[int], SubsetMeans], G: int, k: int, baseline: str = "loo",
                    p: int = 2, form: str = "unbiased") -> np.ndarray:
    """U-statistic weights of a k-sample estimator over a group of G >= k samples (§4.2-4.7).

    For a k-subset S the estimator gives sample i in S the weight w_i^S; the U-statistic is
    w_i = C(G, k)^-1 sum_{S contains i} w_i^S (§4.7), which keeps the expectation of the k-sample
    estimator, and at G = k it is the k-sample estimator itself. Counting the pairs (S, T) of
    subsets that each sum visits turns every baseline into c (P_a[i] - N_b[i]):

    ========================  ================================================  ===========  ==========
    baseline                  per-subset weight w_i^S                           c            a, b
    ========================  ================================================  ===========  ==========
    none (REINFORCE, §4.1)    f(S)                                              k / G        k, (none)
    loo (§4.2)                f(S) - f(S \\ i)                                   k / G        k, k - 1
    leave_p_out, unbiased     f(S) - mean_{T in S\\i, |T|=k-p} f(T)  (§4.6 [DER])  k / G        k, k - p
    biased (§4.4)             A_i - mean_j A_j                                  (k - 1) / G  k-1, k-1
    leave_p_out, paper        C(k-1,p-1)^-1 sum_{s ni i,|s|=p} (A_s - mean A)   (k - p) / G  k-p, k-p
    ========================  ================================================  ===========  ==========

    (A_s = f(S) - f(S \\ s).) Expectations: none / loo / unbiased leave-p-out give grad J_k; biased
    gives grad J_{k-1}; the paper's leave-p-out gives grad J^(p) = grad J_{k-p} (its objective
    averages f over the (k-p)-subsets, and (k-p)-subsets of iid samples are iid samples). Note the
    paper's form equals the biased estimator of a (k-p+1)-sample objective.
    """
    if G < k:
        raise BonbenchError(f"a k-sample objective with k = {k} needs at least k samples per prompt, got {G}")
    if baseline == "none":
        return k / G * means(k).P
    c, a, b = {"loo": (k, k, k - 1), "biased": (k - 1, k - 1, k - 1)}.get(baseline, (None, None, None))
    if baseline == "leave_p_out":
        c, a, b = (k, k, k - p) if form == "unbiased" else (k - p, k - p, k - p)
    if c is None or a is None or b is None:
        raise BonbenchError(f"unknown baseline {baseline!r}; choose from {', '.join(BASELINES)}")
    return c / G * (means(a).P - means(b).N)
