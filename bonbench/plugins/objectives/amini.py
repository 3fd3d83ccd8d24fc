"""Variational BoN (Amini et al.) and KL-regularised RL, as per-group weights (BoNBoN: ``bonbon``).

Amini, Vieira, Ash, Cotterell 2024, "Variational Best-of-N Alignment" (arXiv 2407.06057, ICLR 2025;
math-reference §3): fine-tune pi_theta to imitate the BoN distribution of a reference policy,

    max_theta  -KL(pi_theta || pi_bon),   pi_bon(y) = (F(r(y)) + pi_ref(y))^N - F(r(y))^N     (§3.1-3.2)

with F(r) = Pr_{y'~pi_ref}[r(y') < r] (strict), estimated per prompt from M reference rewards (§3.4).

* helpers: ``bon_prob`` / ``log_bon_prob`` (§3.1, the stable log form), ``bon_probs`` (the exact BoN
  distribution of a categorical reference, ties broken uniformly), ``strict_cdf``, ``log_f_hat``
  (§3.4), ``bon_kl_to_ref`` / ``bon_win_rate`` / ``kl_bound`` (§3.5).
* ``vbon``: the score-function gradient of -KL(pi_theta || pi_bon), leave-one-out baseline; reward
  ties broken uniformly by default (``log_bon_prob_tied``), so the target is a distribution.
* ``vbon_l``: the lower bound L = (N-1) E[log F] - KL(pi_theta || pi_ref) (§3.3; the paper's
  Theorem 2), or the looser L_1 of Theorems 3-4 (math-reference §7 item 5) with bound='L1'.
* ``kl_rl``: E[r] - beta KL(pi_theta || pi_ref) with an RLOO baseline (the PPO-style baseline), and
  ``ppo_form_reward``: the §3.2 identity that reward (log pi_bon - log pi_ref)/N with beta = 1/N is
  -(1/N) KL(pi_theta || pi_bon).

Rewards, log-probabilities and reference rewards are plain floats (no gradient). Expert rows get
weight 0. Every weight carries the group's 1/G. Exactness: tests/test_objectives_bon.py. Not here:
tensors, sampling, or the reference model's log-probabilities (the trainer computes those and passes
them in the ``Group``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from bonbench.api.objective import Group, Objective, register_objective
from bonbench.core.errors import BonbenchError
from bonbench.plugins.objectives.common import (
    BASELINES,
    centred,
    check_choice,
    check_int,
    policy_rows_with_ref,
    require,
    scatter,
)

AMINI = "Amini, Vieira, Ash, Cotterell 2024, arXiv 2407.06057"

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
      cdf='add_one' (default; the authors' released code): F_hat = (1 + count) / (M + 1)  (never 0)
      cdf='plain' (the paper's estimator):        F_hat = count / M  (unbiased for F; log 0 = -inf)
    log F_hat is biased for log F either way (Jensen; add-one also biases F_hat itself upwards by
    (1 - F)/(M + 1)); docs/objectives-bon.md has measured numbers.
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


def log_tie_mass_hat(query: np.ndarray, ref_rewards: np.ndarray, log_ref: np.ndarray, cdf: str = "add_one") -> np.ndarray:
    """log E_hat(y) for vbon's ties='uniform': the reference mass of responses whose reward equals r(y).

    E_hat = #{m: r(y_m) = r(y)} / M (cdf='plain') or / (M + 1) (cdf='add_one', the denominator of its
    F_hat), raised to at least pi_ref(y): y is in its own tie class, so E >= pi_ref(y), and without a
    tied reference reward E = pi_ref(y) is exactly the tie-free case of §3.1.
    """
    q = np.asarray(query, dtype=np.float64).reshape(-1)
    ref = np.asarray(ref_rewards, dtype=np.float64).reshape(-1)
    M = ref.size
    count = (q[:, None] == ref[None, :]).sum(axis=1).astype(np.float64)
    with np.errstate(divide="ignore"):
        log_e = np.log(count / (M + 1.0 if cdf == "add_one" else float(M)))
    return np.maximum(log_e, np.asarray(log_ref, dtype=np.float64))


def log_bon_prob_tied(log_A: np.ndarray | float, log_E: np.ndarray | float, log_ref: np.ndarray | float, N: int) -> np.ndarray:
    """log pi_bon(y) of BoN with reward ties broken uniformly (``bon_probs``, Amini et al. App. C):

        pi_bon(y) = (pi_ref(y) / E) ((A + E)^N - A^N),  A = Pr_ref[r < r(y)],  E = Pr_ref[r = r(y)]

    (the top reward level is r(y) with probability (A+E)^N - A^N; the pick among the tied draws is
    uniform, and each is y with probability pi_ref(y)/E). It sums to 1 over the outcomes whatever the
    ties; with E = pi_ref(y) (no ties) it is §3.1. Stable: ``log_bon_prob`` with E in place of pi_ref.
    """
    return log_bon_prob(log_A, log_E, N) + np.asarray(log_ref, dtype=np.float64) - np.asarray(log_E, dtype=np.float64)


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

    L   = (N-1) E[log F] - KL(pi_theta || pi_ref)  ->  t = (N-1) log F + log pi_ref - log pi_theta   (§3.3, Thm 2)
    L_1 = gamma E[log F] - alpha H(pi_theta) - beta KL(pi_theta || pi_ref), Theorems 3-4 (§7 item 5),
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


VBON_TIES = ("uniform",) + TIES


def _vbon_objective(name: str, N: int, baseline: str, cdf: str, ties: str, seed: int,
                    terms: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray],
                    options: Mapping[str, Any]) -> Objective:
    """What ``vbon`` and ``vbon_l`` share: per policy row t_i = terms(r_i, ref_rewards, log pi_theta(y_i),
    log pi_ref(y_i)), then w_i = (t_i - b_i) / G (``centred``), expert rows 0."""
    check_int(name, "N", N, 1)
    check_choice(name, "baseline", baseline, BASELINES)
    check_choice(name, "cdf", cdf, CDFS)

    def weights(group: Group) -> np.ndarray:
        mask, r, lp, lr = policy_rows_with_ref(group, name)
        t = terms(r, require(group, "ref_rewards", name), lp, lr)
        return scatter(mask, centred(t, baseline, name) / t.size)

    return Objective(name, weights, VBON_NEEDS, {"N": N, **options, "baseline": baseline, "cdf": cdf, "ties": ties,
                                                 "seed": seed}, 2 if baseline == "loo" else 1)


@register_objective("vbon", paper=AMINI + " §3 (vBoN)", needs=("logprobs", "ref_logprobs", "ref_rewards"),
                    summary="vBoN: maximise -KL(pi_theta || pi_bon), pi_bon from M reference rewards, reward ties uniform")
def vbon(N: int = 8, baseline: str = "loo", cdf: str = "add_one", ties: str = "uniform", seed: int = 0) -> Objective:
    """vBoN (§3.2): w_i = (t_i - b_i)/G, t_i = log pi_bon(y_i) - log pi_theta(y_i) (``vbon_weights``).

    log pi_bon(y) from the group's ``ref_rewards``: F_hat = ``log_f_hat`` (add-one CDF by default, as
    the authors' code; cdf='plain' is the paper's count/M) and, by ``ties``:
      'uniform' (default): ``log_bon_prob_tied`` with A = F_hat and E = ``log_tie_mass_hat``: BoN with
        reward ties broken uniformly, a distribution whatever the ties (App. C asks for a tie-break
        that makes the order total); without tied rewards it is exactly 'strict'.
      'strict' (the default before issue 24): ``log_bon_prob`` (Eq. 4-5 with a strict F). On tied
        rewards its target is not a distribution (0/1 rewards: total mass < 1, see the docs).
      'random_order': the reward augmented by a random key u (``log_f_hat``), continuous in u, whose
        BoN density is exactly the i = 1 term N F^(N-1) pi_ref: log pi_bon = log N + (N-1) log F_hat +
        log pi_ref (the augmented objective; by the data-processing inequality a lower bound).
    N = 8 by default (the paper sweeps N; its README ties N to the KL coefficient by N = 1/beta + 1).
    """
    check_choice("vbon", "ties", ties, VBON_TIES)

    def terms(r: np.ndarray, ref: np.ndarray, lp: np.ndarray, lr: np.ndarray) -> np.ndarray:
        if ties == "uniform":
            lf = log_f_hat(r, ref, cdf, "strict", seed)
            log_bon = log_bon_prob_tied(lf, log_tie_mass_hat(r, ref, lr, cdf), lr, N)
        elif ties == "random_order":
            log_bon = math.log(N) + (N - 1) * log_f_hat(r, ref, cdf, ties, seed) + lr
        else:
            log_bon = log_bon_prob(log_f_hat(r, ref, cdf, ties, seed), lr, N)
        return log_bon - lp  # vbon_weights' t

    return _vbon_objective("vbon", N, baseline, cdf, ties, seed, terms, {})


BOUNDS = ("L", "L1")


@register_objective("vbon_l", paper=AMINI + " §3 (vBoN lower bound L, Theorem 2; L_1, Theorems 3-4)",
                    needs=("logprobs", "ref_logprobs", "ref_rewards"),
                    summary="vBoN-L: maximise (N-1) E[log F_hat] - KL(pi_theta || pi_ref) (Theorem 2; or the looser L_1)")
def vbon_l(N: int = 8, bound: str = "L", baseline: str = "loo", cdf: str = "add_one", ties: str = "strict",
           seed: int = 0) -> Objective:
    """vBoN-L (§3.3): the bound's score-function gradient, w_i = (t_i - b_i)/G, t from ``vbon_l_terms``.

    bound='L' (default, the paper's Theorem 2, the tighter; = KL-regularised RL with reward log F and
    beta = 1/(N-1)); bound='L1' the looser L_1 of Theorems 3-4. Exactly unbiased for the chosen bound
    with F_hat fixed. ties='strict' (default) keeps the bound valid on tied rewards: the i = 1 term
    N A^(N-1) pi_ref with the strict A is below the tie-uniform pi_bon too. cdf='plain' is refused when
    the objective is built: F_hat = count/M is 0 with positive probability, so E[log F_hat] = -inf for
    every finite M (the weights would be nan / inf); the add-one CDF keeps it finite.
    """
    check_choice("vbon_l", "bound", bound, BOUNDS)
    check_choice("vbon_l", "ties", ties, TIES)
    if cdf == "plain":
        raise BonbenchError("vbon_l: cdf='plain' makes log F_hat = -inf whenever no reference reward lies below a "
                            "sample (the bound is -inf for every finite M); use cdf='add_one' (the default)")
    return _vbon_objective("vbon_l", N, baseline, cdf, ties, seed,
                           lambda r, ref, lp, lr: vbon_l_terms(log_f_hat(r, ref, cdf, ties, seed), lp, lr, N, bound),
                           {"bound": bound})


# ------------------------------------------------------------------------------------------------
# KL-regularised RL and the §3.2 PPO form


def kl_rl_weights(rewards: np.ndarray, logprobs: np.ndarray, ref_logprobs: np.ndarray, beta: float,
                  baseline: str = "loo") -> np.ndarray:
    """grad (E[r] - beta KL(pi_theta || pi_ref)) = E[(r - beta (log pi_theta - log pi_ref)) grad log pi_theta].

    (The -beta E[grad log pi_theta] from differentiating log pi_theta is 0.) w_i = (t_i - b_i)/G with
    t_i = r_i - beta (log pi_theta(y_i) - log pi_ref(y_i)) and the RLOO baseline; exactly unbiased.
    """
    t = np.asarray(rewards, dtype=np.float64) - beta * (np.asarray(logprobs, dtype=np.float64)
                                                        - np.asarray(ref_logprobs, dtype=np.float64))
    return centred(t, baseline, "kl_rl") / t.size


def ppo_form_reward(log_bon: np.ndarray, ref_logprobs: np.ndarray, N: int) -> np.ndarray:
    """§3.2 PPO form: reward (log pi_bon(y) - log pi_ref(y)) / N with beta = 1/N makes the KL-regularised
    objective E[reward] - (1/N) KL(pi_theta || pi_ref) equal to -(1/N) KL(pi_theta || pi_bon) exactly."""
    return (np.asarray(log_bon, dtype=np.float64) - np.asarray(ref_logprobs, dtype=np.float64)) / N


@register_objective("kl_rl", paper="KL-regularised RL (Ziegler et al. 2019; the PPO baseline of " + AMINI + ")",
                    needs=("logprobs", "ref_logprobs"),
                    summary="KL-regularised RL: reward r - beta (log pi - log pi_ref), RLOO baseline")
def kl_rl(beta: float = 0.05, baseline: str = "loo") -> Objective:
    """Maximise E[r] - beta KL(pi_theta || pi_ref): ``kl_rl_weights`` (beta = 0.05 by default)."""
    if not (isinstance(beta, (int, float)) and beta >= 0):
        raise BonbenchError(f"kl_rl: beta must be a number >= 0, got {beta!r}")
    check_choice("kl_rl", "baseline", baseline, BASELINES)

    def weights(group: Group) -> np.ndarray:
        mask, r, lp, lr = policy_rows_with_ref(group, "kl_rl")
        return scatter(mask, kl_rl_weights(r, lp, lr, beta, baseline))

    return Objective("kl_rl", weights, frozenset({"logprobs", "ref_logprobs"}), {"beta": beta, "baseline": baseline},
                     2 if baseline == "loo" else 1)
