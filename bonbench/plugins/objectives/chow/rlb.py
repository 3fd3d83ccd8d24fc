"""Chow et al.'s binary-reward objectives: the closed-form BoN policy of Eq. 8 (§2.5) and the
BoN-RLB / BoN-RLB(P) weights of Lemma 3 / Corollary 4 (§2.6), reweighted from pi_bon to samples of pi.

With a 0/1 reward as its own verifier, J_N = 1 - p^N is pass@N. Both objectives default to exactly
unbiased U-statistic estimates of p^(N-1) from the other samples of the group (``rlb_unbiased_weights``,
``rlbp_unbiased_weights``). The reported weights at a plug-in p_hat stay as options (biased; measured
in docs/objectives-bon.md). Of Lemma 3's two signs for g-, '+' is the exact one at the true p; the
prose's '-' has expectation (1+p)/(1-p) grad J. p can also come from the trainer's learned value
head (``p_source="value"``, Chow et al.'s choice: "the value network estimates the failure
probability p, and its estimates are clipped").
Exactness: tests/test_objectives_bon.py, tests/test_objectives_exactness.py; docs/objectives-bon.md.

It does not handle tensors, sample, or train the value head (the trainer turns these weights into the
loss and fits the value head). Its objectives take no reward other than 0/1: any other value is a
one-line error (``binary_correct``), since Eq. 8 holds for binary rewards only.
"""

from __future__ import annotations

import math

import numpy as np

from bonbench.api.objective import Group, Objective, register_objective
from bonbench.core.errors import BonbenchError
from bonbench.plugins.objectives.common import (
    CHOW,
    binary_correct,
    check_choice,
    check_int,
    policy_mask,
    rewards_of,
    scatter,
    value_of,
)


def bon_binary(p: float, N: int) -> tuple[float, float, float]:
    """Eq. 8 (§2.5): pi_bon / pi for a correct and a wrong response, and J = 1 - p^N.

    With a 0/1 reward used as its own verifier (ties uniform) and p = Pr_pi[R = 0]:
    pi_bon(y) = pi(y) (1 - p^N)/(1 - p) if R(y) = 1, pi(y) p^(N-1) if R(y) = 0.
    N = 4, p = 0.5: (15/8, 1/8, 15/16). At p = 1 the correct ratio is its limit N.
    """
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise BonbenchError(f"bon_binary: p must lie in [0, 1], got {p}")
    correct = float(N) if p == 1.0 else (1.0 - p**N) / (1.0 - p)
    return correct, p ** (N - 1), 1.0 - p**N


def rlb_weights(p: float, N: int) -> tuple[float, float, float]:
    """The BoN-RLB weights of Lemma 3 / Corollary 4 (§2.6) as reported: (g+_N, g-, g_bar+_N) (plug-in forms).

    g+_N(p) = N p^(N-1) / (1 - p^N),  g-(p) = N p / (1 - p),  g_bar+_N(p) = (1 - p) g+_N(p).
    N = 4, p = 0.5: (8/15, 4, 4/15). They multiply grad log pi(y) under y ~ pi_bon.
    """
    p = float(p)
    if not 0.0 <= p < 1.0:
        raise BonbenchError(f"rlb_weights: p must lie in [0, 1), got {p}")
    gp = N * p ** (N - 1) / (1.0 - p**N)
    return gp, N * p / (1.0 - p), (1.0 - p) * gp


RLB_SIGNS = ("plus", "minus")


def rlb_sample_weights(correct: np.ndarray, p: float, N: int, sign: str = "plus", positive_only: bool = False) -> np.ndarray:
    """Per-sample weights of BoN-RLB / RLB(P) for G samples of pi, given the failure probability p.

    Lemma 3 / Cor. 4 are expectations under pi_bon: E_{pi_bon}[(g+ 1{R=1} +- g- 1{R=0}) grad log pi].
    With samples of pi, E_pi[(pi_bon/pi)(y) h(y)] = E_{pi_bon}[h(y)] and Eq. 8 gives the ratio, so
    sample i gets (1/G) (pi_bon/pi)(y_i) g(R_i):

      correct:           (1-p^N)/(1-p) * g+       = N p^(N-1) / (1-p)
      wrong, sign=plus:  p^(N-1) * (+g-)          = +N p^N / (1-p)
      wrong, sign=minus: p^(N-1) * (-g-)          = -N p^N / (1-p)
      positive_only:     correct (1-p^N)/(1-p) * g_bar+ = N p^(N-1); wrong 0

    With the true p the expectation is exactly grad(1 - p^N) for plus and positive_only, and
    (1+p)/(1-p) grad(1 - p^N) for minus (tests/test_objectives_bon.py; §2.6).
    """
    c = np.asarray(correct, dtype=bool)
    G = c.size
    if G == 0:
        return np.zeros(0)
    if positive_only:
        return np.where(c, N * p ** (N - 1), 0.0) / G
    check_choice("bon_rlb", "sign", sign, RLB_SIGNS)
    if not p < 1.0:
        raise BonbenchError(f"bon_rlb: the failure probability must be < 1 (clip it), got {p}")
    wrong = N * p**N / (1.0 - p) * (1.0 if sign == "plus" else -1.0)
    return np.where(c, N * p ** (N - 1) / (1.0 - p), wrong) / G


def rlbp_unbiased_weights(correct: np.ndarray, N: int) -> np.ndarray:
    """BoN-RLB(P) with an exactly unbiased estimate of p^(N-1) (needs G >= N).

    The population weight of a correct sample is N p^(N-1) / G (``rlb_sample_weights``). p^(N-1) is
    estimated from the *other* G-1 samples by the U-statistic C(F_-i, N-1) / C(G-1, N-1), F_-i their
    failure count: it is unbiased for p^(N-1) and independent of y_i, so
    E[w_i grad log pi(y_i)] = (N/G) p^(N-1) E[1{R=1} grad log pi] and the sum is exactly grad(1 - p^N).
    """
    c = np.asarray(correct, dtype=bool)
    G = c.size
    if G < N:
        raise BonbenchError(f"bon_rlb_p with p_estimate='unbiased' needs at least N = {N} policy samples per prompt, got {G}")
    F = int((~c).sum())
    F_others = F - (~c).astype(int)  # failures among the other G-1 samples
    est = np.array([math.comb(int(f), N - 1) / math.comb(G - 1, N - 1) for f in F_others])
    return np.where(c, N * est, 0.0) / G


def failure_estimate(correct: np.ndarray, p_clip: float) -> float:
    """p_hat = fraction of the group's policy samples that fail, clipped to <= p_clip."""
    if correct.size == 0:
        return 0.0
    return min(float((~correct).mean()), float(p_clip))


P_SOURCES = ("group", "value")


def value_failure(group: Group, p_clip: float, what: str) -> float:
    """p from the learned value head (which regresses on the group's failing fraction), clipped to
    [0, p_clip] before the weights are computed, as Chow et al. clip theirs (§2.8)."""
    return min(max(value_of(group, what), 0.0), float(p_clip))


def failing_fraction(group: Group, what: str) -> float:
    """The value head's regression target for p: the failing fraction of the policy rows (unbiased for p)."""
    c = binary_correct(rewards_of(group, what)[policy_mask(group)], what)
    return float((~c).mean()) if c.size else 0.0


P_ESTIMATES = ("unbiased", "plugin")


def rlb_unbiased_weights(correct: np.ndarray, N: int) -> np.ndarray:
    """BoN-RLB's default: two-sided and exactly unbiased for grad(1 - p^N) (needs G >= max(N, 2)).

    grad J = N p^(N-1) E_pi[1{R=1} grad log pi] (§2.6) and E_pi[b grad log pi] = 0 for any b that does
    not depend on the sample, so with P_-i = C(F_-i, N-1)/C(G-1, N-1) (the unbiased U-statistic of
    p^(N-1) from the other G-1 samples, F_-i their failure count) and R_-i their mean reward,

        w_i = (N/G) P_-i (R_i - R_-i):  correct +(N/G) P_-i p_hat_-i,  wrong -(N/G) P_-i (1 - p_hat_-i)

    has E[sum_i w_i grad log pi(y_i)] = grad(1 - p^N) exactly: P_-i R_-i is a function of the other
    samples (a leave-one-out baseline scaled by P_-i). It raises the correct samples and lowers the
    wrong ones (the sign of Lemma 3's prose, "penalise the negatives"), and a group that is all wrong
    or all correct gets weight 0, so the trainer's --skip-zero-grad applies to it.
    """
    c = np.asarray(correct, dtype=bool)
    G = c.size
    if G < max(N, 2):
        raise BonbenchError(f"bon_rlb with p_estimate='unbiased' needs at least max(N, 2) = {max(N, 2)} policy "
                            f"samples per prompt, got {G}; raise --group or use -O p_estimate=plugin")
    fail = (~c).astype(int)
    F_others = int(fail.sum()) - fail
    est = np.array([math.comb(int(f), N - 1) / math.comb(G - 1, N - 1) for f in F_others])
    r = c.astype(np.float64)
    r_others = (r.sum() - r) / (G - 1)
    return N * est * (r - r_others) / G


@register_objective("bon_rlb", paper=CHOW + " §4 Lemma 3 (BoN-RLB)",
                    summary="BoN-RLB: binary-reward BoN gradient; exactly unbiased U-statistic by default, "
                            "plug-in (g+, g-) forms as options")
def bon_rlb(N: int = 4, p_estimate: str = "unbiased", sign: str = "plus", p_clip: float = 0.95,
            p_source: str = "group") -> Objective:
    """BoN-RLB (Lemma 3, §2.6) for a 0/1 reward, which with the reward as its own verifier is pass@N.

    p_estimate='unbiased' (default): ``rlb_unbiased_weights``, exactly unbiased for grad(1 - p^N) at
    every G >= max(N, 2) (tests/test_objectives_exactness.py); ``sign`` and ``p_clip`` do not apply.
    p_estimate='plugin' (before issue 24 the only form): the reported weights (g+, +-g-) of
    ``rlb_sample_weights`` at p_hat = the group's failing fraction clipped to <= p_clip. 1/(1-p) has no
    unbiased estimator from finitely many Bernoulli draws, and at small G the bias reverses the step:
    expected update c grad J with c < 0 at G = 4, 8 (docs/objectives-bon.md has the measured c).
    sign='plus' is the form that is exactly unbiased at the true p; 'minus' (the paper's "penalise
    the negatives") has expectation (1+p)/(1-p) grad J at the true p.
    p_source='value' (the paper's choice): p = the learned value head's estimate, trained on the
    groups' failing fractions and clipped to [0, p_clip] (the paper clips its estimate; its clip values
    were lost, 0.95 bounds 1/(1-p) by 20), in the (g+, +-g-) weights; p_estimate does not apply.
    Exactly unbiased (sign='plus') when the value is the true p.
    """
    check_int("bon_rlb", "N", N, 1)
    check_choice("bon_rlb", "p_estimate", p_estimate, P_ESTIMATES)
    check_choice("bon_rlb", "sign", sign, RLB_SIGNS)
    check_choice("bon_rlb", "p_source", p_source, P_SOURCES)
    if not (isinstance(p_clip, (int, float)) and 0.0 <= p_clip < 1.0):
        raise BonbenchError(f"bon_rlb: p_clip must lie in [0, 1), got {p_clip!r}")
    by_value = p_source == "value"
    unbiased = p_estimate == "unbiased" and not by_value
    if unbiased and (sign != "plus" or p_clip != 0.95):
        # the exact form has no p to clip and no sign to choose: say so rather than ignore the option
        raise BonbenchError("bon_rlb: sign and p_clip apply to the plug-in (g+, g-) weights; add -O p_estimate=plugin "
                            "(or --p-source value) to use them")

    def weights(group: Group) -> np.ndarray:
        mask = policy_mask(group)
        c = binary_correct(rewards_of(group, "bon_rlb")[mask], "bon_rlb")
        if unbiased:
            return scatter(mask, rlb_unbiased_weights(c, N))
        p = value_failure(group, p_clip, "bon_rlb") if by_value else failure_estimate(c, p_clip)
        return scatter(mask, rlb_sample_weights(c, p, N, sign))

    return Objective("bon_rlb", weights, frozenset({"value"}) if by_value else frozenset(),
                     {"N": N, "p_estimate": p_estimate, "sign": sign, "p_clip": p_clip, "p_source": p_source},
                     max(N, 2) if unbiased else 1,
                     (lambda g: failing_fraction(g, "bon_rlb")) if by_value else None)




@register_objective("bon_rlb_p", paper=CHOW + " §4 Corollary 4 (BoN-RLB(P))",
                    summary="BoN-RLB(P): positive-only binary-reward BoN gradient; exactly unbiased p^(N-1) by default")
def bon_rlb_p(N: int = 4, p_estimate: str = "unbiased", p_clip: float = 0.95, p_source: str = "group") -> Objective:
    """BoN-RLB(P) (Corollary 4): only correct samples, weight g_bar+ under pi_bon = N p^(N-1) under pi.

    p_estimate='unbiased' (default): p^(N-1) from the other G-1 samples by C(F_-i, N-1)/C(G-1, N-1);
    exactly unbiased for grad(1 - p^N), needs G >= N, no clip needed (``rlbp_unbiased_weights``).
    p_estimate='plugin': p_hat = failing fraction of the group clipped to <= p_clip, as in ``bon_rlb``;
    consistent, not unbiased.
    p_source='value' (the paper's choice) replaces both by the learned value head's estimate of p,
    clipped to [0, p_clip]; p_estimate then does not apply. Exactly unbiased when the value is the true p.
    """
    check_int("bon_rlb_p", "N", N, 1)
    check_choice("bon_rlb_p", "p_estimate", p_estimate, P_ESTIMATES)
    check_choice("bon_rlb_p", "p_source", p_source, P_SOURCES)
    if not (isinstance(p_clip, (int, float)) and 0.0 <= p_clip <= 1.0):
        raise BonbenchError(f"bon_rlb_p: p_clip must lie in [0, 1], got {p_clip!r}")
    by_value = p_source == "value"
    min_group = N if p_estimate == "unbiased" and not by_value else 1

    def weights(group: Group) -> np.ndarray:
        mask = policy_mask(group)
        c = binary_correct(rewards_of(group, "bon_rlb_p")[mask], "bon_rlb_p")
        if by_value:
            return scatter(mask, rlb_sample_weights(c, value_failure(group, p_clip, "bon_rlb_p"), N, positive_only=True))
        if p_estimate == "unbiased":
            return scatter(mask, rlbp_unbiased_weights(c, N))
        return scatter(mask, rlb_sample_weights(c, failure_estimate(c, p_clip), N, positive_only=True))

    return Objective("bon_rlb_p", weights, frozenset({"value"}) if by_value else frozenset(),
                     {"N": N, "p_estimate": p_estimate, "p_clip": p_clip, "p_source": p_source}, min_group,
                     (lambda g: failing_fraction(g, "bon_rlb_p")) if by_value else None)

