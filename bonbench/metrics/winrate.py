"""Win rates of reward-judged samples against a comparison, exact for every k, and the analytic
best-of-N references (Amini et al., "Variational Best-of-N Alignment"; math-reference §3.5).

A sample's *win value* against a comparison set of rewards ``q_1..q_m`` (the task's reference
summaries, or a reference policy's samples for the same prompt) is

    W(r) = (1/m) * sum_j ( [r > q_j] + 1/2 [r = q_j] )        (ties count one half)

so that ``winrate`` (one sample against one independent comparison) is the mean of W over samples.
W is non-decreasing in r, so the win value of the reward-best of k samples is the largest of their
win values: ``winrate@k``, the exact probability that the reward-best of a uniformly random
k-subset of the n samples beats an independent comparison sample, is max@k (the expected maximum,
``bonbench.metrics.estimators.pass_curve`` on real values) applied to the win values. With a verifier in
place of the reward, bon@k on the win values is the win rate of the verifier's pick.

The references: for continuous rewards the best of N samples of the reference policy beats a
fresh reference sample with probability N/(N+1), and its KL to the reference is log N - (N-1)/N
(an upper bound when rewards tie).

The measured counterpart of that KL, ``bon_kl``, is the KL of best-of-k selection from one
problem's n samples: draw k of them with replacement, keep the reward-best (ties broken uniformly),
and compare that distribution with the n samples' own (each 1/n). With reward levels l (sorted,
c_l samples each, empirical CDF F) the pick lands on level l with probability
b_l = F(l)^k - F(l-)^k, spread evenly over the level, so

    KL_select = sum_l b_l log(b_l / (c_l / n))

which tends to log k - (k-1)/k as n grows with distinct rewards and is smaller under ties. When the
samples came from a policy pi other than the reference, KL(BoN || ref) = KL(BoN || pi) +
E_BoN[log pi - log pi_ref]; the second term is the b-weighted mean of the per-sample log-ratios.

This module is pure numpy: it does not read runs or rewards; the pipeline passes arrays in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from bonbench.metrics.pass_bon import pass_curve


def win_values(rewards: Sequence[float] | np.ndarray, comparison: Sequence[float] | np.ndarray) -> np.ndarray:
    """W(r_i) for every sample reward against the comparison rewards (ties count 1/2).

    Raises ValueError when the comparison set is empty or any value is not finite.
    """
    r = np.asarray(rewards, dtype=np.float64).ravel()
    q = np.sort(np.asarray(comparison, dtype=np.float64).ravel())
    if q.size == 0:
        raise ValueError("a win rate needs at least one comparison reward")
    if not (np.all(np.isfinite(r)) and np.all(np.isfinite(q))):
        raise ValueError("rewards must be finite")
    below = np.searchsorted(q, r, side="left")
    at_or_below = np.searchsorted(q, r, side="right")
    return (below + 0.5 * (at_or_below - below)) / q.size


def winrate_curve(rewards_per_problem: Sequence[Sequence[float]], comparison_per_problem: Sequence[Sequence[float]],
                  ks: Sequence[int] | None = None) -> np.ndarray:
    """winrate@k per problem (rows) and k (columns, default 1..max n); NaN where a problem has n < k.

    winrate@1 is the plain win rate (the mean win value of the problem's samples).
    """
    if len(rewards_per_problem) != len(comparison_per_problem):
        raise ValueError("one comparison set per problem is needed")
    values = [win_values(r, q) for r, q in zip(rewards_per_problem, comparison_per_problem, strict=True)]
    return pass_curve(values, ks)


def bon_winrate_reference(n: int) -> float:
    """N/(N+1): the win rate of the best of N reference samples against a fresh one (continuous rewards)."""
    if n < 1:
        raise ValueError(f"N must be >= 1 (got {n})")
    return n / (n + 1)


def bon_kl_bound(n: int) -> float:
    """log N - (N-1)/N: KL(best-of-N || reference); exact for continuous rewards, a bound with ties."""
    if n < 1:
        raise ValueError(f"N must be >= 1 (got {n})")
    return math.log(n) - (n - 1) / n


def bon_kl(rewards: Sequence[float] | np.ndarray, k: int, log_ratios: Sequence[float] | np.ndarray | None = None) -> float:
    """KL of best-of-k selection (by reward, ties uniform) from one problem's samples to their own
    distribution, plus the selection-weighted mean of ``log_ratios`` (log pi - log pi_ref per sample)
    when given: the module docstring has the formula. Exact for the empirical distribution.
    """
    r = np.asarray(rewards, dtype=np.float64).ravel()
    n = r.size
    if n == 0 or k < 1:
        raise ValueError(f"need at least one reward and k >= 1 (got n={n}, k={k})")
    if not np.all(np.isfinite(r)):
        raise ValueError("rewards must be finite")
    _, level, counts = np.unique(r, return_inverse=True, return_counts=True)
    upto = np.cumsum(counts) / n
    below = upto - counts / n
    pick = upto ** k - below ** k  # probability that the best of k lies on each level
    pos = pick > 0
    kl = float(np.sum(pick[pos] * np.log(pick[pos] * n / counts[pos])))
    if log_ratios is not None:
        lr = np.asarray(log_ratios, dtype=np.float64).ravel()
        if lr.shape != r.shape:
            raise ValueError("one log-ratio per reward is needed")
        kl += float(np.sum(pick * np.bincount(level, weights=lr, minlength=counts.size) / counts))
    return kl
