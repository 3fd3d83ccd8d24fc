"""Chow et al.'s BoN-SFT (Lemma 1, §2.3) with the exponential tilt pi_lambda and its lambda_N (§2.2),
and the supervised baselines: SFT on the expert rows, STaR on the policy's own correct samples.
Exactness: tests/test_objectives_bon.py; docs/objectives-bon.md. Like every objective, these only
turn a group's numbers into per-sample weights: no tensors, no sampling, no optimiser step (the
trainer does those).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from bonbench.api.objective import Group, Objective, register_objective
from bonbench.core.errors import BonbenchError
from bonbench.plugins.objectives.common import (
    CHOW,
    check_choice,
    check_int,
    policy_mask,
    require,
    rewards_of,
    row_values,
)

LAMBDA_RULES = ("kl", "winrate", "reverse_kl")


def tilt_log_z(lam: float) -> float:
    """log Z(lambda) = log((e^lambda - 1)/lambda) with Q ~ U(0, 1) under pi (continuous verifier)."""
    if lam == 0.0:
        return 0.0
    if lam > 0:
        return lam + math.log(-math.expm1(-lam)) - math.log(lam)
    return math.log(math.expm1(lam) / lam)


def tilt_win_rate(lam: float) -> float:
    """W(lambda) = E_{pi_lambda}[Q] = 1/(1 - e^-lambda) - 1/lambda."""
    if abs(lam) < 1e-6:
        return 0.5 + lam / 12.0
    return 1.0 / (-math.expm1(-lam)) - 1.0 / lam


def tilt_kl(lam: float) -> float:
    """KL(pi_lambda || pi) = lambda W(lambda) - log Z(lambda)."""
    return lam * tilt_win_rate(lam) - tilt_log_z(lam)


def _tilt_moments(lam: float) -> tuple[float, float]:
    """(Var_lambda(u), Cov_lambda(u, log u)) for the density e^(lambda u)/Z on (0, 1), by quadrature."""
    from scipy.integrate import quad

    def E(f: Callable[[float], float]) -> float:
        return quad(lambda u: f(u) * math.exp(lam * (u - 1.0)), 0.0, 1.0, epsabs=1e-15, epsrel=1e-13, limit=200)[0]

    z = E(lambda u: 1.0)
    m1 = E(lambda u: u) / z
    m2 = E(lambda u: u * u) / z
    ml = E(lambda u: math.log(u) if u > 0 else 0.0) / z
    mul = E(lambda u: u * math.log(u) if u > 0 else 0.0) / z
    return m2 - m1 * m1, mul - m1 * ml


def lambda_n(N: int, rule: str = "kl") -> float:
    """lambda_N for the tilt pi_lambda approximating BoN with a continuous verifier (§2.2 table).

    kl:         KL(pi_lambda || pi) = log N - (N-1)/N            (equal KL to BoN; the default)
    winrate:    W(lambda) = N/(N+1)                              (equal win rate = forward-KL projection)
    reverse_kl: argmin_lambda KL(pi_lambda || pi_bon); solved as the root of its derivative
                lambda Var_lambda(u) = (N-1) Cov_lambda(u, log u), u = Q ~ e^(lambda u)/Z on (0, 1).
    N = 4: 4.916908 / 4.801008 / 5.259443. All approach N + 1 for large N. N = 1 gives 0 (no tilt).
    """
    from scipy.optimize import brentq

    check_int("lambda_n", "N", N, 1)
    check_choice("lambda_n", "rule", rule, LAMBDA_RULES)
    if N == 1:
        return 0.0
    hi = 10.0 * N + 10.0
    if rule == "kl":
        target = math.log(N) - (N - 1) / N
        return brentq(lambda lam: tilt_kl(lam) - target, 1e-9, hi, xtol=1e-13, rtol=1e-15)
    if rule == "winrate":
        target = N / (N + 1)
        return brentq(lambda lam: tilt_win_rate(lam) - target, 1e-9, hi, xtol=1e-13, rtol=1e-15)

    def dkl(lam: float) -> float:
        var, cov = _tilt_moments(lam)
        return lam * var - (N - 1) * cov

    return brentq(dkl, 1e-3, hi, xtol=1e-12, rtol=1e-14)



WINS = ("indicator", "sigmoid")


def win_kernel(a: np.ndarray, b: np.ndarray, win: str = "indicator") -> np.ndarray:
    """K[i, j] = how much a_i wins against b_j: 1{a_i >= b_j} (indicator, §2.2) or sigmoid(a_i - b_j)
    (the paper's softened win rate)."""
    d = np.asarray(a, dtype=np.float64)[:, None] - np.asarray(b, dtype=np.float64)[None, :]
    if win == "indicator":
        return (d >= 0).astype(np.float64)
    if win == "sigmoid":
        return 0.5 * (1.0 + np.tanh(0.5 * d))  # = 1 / (1 + e^-d) without overflow
    raise BonbenchError(f"bon_sft: unknown win {win!r}; choose from {', '.join(WINS)}")


def bon_sft_weights(expert_keys: np.ndarray, sample_keys: np.ndarray, lam: float,
                    mass: np.ndarray | None = None, win: str = "indicator") -> tuple[np.ndarray, np.ndarray]:
    """Weights (expert rows, policy rows) of grad log pi_lambda(y*) summed over the expert rows.

    Lemma 1:  grad log pi_lambda(y*) = grad log pi(y*) + lambda grad Q(y*)
                                       - E_{y'~pi_lambda}[grad log pi(y') + lambda grad Q(y')],
              grad Q(y) = E_{y''~pi}[K(r(y), r(y'')) grad log pi(y'')],
    K the win kernel (``win_kernel``: 1{r >= r''}, or the paper's sigmoid(r - r'')). Every term is an
    expectation of grad log pi at samples of pi, so it becomes weights on them:

      expert row:        1
      policy sample j:   lambda m_j sum_e K(r*_e, r_j)                   (the lambda grad Q(y*) terms)
                         - E * u_j                                       (E[grad log pi(y')], y'~pi_lambda)
                         - lambda E * sum_k u_k K(r_k, r_j) m_jk         (E[lambda grad Q(y')])

    E = number of expert rows, u_k = importance weights of pi_lambda / pi normalised to sum 1.

    ``mass=None`` (a sampled group, m_j = 1/G): Q_k is estimated from the other G-1 samples,
    u_k = exp(lambda Q_k) / sum_l exp(lambda Q_l) (self-normalised importance weights), m_jk = 1/(G-1)
    over pairs k != j. Self-normalisation and exp(lambda Q_hat) make this *consistent* as G grows, not
    unbiased at finite G (measured bias: docs/objectives-bon.md, tests/test_objectives_exactness.py).
    ``mass`` given (the population form): the policy rows are the whole support with probabilities
    ``mass``; Q_k = sum_l mass_l K(r_k, r_l), u_k = mass_k exp(lambda Q_k)/Z, m_jk = mass_j; the
    result is then exactly grad log pi_lambda(y*) (tests/test_objectives_bon.py).
    """
    s = np.asarray(sample_keys, dtype=np.float64)
    ek = np.asarray(expert_keys, dtype=np.float64)
    E = ek.size
    G = s.size
    if E == 0:
        return np.zeros(0), np.zeros(G)
    if G == 0:
        raise BonbenchError("bon_sft needs policy samples beside the expert rows (they estimate the normaliser)")
    n_exp_ge = win_kernel(ek, s, win).sum(axis=0)  # sum_e K(r*_e, r_j), for every sample j
    K = win_kernel(s, s, win)  # K[k, j] = K(r_k, r_j)
    if mass is None:
        if G < 2:
            raise BonbenchError("bon_sft needs at least 2 policy samples per prompt")
        off = K - np.diag(np.diag(K))  # pairs k != j only: Q and grad Q from the *other* samples
        a = lam * off.sum(axis=1) / (G - 1)  # lambda Q_hat_k
        u = np.exp(a - a.max())
        u /= u.sum()
        w = lam * n_exp_ge / G - E * u - lam * E * (u @ off) / (G - 1)
    else:
        m = np.asarray(mass, dtype=np.float64)
        a = lam * (K * m[None, :]).sum(axis=1)
        u = m * np.exp(a - a.max())
        u /= u.sum()
        w = lam * m * n_exp_ge - E * u - lam * E * m * (u @ K)
    return np.ones(E), w


SFT_KEYS = ("rewards", "scores")


@register_objective("bon_sft", paper=CHOW + " §4 Lemma 1 (BoN-SFT)", needs=("expert",),
                    summary="BoN-SFT: likelihood of the expert answer under the tilted BoN approximation pi_lambda_N")
def bon_sft(N: int = 4, lambda_rule: str = "kl", lam: float | None = None, key: str = "rewards",
            win: str = "indicator") -> Objective:
    """BoN-SFT (Lemma 1): max log pi_lambda(y*) for the expert rows; ``bon_sft_weights`` (sampled form).

    lambda = ``lam`` if given, else ``lambda_n(N, lambda_rule)`` (kl by default: math-reference §2.2
    recommends it; the paper's own 1-D equation is not recovered). ``key``: what the win rate Q ranks
    by, the reward (default) or the verifier score (key='scores' needs scores, expert rows included).
    ``win``: 'indicator' (default) Q(y) = Pr[r(y) >= r(y'')]; 'sigmoid' the paper's softened
    Q(y) = E[sigmoid(r(y) - r(y''))]. The indicator stays the default because lambda_N's equations
    (§2.2) are derived for it (Q ~ U(0, 1) under pi with a continuous verifier), and it does not
    depend on the reward's scale; with 'sigmoid' lambda_N is the same number, not re-derived.
    Consistent, not unbiased (self-normalised importance weights; measured bias in the docs). Groups
    without expert rows get zero weights.
    """
    check_int("bon_sft", "N", N, 1)
    check_choice("bon_sft", "lambda_rule", lambda_rule, LAMBDA_RULES)
    check_choice("bon_sft", "key", key, SFT_KEYS)
    check_choice("bon_sft", "win", win, WINS)
    if lam is not None and not (isinstance(lam, (int, float)) and lam >= 0):
        raise BonbenchError(f"bon_sft: lam must be a number >= 0, got {lam!r}")
    lam_value = float(lam) if lam is not None else lambda_n(N, lambda_rule)

    def weights(group: Group) -> np.ndarray:
        require(group, "expert", "bon_sft")
        mask = policy_mask(group)
        keys = row_values(group, "scores", "bon_sft") if key == "scores" else rewards_of(group, "bon_sft")
        w_exp, w_pol = bon_sft_weights(keys[~mask], keys[mask], lam_value, win=win)
        out = np.zeros(group.size)
        out[~mask] = w_exp
        out[mask] = w_pol
        return out

    needs = frozenset({"expert", "scores"}) if key == "scores" else frozenset({"expert"})
    return Objective("bon_sft", weights, needs, {"N": N, "lambda_rule": lambda_rule, "lam": lam, "key": key,
                                                 "win": win, "lambda": lam_value}, 2)



@register_objective("sft", paper="supervised fine-tuning on the task's reference solutions (Chow et al.'s SFT baseline)",
                    needs=("expert",), summary="SFT: weight 1 on every expert row, 0 on policy samples")
def sft() -> Objective:
    """SFT: maximise sum over expert rows of log pi(y*): w = 1 on expert rows, 0 elsewhere."""

    def weights(group: Group) -> np.ndarray:
        require(group, "expert", "sft")
        return (~policy_mask(group)).astype(np.float64)

    return Objective("sft", weights, frozenset({"expert"}), {}, 1)


STAR_NORMALISE = ("group", "correct")


@register_objective("star", paper="STaR, Zelikman et al. 2022, arXiv 2203.14465 (Chow et al.'s baseline)",
                    summary="STaR: SFT on the policy's own correct samples; w = 1[R >= threshold] / G")
def star(threshold: float = 1.0, normalise: str = "group") -> Objective:
    """STaR: fine-tune on the policy's own samples that are correct (and on its rationalisations).

    normalise='group' (default): w_i = 1[R_i >= threshold] / G. Then E[sum_i w_i grad log pi(y_i)] =
    grad Pr_pi[R >= threshold] exactly: STaR's filtered SFT is REINFORCE on the 0/1 success without a
    baseline (Zelikman et al. §3.3 note the same). normalise='correct': w_i = 1[...] / #correct, the
    mean over the kept samples as in STaR's dataset; not the gradient of a fixed objective.
    Expert rows are STaR's rationalisations (the trainer's ``--rationalize``: samples drawn with the gold
    answer as a hint for prompts the policy failed on, trained on without the hint); those that reach
    the threshold are kept like correct samples (weight 1/G, G the number of policy samples, or
    1/#kept). They are not samples of pi, so with them the step is no longer grad Pr_pi[R >= threshold].
    """
    check_choice("star", "normalise", normalise, STAR_NORMALISE)

    def weights(group: Group) -> np.ndarray:
        ok = rewards_of(group, "star") >= threshold  # policy samples and rationalisations alike
        n_policy = int(policy_mask(group).sum())
        w = ok / max(n_policy, 1) if normalise == "group" else ok / max(int(ok.sum()), 1)
        return w.astype(np.float64)

    return Objective("star", weights, frozenset(), {"threshold": threshold, "normalise": normalise}, 1)

