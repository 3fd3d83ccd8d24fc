"""Chow et al.'s BoN-RL (§2.4: the exact N-sample policy gradient of J_N, a U-statistic over the
N-subsets of the group; Lemma 2's text states a single-sample tilted form, which this is not) and
the RL-S / RL-V baselines (RLOO on the reward / on the verifier score).

Each takes ``baseline``: "loo" (default: the other samples' value, no network), "none", or "value",
the trainer's learned value head (Chow et al. use a learned value baseline in all RL runs, §2.8):
the head regresses on the group's unbiased estimate of the objective (``value_target``: U_N for
BoN-RL, the mean reward / score for RL-S / RL-V) and its estimate is read before the step's samples,
so every baseline keeps the estimator exactly unbiased.
Exactness: tests/test_objectives_bon.py; docs/objectives-bon.md.
"""

from __future__ import annotations

import numpy as np

from bonbench.api.objective import Group, Objective, register_objective
from bonbench.core.errors import BonbenchError
from bonbench.metrics.pass_bon import bon_curve
from bonbench.plugins.objectives.common import (
    CHOW,
    VALUE_BASELINES,
    centred,
    check_choice,
    check_int,
    policy_mask,
    rewards_of,
    row_values,
    scatter,
    value_of,
)


def bon_value(keys: np.ndarray, grades: np.ndarray, N: int) -> float:
    """U_N: the mean over all N-subsets of the group of R(pick), pick = top key, ties uniform.

    An unbiased estimate of J_N (math-reference §1.2: rank weights averaged over tie blocks).
    """
    return float(bon_curve([keys], [grades], [N])[0, 0])


def bon_rl_weights(keys: np.ndarray, grades: np.ndarray, N: int, baseline: str = "loo",
                   value: float | None = None) -> np.ndarray:
    """BoN-RL (§2.4, exact N-sample identity): grad J_N = E[(R(y*) - b) sum_{i<=N} grad log pi(y_i)], G >= N.

    The estimator is averaged over all C(G, N) N-subsets S of the group (each is an iid N-sample):

      w_i = C(G,N)^-1 sum_{S ni i} (f(S) - b_i),   f(S) = R of the top-key member of S (ties: mean
                                                  over the tied top block = uniform pick)

    Since sum_{S ni i} f(S) = C(G,N) U_N(all) - C(G-1,N) U_N(-i) and sample i lies in N/G of the
    subsets,  w_i = U_N(all) - (G-N)/G U_N(-i) - (N/G) b_i,  U_N(-i) the same U-statistic without i.

    baseline none: b_i = 0.
    baseline loo:  b_i = U_m(-i), m = min(N, G-1): the BoN value of the other samples, computed
                   without y_i. For G > N it is an unbiased estimate of J_N itself (the value
                   baseline of the paper, here without a value network) and w_i = U_N(all) - U_N(-i);
                   for G = N it is the (N-1)-sample value f(y_-i) (Tang et al.'s leave-one-out,
                   math-reference §4.2) and w_i = f(y) - f(y_-i). Either way b_i is a function of the
                   other samples only, so E[b_i grad log pi(y_i)] = E[b_i] E[grad log pi(y_i)] = 0:
                   exactly unbiased (checked by exact enumeration in the tests).
    baseline value: b_i = ``value``, the learned estimate of J_N(x) (a function of x alone):
                   w_i = U_N(all) - (G-N)/G U_N(-i) - (N/G) value; exactly unbiased for any value.
    """
    keys = np.asarray(keys, dtype=np.float64)
    grades = np.asarray(grades, dtype=np.float64)
    G = keys.size
    if G < N:
        raise BonbenchError(f"BoN-RL with N = {N} needs at least N policy samples per prompt, got {G}")
    if baseline == "value" and value is None:
        raise BonbenchError("BoN-RL with baseline='value' needs the learned value (--baseline value)")
    u_all = bon_value(keys, grades, N)
    b = N / G * value if baseline == "value" and value is not None else 0.0  # None was refused above
    if G == 1:
        if baseline == "loo":
            raise BonbenchError("BoN-RL with baseline='loo' needs at least 2 policy samples per prompt")
        return np.array([u_all - b])
    idx = np.arange(G)
    loo = np.array([np.delete(idx, i) for i in idx])  # [G, G-1] leave-one-out index rows
    m = min(N, G - 1)
    u_minus = bon_curve(keys[loo], grades[loo], [m])[:, 0]  # U_m(-i) for every i
    if baseline in ("none", "value"):
        return np.asarray(u_all - (u_minus * (G - N) / G if G > N else 0.0) - b)
    if baseline == "loo":
        return u_all - u_minus
    raise BonbenchError(f"BoN-RL: unknown baseline {baseline!r}; choose from {', '.join(VALUE_BASELINES)}")


def _bon_rl(name: str, by_scores: bool, N: int, baseline: str) -> Objective:
    check_int(name, "N", N, 1)
    check_choice(name, "baseline", baseline, VALUE_BASELINES)
    min_group = max(N, 2) if baseline == "loo" else N

    def policy_rows(group: Group) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r = rewards_of(group, name)
        keys = row_values(group, "scores", name) if by_scores else r
        mask = policy_mask(group)
        if mask.sum() < min_group:
            raise BonbenchError(f"{name} with N = {N} and baseline={baseline!r} needs at least {min_group} "
                                f"policy samples per prompt, got {int(mask.sum())}")
        return mask, keys[mask], r[mask]

    def weights(group: Group) -> np.ndarray:
        mask, keys, r = policy_rows(group)
        value = value_of(group, name) if baseline == "value" else None
        return scatter(mask, bon_rl_weights(keys, r, N, baseline, value))

    def value_target(group: Group) -> float:
        _, keys, r = policy_rows(group)
        return bon_value(keys, r, N)  # U_N: unbiased for J_N(x)

    needs = ({"scores"} if by_scores else set()) | ({"value"} if baseline == "value" else set())
    return Objective(name, weights, frozenset(needs), {"N": N, "baseline": baseline}, min_group,
                     value_target if baseline == "value" else None)


@register_objective("bon_rl_s", paper=CHOW + " §4 BoN-RL-S (exact N-sample gradient; not Lemma 2's single-sample form)",
                    summary="BoN-RL-S: exact N-sample BoN policy gradient, pick by the reward, U-statistic over N-subsets")
def bon_rl_s(N: int = 4, baseline: str = "loo") -> Objective:
    """BoN-RL-S: grad E[R(best of N by R)], exact N-sample form (§2.4); see ``bon_rl_weights``.

    N = 4 by default: the paper trains with N' = 32 on MATH (§2.8), but the exact estimator needs
    G >= N samples per prompt, and small N is the practical default; set N to your inference N.
    """
    return _bon_rl("bon_rl_s", False, N, baseline)


@register_objective("bon_rl_v", paper=CHOW + " §4 BoN-RL-V (exact N-sample gradient; not Lemma 2's single-sample form)",
                    needs=("scores",),
                    summary="BoN-RL-V: exact N-sample BoN policy gradient, pick by the verifier score, graded by the reward")
def bon_rl_v(N: int = 4, baseline: str = "loo") -> Objective:
    """BoN-RL-V: grad E[R(argmax of N by verifier score)], exact N-sample form (§2.4); ties uniform."""
    return _bon_rl("bon_rl_v", True, N, baseline)



def rl_weights(values: np.ndarray, baseline: str = "loo", what: str = "rl", value: float | None = None) -> np.ndarray:
    """w_i = (v_i - b_i) / G: REINFORCE (none), RLOO (loo) or the learned value b_i = ``value`` (value);
    E = grad E[v] exactly."""
    v = np.asarray(values, dtype=np.float64)
    if baseline == "value":
        if value is None:
            raise BonbenchError(f"{what} with baseline='value' needs the learned value (--baseline value)")
        return (v - value) / v.size
    return centred(v, baseline, what) / v.size


def _rl(name: str, by_scores: bool, baseline: str) -> Objective:
    check_choice(name, "baseline", baseline, VALUE_BASELINES)

    def policy_values(group: Group) -> tuple[np.ndarray, np.ndarray]:
        v = row_values(group, "scores", name) if by_scores else rewards_of(group, name)
        mask = policy_mask(group)
        return mask, v[mask]

    def weights(group: Group) -> np.ndarray:
        mask, v = policy_values(group)
        return scatter(mask, rl_weights(v, baseline, name, value_of(group, name) if baseline == "value" else None))

    def value_target(group: Group) -> float:
        return float(policy_values(group)[1].mean())  # the mean reward (score): unbiased for E[v | x]

    needs = ({"scores"} if by_scores else set()) | ({"value"} if baseline == "value" else set())
    return Objective(name, weights, frozenset(needs), {"baseline": baseline}, 2 if baseline == "loo" else 1,
                     value_target if baseline == "value" else None)


@register_objective("rl_s", paper="RLOO (Kool et al. 2019; Ahmadian et al. 2024) on the reward (Chow et al.'s RL-S)",
                    summary="RL-S: policy gradient on the reward R, RLOO baseline")
def rl_s(baseline: str = "loo") -> Objective:
    """RL-S: grad E[R], w_i = (R_i - mean_{j != i} R_j) / G (loo), or (R_i - V(x)) / G (value)."""
    return _rl("rl_s", False, baseline)


@register_objective("rl_v", paper="RLOO on the verifier score as reward (Chow et al.'s RL-V)", needs=("scores",),
                    summary="RL-V: policy gradient on the verifier score, RLOO baseline")
def rl_v(baseline: str = "loo") -> Objective:
    """RL-V: grad E[r], r the verifier score; w_i = (r_i - mean_{j != i} r_j) / G, or (r_i - V(x)) / G."""
    return _rl("rl_v", True, baseline)
