"""Variational BoN (Amini et al.), BoNBoN (Gui et al.) and KL-regularised RL, as per-group weights.

Amini, Vieira, Ash, Cotterell 2024, "Variational Best-of-N Alignment" (arXiv 2407.06057, ICLR 2025;
math-reference §3): fine-tune pi_theta to imitate the BoN distribution of a reference policy,

    max_theta  -KL(pi_theta || pi_bon),   pi_bon(y) = (F(r(y)) + pi_ref(y))^N - F(r(y))^N     (§3.1-3.2)

with F(r) = Pr_{y'~pi_ref}[r(y') < r] (strict), estimated per prompt from M reference rewards (§3.4).

* helpers: ``bon_prob`` / ``log_bon_prob`` (§3.1, the stable log form), ``bon_probs`` (the exact BoN
  distribution of a categorical reference, ties broken uniformly), ``strict_cdf``, ``log_f_hat``
  (§3.4), ``bon_kl_to_ref`` / ``bon_win_rate`` / ``kl_bound`` (§3.5).
* ``vbon``: the score-function gradient of -KL(pi_theta || pi_bon), leave-one-out baseline.
* ``vbon_l``: the lower bound L = (N-1) E[log F] - KL(pi_theta || pi_ref) (§3.3), or the looser
  L_1 of Theorem 3 (math-reference §7 item 5) with bound='L1'.
* ``bonbon``: Gui, Garbacea, Veitch 2024, arXiv 2406.00832: alpha * SFT on the best of N + (1-alpha)
  * IPO between the best and the worst of N, target log-ratio gap (N-1) H_{N-1}.
* ``kl_rl``: E[r] - beta KL(pi_theta || pi_ref) with an RLOO baseline (the PPO-style baseline), and
  ``ppo_form_reward``: the §3.2 identity that reward (log pi_bon - log pi_ref)/N with beta = 1/N is
  -(1/N) KL(pi_theta || pi_bon).

Rewards, log-probabilities and reference rewards are plain floats (no gradient). Expert rows get
weight 0. Every weight carries the group's 1/G. Exactness: tests/test_objectives_bon.py.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from bonbench.errors import BonbenchError
from bonbench.trainer.objectives.base import Group, Objective, objective
from bonbench.trainer.objectives.common import (
    BASELINES,
    check_choice,
    check_int,
    centred,
    policy_mask,
    require,
    rewards_of,
    row_values,
    scatter,
)

AMINI = "Amini, Vieira, Ash, Cotterell 2024, arXiv 2407.06057"
GUI = "Gui, Garbacea, Veitch 2024 (BoNBoN), arXiv 2406.00832"

# ------------------------------------------------------------------------------------------------
# §3.1 the exact BoN distribution


def bon_prob(F: np.ndarray | float, p_ref: np.ndarray | float, N: int) -> np.ndarray:
    """pi_bon(y) = (F + pi_ref(y))^N - F^N (§3.1), F = Pr_ref[r(y') < r(y)]; r injective on the support."""
    F = np.asarray(F, dtype=np.float64)
    p = np.asarray(p_ref, dtype=np.float64)
    return (F + p) ** N - F**N


def _log_expm1(x: np.ndarray) -> np.ndarray:
    """log(e^x - 1) for x > 0 without overflow or cancellation."""
    x = np.asarray(x, dtype=np.float64)
    big = x > 30.0
    safe = np.where(big, 1.0, x)
    return np.where(big, x + np.log1p(-np.exp(-np.where(big, x, 30.0))), np.log(np.expm1(safe)))


def log_bon_prob(log_F: np.ndarray | float, log_ref: np.ndarray | float, N: int) -> np.ndarray:
    """log pi_bon = N log F + log expm1(N log1p(pi_ref / F)) for F > 0, N log pi_ref for F = 0 (§3.1).

    Computed from log F and log pi_ref (a sequence log-probability can be -300): log1p(pi_ref/F) =
    softplus(log pi_ref - log F), so neither pi_ref nor F is ever exponentiated on its own.
    """
    lf = np.asarray(log_F, dtype=np.float64)
    lr = np.asarray(log_ref, dtype=np.float64)
    zero = np.isneginf(lf)
    lf_safe = np.where(zero, 0.0, lf)
    d = lr - lf_safe
    softplus = np.logaddexp(0.0, d)
    out = N * lf_safe + _log_expm1(N * softplus)
    return np.where(zero, N * lr, out)


def strict_cdf(ref_probs: np.ndarray, rewards: np.ndarray) -> np.ndarray:
    """F(r_a) = sum_b pi_ref(b) 1{r_b < r_a} for every outcome a of a categorical reference."""
    p = np.asarray(ref_probs, dtype=np.float64)
    r = np.asarray(rewards, dtype=np.float64)
    return (p[None, :] * (r[None, :] < r[:, None])).sum(axis=1)


def bon_probs(ref_probs: np.ndarray, rewards: np.ndarray, N: int) -> np.ndarray:
    """The exact BoN distribution of a categorical reference, reward ties broken uniformly at random.

    With A_a = Pr[r < r_a] and E_a = Pr[r = r_a] (outcome a and the other outcomes tied with it):
    pi_bon(a) = (pi_ref(a) / E_a) ((A_a + E_a)^N - A_a^N): the top reward level is r_a with
    probability (A+E)^N - A^N and, given that, the pick is uniform over the tied draws, each of which
    is a with probability pi_ref(a)/E_a. Without ties (E_a = pi_ref(a)) this is §3.1 exactly.
    """
    p = np.asarray(ref_probs, dtype=np.float64)
    r = np.asarray(rewards, dtype=np.float64)
    A = strict_cdf(p, r)
    E = (p[None, :] * (r[None, :] == r[:, None])).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(E > 0, p / np.where(E > 0, E, 1.0) * ((A + E) ** N - A**N), 0.0)
    return out


def kl_bound(N: int) -> float:
    """log N - (N-1)/N: KL(pi_bon || pi_ref) for a continuous reward, an upper bound otherwise (§3.5)."""
    return math.log(N) - (N - 1) / N


def bon_kl_to_ref(ref_probs: np.ndarray, rewards: np.ndarray, N: int) -> float:
    """KL(pi_bon || pi_ref) of the exact BoN distribution (``bon_probs``) of a categorical reference."""
    p = np.asarray(ref_probs, dtype=np.float64)
    b = bon_probs(p, rewards, N)
    m = b > 0
    return float(np.sum(b[m] * (np.log(b[m]) - np.log(p[m]))))


def bon_win_rate(ref_probs: np.ndarray, rewards: np.ndarray, N: int, ties: float = 0.5) -> float:
    """Pr[r(y_bon) > r(y')] + ties * Pr[r(y_bon) = r(y')], y' ~ pi_ref; N/(N+1) for a continuous reward."""
    p = np.asarray(ref_probs, dtype=np.float64)
    r = np.asarray(rewards, dtype=np.float64)
    b = bon_probs(p, r, N)
    A = strict_cdf(p, r)
    E = (p[None, :] * (r[None, :] == r[:, None])).sum(axis=1)
    return float(np.sum(b * (A + ties * E)))


def kl(p: np.ndarray, q: np.ndarray) -> float:
    """KL(p || q) of two categoricals (0 log 0 = 0)."""
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    m = p > 0
    return float(np.sum(p[m] * (np.log(p[m]) - np.log(q[m]))))


# ------------------------------------------------------------------------------------------------
# §3.4 log F-hat from M reference rewards

CDFS = ("add_one", "plain")
TIES = ("strict", "random_order")


def log_f_hat(query: np.ndarray, ref_rewards: np.ndarray, cdf: str = "add_one", ties: str = "strict",
              seed: int = 0) -> np.ndarray:
    """log F_hat(r) for every query reward r, from M reference rewards of the same prompt (§3.4).

    count(r) = number of reference rewards strictly below r; then
      cdf='add_one' (default; the authors' code): F_hat = (1 + count) / (M + 1)  (never 0)
      cdf='plain':                                F_hat = count / M  (unbiased for F; log 0 = -inf)
    ties='strict' (default): a reference reward equal to r is not below it (F is the strict CDF).
    ties='random_order': a fixed total order breaks ties. Every query and every reference response
      gets an independent key u ~ U(0, 1) drawn from numpy's default_rng(seed) (queries first, in row
      order, then references), and responses are ordered by (reward, u); count(r) counts references
      below the query in that order. Rows are iid, so the key of row i is independent of y_i, and
      E[count/M | u] = Pr[r' < r] + Pr[r' = r] u: the CDF of the augmented reward (r, u), which is
      injective almost surely; BoN under it is BoN with uniform tie-breaking. Without ties it equals
      'strict'.
    Ref [0.1, 0.5, 0.5, 0.9], r = 0.5: count 1, F_hat = 0.4 (add_one), log = -0.916290731874155.
    """
    check_choice("log_f_hat", "cdf", cdf, CDFS)
    check_choice("log_f_hat", "ties", ties, TIES)
    q = np.asarray(query, dtype=np.float64).reshape(-1)
    ref = np.asarray(ref_rewards, dtype=np.float64).reshape(-1)
    M = ref.size
    if M == 0:
        raise BonbenchError("log F_hat needs at least one reference reward per prompt (--ref-samples M, M >= 1)")
    srt = np.sort(ref)
    count = np.searchsorted(srt, q, side="left").astype(np.float64)
    if ties == "random_order":
        rng = np.random.default_rng(seed)
        uq = rng.random(q.size)
        ur = rng.random(M)
        tied = q[:, None] == ref[None, :]
        count = count + (tied & (ur[None, :] < uq[:, None])).sum(axis=1)
    if cdf == "add_one":
        return np.log((1.0 + count) / (M + 1.0))
    with np.errstate(divide="ignore"):
        return np.log(count / M)


# ------------------------------------------------------------------------------------------------
# vBoN (§3.2) and vBoN-L (§3.3)


def vbon_weights(log_bon: np.ndarray, logprobs: np.ndarray, baseline: str = "loo") -> np.ndarray:
    """Weights of grad -KL(pi_theta || pi_bon) = E_theta[(log pi_bon(y) - log pi_theta(y)) grad log pi_theta(y)].

    The extra term -E_theta[grad log pi_theta] of differentiating log pi_theta inside the KL is 0, so
    with t_i = log pi_bon(y_i) - log pi_theta(y_i): w_i = (t_i - b_i) / G, b_i = mean of the other t_j
    (loo) or 0 (none). Exactly unbiased for a fixed pi_bon (F, or F_hat from reference samples that are
    independent of the policy samples).
    """
    t = np.asarray(log_bon, dtype=np.float64) - np.asarray(logprobs, dtype=np.float64)
    return centred(t, baseline, "vbon") / t.size


def vbon_l_terms(log_F: np.ndarray, logprobs: np.ndarray, ref_logprobs: np.ndarray, N: int, bound: str = "L") -> np.ndarray:
    """Per-sample value h(y) - log pi_theta(y) whose expectation under pi_theta is the bound.

    L   = (N-1) E[log F] - KL(pi_theta || pi_ref)  ->  t = (N-1) log F + log pi_ref - log pi_theta   (§3.3)
    L_1 = gamma E[log F] - alpha H(pi_theta) - beta KL(pi_theta || pi_ref), Theorem 3 (§7 item 5),
          alpha = (N+2)(N-1)/2, beta = N(N+1)/2, gamma = N(N-1)/2; as alpha - beta = -1 this is
          E[gamma log F + beta log pi_ref - log pi_theta]
    -KL(pi_theta || pi_bon) >= log N + L >= log N + L_1.
    """
    lf = np.asarray(log_F, dtype=np.float64)
    lp = np.asarray(logprobs, dtype=np.float64)
    lr = np.asarray(ref_logprobs, dtype=np.float64)
    if bound == "L":
        return (N - 1) * lf + lr - lp
    if bound == "L1":
        return N * (N - 1) / 2 * lf + N * (N + 1) / 2 * lr - lp
    raise BonbenchError(f"vbon_l: unknown bound {bound!r}; choose from L, L1")


VBON_NEEDS = frozenset({"logprobs", "ref_logprobs", "ref_rewards"})


def _vbon_objective(name: str, N: int, baseline: str, cdf: str, ties: str, seed: int,
                    terms: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray],
                    options: Mapping[str, Any]) -> Objective:
    """What ``vbon`` and ``vbon_l`` share: per policy row t_i = terms(log F_hat(r_i), log pi_theta(y_i),
    log pi_ref(y_i)), then w_i = (t_i - b_i) / G (``centred``), expert rows 0."""
    check_int(name, "N", N, 1)
    check_choice(name, "baseline", baseline, BASELINES)
    check_choice(name, "cdf", cdf, CDFS)
    check_choice(name, "ties", ties, TIES)

    def weights(group: Group) -> np.ndarray:
        mask = policy_mask(group)
        r = rewards_of(group, name)[mask]
        lp = row_values(group, "logprobs", name)[mask]
        lr = row_values(group, "ref_logprobs", name)[mask]
        lf = log_f_hat(r, require(group, "ref_rewards", name), cdf, ties, seed)
        t = terms(lf, lp, lr)
        return scatter(mask, centred(t, baseline, name) / t.size)

    return Objective(name, weights, VBON_NEEDS, {"N": N, **options, "baseline": baseline, "cdf": cdf, "ties": ties,
                                                 "seed": seed}, 2 if baseline == "loo" else 1)


@objective("vbon", paper=AMINI + " §3 (vBoN)", needs=("logprobs", "ref_logprobs", "ref_rewards"),
           summary="vBoN: maximise -KL(pi_theta || pi_bon), pi_bon from log F_hat of M reference rewards")
def vbon(N: int = 8, baseline: str = "loo", cdf: str = "add_one", ties: str = "strict", seed: int = 0) -> Objective:
    """vBoN (§3.2): w_i = (t_i - b_i)/G, t_i = log pi_bon(y_i) - log pi_theta(y_i) (``vbon_weights``).

    log pi_bon(y) = ``log_bon_prob``(log F_hat(r(y)), log pi_ref(y), N) with F_hat from the group's
    ``ref_rewards`` (``log_f_hat``: add-one CDF and strict ties by default, as the authors' code).
    With ties='random_order' the reward is the augmented (r, u), continuous in u, whose BoN density is
    exactly the i = 1 term N F^(N-1) pi_ref: then log pi_bon = log N + (N-1) log F_hat + log pi_ref
    (the augmented objective, which by the data-processing inequality is a lower bound on the plain one).
    N = 8 by default (the paper sweeps N; its README ties N to the KL coefficient by N = 1/beta + 1).
    """

    def terms(lf: np.ndarray, lp: np.ndarray, lr: np.ndarray) -> np.ndarray:
        log_bon = math.log(N) + (N - 1) * lf + lr if ties == "random_order" else log_bon_prob(lf, lr, N)
        return log_bon - lp  # vbon_weights' t

    return _vbon_objective("vbon", N, baseline, cdf, ties, seed, terms, {})


BOUNDS = ("L", "L1")


@objective("vbon_l", paper=AMINI + " §3 (vBoN lower bound, Theorems 3-4)",
           needs=("logprobs", "ref_logprobs", "ref_rewards"),
           summary="vBoN-L: maximise (N-1) E[log F_hat] - KL(pi_theta || pi_ref) (or the looser L_1)")
def vbon_l(N: int = 8, bound: str = "L", baseline: str = "loo", cdf: str = "add_one", ties: str = "strict",
           seed: int = 0) -> Objective:
    """vBoN-L (§3.3): the bound's score-function gradient, w_i = (t_i - b_i)/G, t from ``vbon_l_terms``.

    bound='L' (default, the tighter; = KL-regularised RL with reward log F and beta = 1/(N-1));
    bound='L1' the looser L_1 of Theorem 3. Exactly unbiased for the chosen bound with F_hat fixed.
    """
    check_choice("vbon_l", "bound", bound, BOUNDS)
    return _vbon_objective("vbon_l", N, baseline, cdf, ties, seed,
                           lambda lf, lp, lr: vbon_l_terms(lf, lp, lr, N, bound), {"bound": bound})


# ------------------------------------------------------------------------------------------------
# KL-regularised RL and the §3.2 PPO form


def kl_rl_weights(rewards: np.ndarray, logprobs: np.ndarray, ref_logprobs: np.ndarray, beta: float,
                  baseline: str = "loo") -> np.ndarray:
    """grad (E[r] - beta KL(pi_theta || pi_ref)) = E[(r - beta (log pi_theta - log pi_ref)) grad log pi_theta].

    (The -beta E[grad log pi_theta] from differentiating log pi_theta is 0.) w_i = (t_i - b_i)/G with
    t_i = r_i - beta (log pi_theta(y_i) - log pi_ref(y_i)) and the RLOO baseline; exactly unbiased.
    """
    t = np.asarray(rewards, dtype=np.float64) - beta * (np.asarray(logprobs, dtype=np.float64) - np.asarray(ref_logprobs, dtype=np.float64))
    return centred(t, baseline, "kl_rl") / t.size


def ppo_form_reward(log_bon: np.ndarray, ref_logprobs: np.ndarray, N: int) -> np.ndarray:
    """§3.2 PPO form: reward (log pi_bon(y) - log pi_ref(y)) / N with beta = 1/N makes the KL-regularised
    objective E[reward] - (1/N) KL(pi_theta || pi_ref) equal to -(1/N) KL(pi_theta || pi_bon) exactly."""
    return (np.asarray(log_bon, dtype=np.float64) - np.asarray(ref_logprobs, dtype=np.float64)) / N


@objective("kl_rl", paper="KL-regularised RL (Ziegler et al. 2019; the PPO baseline of " + AMINI + ")",
           needs=("logprobs", "ref_logprobs"),
           summary="KL-regularised RL: reward r - beta (log pi - log pi_ref), RLOO baseline")
def kl_rl(beta: float = 0.05, baseline: str = "loo") -> Objective:
    """Maximise E[r] - beta KL(pi_theta || pi_ref): ``kl_rl_weights`` (beta = 0.05 by default)."""
    if not (isinstance(beta, (int, float)) and beta >= 0):
        raise BonbenchError(f"kl_rl: beta must be a number >= 0, got {beta!r}")
    check_choice("kl_rl", "baseline", baseline, BASELINES)

    def weights(group: Group) -> np.ndarray:
        mask = policy_mask(group)
        r = rewards_of(group, "kl_rl")[mask]
        lp = row_values(group, "logprobs", "kl_rl")[mask]
        lr = row_values(group, "ref_logprobs", "kl_rl")[mask]
        return scatter(mask, kl_rl_weights(r, lp, lr, beta, baseline))

    return Objective("kl_rl", weights, frozenset({"logprobs", "ref_logprobs"}), {"beta": beta, "baseline": baseline},
                     2 if baseline == "loo" else 1)


# ------------------------------------------------------------------------------------------------
# BoNBoN (Gui et al.)


def bonbon_target(N: int) -> float:
    """1/(2 beta*_N) = (N-1) H_{N-1}: E over N reference draws of the gap between the best and the worst
    draw's log(pi_bon/pi_ref) for a continuous reward ((N-1)(E log U_(N) - E log U_(1)) with U_(N) ~
    Beta(N, 1), U_(1) ~ Beta(1, N)); beta*_N = 1/(2 (N-1) sum_{k<N} 1/k). Checked in the tests."""
    return (N - 1) * sum(1.0 / k for k in range(1, N))


def bonbon_pairs(rewards: np.ndarray, N: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(best, worst, P, top): for every N-subset of the G rows its best and worst row, aggregated.

    Rows are ordered by (reward, row index): rows are iid draws, so breaking ties by index is a
    uniformly random tie-break in distribution. With ascending ranks a < b, the pair (worst = a,
    best = b) occurs in C(b-a-1, N-2) of the C(G, N) subsets; P are those fractions, ``top`` the
    fraction of subsets whose best is each row (C(b-1, N-1)/C(G, N), the hockey-stick sum of P).
    """
    r = np.asarray(rewards, dtype=np.float64)
    G = r.size
    if N < 2 or G < N:
        raise BonbenchError(f"bonbon needs N >= 2 and at least N = {N} samples per prompt, got G = {G}")
    order = np.argsort(r, kind="stable")
    total = math.comb(G, N)
    worst, best, P = [], [], []
    for a in range(G):
        for b in range(a + N - 1, G):
            worst.append(order[a])
            best.append(order[b])
            P.append(math.comb(b - a - 1, N - 2) / total)
    top = np.zeros(G)
    for b in range(N - 1, G):
        top[order[b]] = math.comb(b, N - 1) / total
    return np.array(best, dtype=int), np.array(worst, dtype=int), np.array(P), top


def bonbon_loss_numpy(logprobs: np.ndarray, ref_logprobs: np.ndarray, rewards: np.ndarray, N: int = 8,
                      alpha: float = 0.5) -> float:
    """BoNBoN loss of one group (to minimise), averaged over its N-subsets:

      alpha * (-log pi_theta(y_best)) + (1 - alpha) * (h(y_best) - h(y_worst) - (N-1) H_{N-1})^2,
      h(y) = log pi_theta(y) - log pi_ref(y)   (SFT-BoN + IPO-BoN with beta*_N, Gui et al. §4)
    """
    lp = np.asarray(logprobs, dtype=np.float64)
    h = lp - np.asarray(ref_logprobs, dtype=np.float64)
    best, worst, P, top = bonbon_pairs(rewards, N)
    ipo = np.sum(P * (h[best] - h[worst] - bonbon_target(N)) ** 2)
    return float(alpha * np.sum(top * -lp) + (1.0 - alpha) * ipo)


def bonbon_loss_torch(logprobs: Any, ref_logprobs: Any, rewards: np.ndarray, N: int = 8, alpha: float = 0.5) -> Any:
    """``bonbon_loss_numpy`` on torch tensors (logprobs carries the gradient; ref_logprobs is detached):
    the trainer's loss hook for BoNBoN."""
    import torch

    best, worst, P, top = bonbon_pairs(rewards, N)
    lp = logprobs
    h = lp - ref_logprobs.detach()
    bi = torch.as_tensor(best, device=lp.device)
    wi = torch.as_tensor(worst, device=lp.device)
    Pt = torch.as_tensor(P, dtype=lp.dtype, device=lp.device)
    tt = torch.as_tensor(top, dtype=lp.dtype, device=lp.device)
    ipo = (Pt * (h[bi] - h[wi] - bonbon_target(N)) ** 2).sum()
    return alpha * (tt * -lp).sum() + (1.0 - alpha) * ipo


def bonbon_weights(logprobs: np.ndarray, ref_logprobs: np.ndarray, rewards: np.ndarray, N: int = 8,
                   alpha: float = 0.5) -> np.ndarray:
    """w = -d(bonbon loss)/d log pi_theta(y_i) at the current log-probabilities.

    The loss is a function of the group's log pi_theta(y_i) only, so by the chain rule
    sum_i w_i grad log pi_theta(y_i) is exactly -grad loss at the current theta: the IPO term needs no
    linearisation. SFT part: alpha * top_i; IPO part: with D = h_best - h_worst - (N-1) H_{N-1},
    -2 (1-alpha) P D on the best row and +2 (1-alpha) P D on the worst. Unlike the score-function
    objectives, the weights depend on theta through the logprobs: recompute them at every step
    (the trainer's surrogate -sum w_i log pi is a correct gradient only at the theta it came from).
    """
    lp = np.asarray(logprobs, dtype=np.float64)
    h = lp - np.asarray(ref_logprobs, dtype=np.float64)
    best, worst, P, top = bonbon_pairs(rewards, N)
    D = h[best] - h[worst] - bonbon_target(N)
    w = alpha * top
    np.add.at(w, best, -2.0 * (1.0 - alpha) * P * D)
    np.add.at(w, worst, 2.0 * (1.0 - alpha) * P * D)
    return w


@objective("bonbon", paper=GUI, needs=("logprobs", "ref_logprobs"),
           summary="BoNBoN: alpha SFT on the best of N + (1-alpha) IPO(best vs worst of N, target (N-1)H_{N-1})")
def bonbon(N: int = 8, alpha: float = 0.5) -> Objective:
    """BoNBoN (``bonbon_loss_numpy``), as the exact loss gradient at the current theta (``bonbon_weights``).

    The paper's data are N samples of the reference model, best and worst by the reward; here the
    group's policy rows play that role (sample them from pi_ref, or accept an on-policy variant whose
    sampling distribution is not differentiated). G > N averages over all N-subsets. alpha: the paper
    tunes it (value not recovered here); 0.5 is a neutral default. alpha = 1 is SFT on the best of N.
    """
    check_int("bonbon", "N", N, 2)
    if not (isinstance(alpha, (int, float)) and 0.0 <= alpha <= 1.0):
        raise BonbenchError(f"bonbon: alpha must lie in [0, 1], got {alpha!r}")

    def weights(group: Group) -> np.ndarray:
        mask = policy_mask(group)
        r = rewards_of(group, "bonbon")[mask]
        lp = row_values(group, "logprobs", "bonbon")[mask]
        lr = row_values(group, "ref_logprobs", "bonbon")[mask]
        return scatter(mask, bonbon_weights(lp, lr, r, N, alpha))

    return Objective("bonbon", weights, frozenset({"logprobs", "ref_logprobs"}), {"N": N, "alpha": alpha}, N)
