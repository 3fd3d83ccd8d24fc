"""Mean-reward policy gradients and Tang et al.'s k-sample objectives as per-group weights.

Tang, Zheng, Synnaeve, Munos 2025, "Optimizing Language Models for Inference Time Objectives using
Reinforcement Learning" (arXiv 2503.19595; math-reference §4) train for the k-sample objective

    J_k(theta) = E_{y_1..y_k iid pi_theta(.|x)} [ f(y_1, .., y_k) ]            (§4.1)

with f = max reward (pass@k / max@k, ``passk``), the value of the plurality answer (``majk``) or a
softmax / log-sum-exp interpolation between mean and max (``softmaxk``). ``mean`` is the ordinary
single-sample objective E[r] with RLOO / GRPO / Dr.GRPO advantages, for comparison.

Scale conventions (the trainer ascends sum_i w_i log pi(y_i | x), base.py):

* ``mean``: w_i = A_i / G. With baseline none or loo, E[sum_i w_i grad log pi(y_i)] = grad E[r]
  exactly: the 1/G is the mean over the group, so doubling G halves the weights.
* k-sample objectives: w_i = A_i, the paper's advantage, with no 1/k: the LOO estimator *sums*
  over the k samples (§4.2) and is then exactly grad J_k. A G > k group averages that estimator over
  its k-subsets (§4.7), so every weight carries the factor k/G (each sample lies in k/G of them).
  So at G = k a sample's weight is about k times what ``mean`` gives it for comparable advantages.
* Rewards of +-1 instead of 0/1 double every advantage (a pass@k LOO advantage of 2, not 1).
  Adding a constant to all rewards shifts f by it, so the weights do not change, except with the
  ``none`` baselines, at k = 1 (f of the empty tuple is 0) and for majk sub-tuples left with only
  abstainers (they score 0).

Every estimator's exact expectation is checked on a tabular softmax policy in
tests/test_objectives_tang.py. Not here: token-level normalisation (the trainer sums token
log-probabilities, which is Dr.GRPO's choice), PPO clipping (§4.9), KL terms.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from bonbench.api.objective import Group, Objective, register_objective
from bonbench.core.errors import BonbenchError
from bonbench.plugins.objectives.ksample import (
    check_options,
    enumerated_means,
    ksample_weights,
    logsumexp_value,
    maj_means,
    max_means,
    softmax_value,
)

TANG = "Tang, Zheng, Synnaeve, Munos 2025, arXiv 2503.19595"


def _rewards(group: Group, what: str, min_group: int) -> np.ndarray:
    r = np.asarray(group.rewards, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(r)):
        raise BonbenchError(f"{what}: rewards must be finite")
    if r.size < min_group:
        raise BonbenchError(f"{what} needs at least {min_group} samples per prompt, got {r.size}")
    if group.expert is not None and np.any(group.expert):
        raise BonbenchError(f"{what} uses policy samples only; this group has expert rows")
    return r


# ------------------------------------------------------------------------------------------------
# mean reward: REINFORCE / RLOO / GRPO / Dr.GRPO

MEAN_BASELINES = ("loo", "none", "mean")
NORMALISE = ("none", "grpo", "drgrpo")


def mean_weights(rewards: np.ndarray, baseline: str = "loo", normalise: str = "none", eps: float = 1e-6) -> np.ndarray:
    """Weights w_i = A_i / G for the single-sample objective E[r].

    A_i = r_i - b_i with b_i by ``baseline``:
      none: b_i = 0 (REINFORCE; Williams 1992). E[g] = grad E[r].
      loo:  b_i = mean_{j != i} r_j (RLOO; Kool et al. 2019, Ahmadian et al. 2024 arXiv 2402.14740).
            E[g] = grad E[r] exactly: b_i does not depend on y_i.
      mean: b_i = mean_j r_j (mean-centred). r_i - mean = (G-1)/G (r_i - mean_{j != i} r_j), so
            E[g] = (G-1)/G grad E[r]: unbiased in direction, shrunk by (G-1)/G.
    then ``normalise``:
      none:   A_i as is.
      grpo:   A_i / (std(r) + eps), std with ddof = 1 as torch.std in TRL / verl (GRPO, Shao et
              al. 2024, arXiv 2402.03300, with baseline=mean). Biased: for 0/1 rewards the expected
              step is a positive multiple of grad E[r] whose factor depends on the solve rate (the
              prompt re-weighting Dr.GRPO points out); for real rewards not even parallel to it.
      drgrpo: A_i as is (Dr.GRPO, Liu et al. 2025, arXiv 2503.20783, with baseline=mean): Dr.GRPO
              drops the std division and GRPO's per-response 1/|y_i| token average. The latter is
              the trainer's job: base.py's trainer sums token log-probabilities (no 1/|y_i|), which
              is Dr.GRPO's choice, so the weights equal normalise=none.
    The 1/G is GRPO's own 1/G and makes none / loo exactly grad E[r] (see the module's scales).
    With baseline=loo the GRPO / Dr.GRPO advantages are G/(G-1) times the baseline=mean ones.
    """
    r = np.asarray(rewards, dtype=np.float64)
    G = r.size
    if baseline == "none":
        a = r.copy()
    elif baseline == "loo":
        a = r - (r.sum() - r) / (G - 1) if G > 1 else np.zeros(G)
    elif baseline == "mean":
        a = r - r.mean()
    else:
        raise BonbenchError(f"mean: unknown baseline {baseline!r}; choose from {', '.join(MEAN_BASELINES)}")
    if normalise == "grpo":
        a = a / (r.std(ddof=1) + eps)
    elif normalise not in ("none", "drgrpo"):
        raise BonbenchError(f"mean: unknown normalise {normalise!r}; choose from {', '.join(NORMALISE)}")
    return a / G


@register_objective("mean", paper="REINFORCE / RLOO (Kool et al. 2019); GRPO (arXiv 2402.03300); Dr.GRPO (arXiv 2503.20783)",
                    summary="mean-reward policy gradient: RLOO by default; GRPO / Dr.GRPO advantages via normalise=")
def mean_objective(baseline: str = "loo", normalise: str = "none", eps: float = 1e-6) -> Objective:
    """Mean-reward policy gradient E[r]: w_i = (r_i - b_i) / G, optionally GRPO-normalised."""
    if baseline not in MEAN_BASELINES:
        raise BonbenchError(f"mean: unknown baseline {baseline!r}; choose from {', '.join(MEAN_BASELINES)}")
    if normalise not in NORMALISE:
        raise BonbenchError(f"mean: unknown normalise {normalise!r}; choose from {', '.join(NORMALISE)}")
    if not (isinstance(eps, (int, float)) and eps >= 0):
        raise BonbenchError(f"mean: eps must be a number >= 0, got {eps!r}")
    min_group = 1 if baseline == "none" and normalise != "grpo" else 2

    def weights(group: Group) -> np.ndarray:
        return mean_weights(_rewards(group, "mean", min_group), baseline, normalise, eps)

    return Objective("mean", weights, frozenset(), {"baseline": baseline, "normalise": normalise, "eps": eps}, min_group)


# ------------------------------------------------------------------------------------------------
# k-sample objectives (one engine: bonbench.plugins.objectives.ksample)


def passk_weights(rewards: np.ndarray, k: int = 4, baseline: str = "loo", p: int = 2,
                  leave_p_out_form: str = "unbiased") -> np.ndarray:
    """pass@k / max@k, f(y) = max_i r(y_i) (§4.3), J_k = E[max of k rewards].

    LOO advantage A_i = max(r) - max(r_{-i}) (§4.2-4.3): r_(k) - r_(k-1) for the unique best sample,
    0 for everyone else and for all when the maximum is tied; for 0/1 rewards 1 exactly when i is the
    only correct sample. At G = k the weights are these advantages; at G > k their U-statistic
    average over k-subsets (§4.7), computed by sorted ranks (exact with ties, any G).
    ``baseline``: loo / none / leave_p_out (unbiased form) -> E = grad J_k; biased (§4.4) -> grad
    J_{k-1}; leave_p_out with leave_p_out_form=paper (App. B.2, §4.6) -> grad J^(p) = grad J_{k-p}.
    """
    r = np.asarray(rewards, dtype=np.float64)
    check_options("passk", k, baseline, p, leave_p_out_form)
    return ksample_weights(max_means(r), r.size, k, baseline, p, leave_p_out_form)


def majk_weights(answers: tuple[object, ...] | None, rewards: np.ndarray, k: int = 4, baseline: str = "loo", p: int = 2,
                 leave_p_out_form: str = "unbiased") -> np.ndarray:
    """Majority voting (§4.5): f(y) = value of the plurality answer, tied answers uniform.

    An answer's value is the reward of its samples (their mean if they differ); ``None`` answers
    abstain: they fill one of the k slots, cast no vote, and their own reward is ignored; a tuple in
    which all abstain scores f = 0. LOO advantages A_i = f(y) - f(y_{-i}) are computed from f
    directly (not by "i changes the winner", which is wrong when top answers tie): at G = k the
    weights are A_i; at G > k the U-statistic average, through the exact maj@m of
    ``bonbench.metrics.estimators`` (any G). An abstainer's LOO weight is always 0. Baselines as passk.
    """
    r = np.asarray(rewards, dtype=np.float64)
    check_options("majk", k, baseline, p, leave_p_out_form)
    if answers is None:
        raise BonbenchError("majk needs answers: use a task whose grader extracts answers (math tasks)")
    if len(answers) != r.size:
        raise BonbenchError(f"majk: {len(answers)} answers for {r.size} rewards")
    return ksample_weights(maj_means(tuple(answers), r), r.size, k, baseline, p, leave_p_out_form)


SOFT_FAMILIES = ("softmax", "logsumexp")


def softmaxk_weights(rewards: np.ndarray, k: int = 4, beta: float = 1.0, family: str = "softmax",
                     baseline: str = "loo", p: int = 2, leave_p_out_form: str = "unbiased") -> np.ndarray:
    """Softmax interpolation between mean (beta = 0) and max (beta -> inf) (App. B.2, §4.8).

    family=softmax:   f_beta(y) = sum_i p_i r_i, p_i = exp(beta r_i) / sum_j exp(beta r_j).
    family=logsumexp: f(y) = tau log((1/k) sum_i exp(r_i / tau)), tau = 1 / beta (mean at beta = 0).
    Dropped unchanged into the LOO estimator (§4.2) and its U-statistic (§4.7); no closed form, so
    the subsets are enumerated as multisets of distinct rewards (exact; 0/1 rewards are cheap, G = 64
    distinct rewards work up to k = 4, larger groups raise a one-line error). Baselines as passk.
    """
    r = np.asarray(rewards, dtype=np.float64)
    check_options("softmaxk", k, baseline, p, leave_p_out_form)
    f = _soft_family(beta, family)
    return ksample_weights(enumerated_means(r, f, "softmaxk"), r.size, k, baseline, p, leave_p_out_form)


def _soft_family(beta: float, family: str) -> Callable[[np.ndarray], np.ndarray]:
    if not (isinstance(beta, (int, float)) and not isinstance(beta, bool) and 0 <= beta < math.inf):
        raise BonbenchError(f"softmaxk: beta must be a finite number >= 0, got {beta!r}")
    if family == "softmax":
        return lambda rows: softmax_value(rows, beta)
    if family == "logsumexp":
        return lambda rows: logsumexp_value(rows, 1.0 / beta if beta > 0 else math.inf)
    raise BonbenchError(f"softmaxk: unknown family {family!r}; choose from {', '.join(SOFT_FAMILIES)}")


def _ksample_objective(name: str, k: int, options: dict, needs: frozenset, weights: Callable[[Group], np.ndarray]) -> Objective:
    check_options(name, k, options["baseline"], options["p"], options["leave_p_out_form"])
    return Objective(name, weights, needs, {"k": k, **options}, min_group=k)


@register_objective("passk", paper=TANG,
                    summary="pass@k / max@k k-sample objective E[max of k rewards] (LOO, biased, leave-p-out, U-statistic)")
def passk_objective(k: int = 4, baseline: str = "loo", p: int = 2, leave_p_out_form: str = "unbiased") -> Objective:
    """pass@k / max@k: J_k = E[max_i r(y_i)] over k iid samples (Tang et al. §4.3)."""
    opts = {"baseline": baseline, "p": p, "leave_p_out_form": leave_p_out_form}

    def weights(group: Group) -> np.ndarray:
        return passk_weights(_rewards(group, "passk", k), k, baseline, p, leave_p_out_form)

    return _ksample_objective("passk", k, opts, frozenset(), weights)


@register_objective("majk", paper=TANG, needs=("answers",),
                    summary="majority-vote k-sample objective (plurality answer's value, ties uniform, None abstains)")
def majk_objective(k: int = 4, baseline: str = "loo", p: int = 2, leave_p_out_form: str = "unbiased") -> Objective:
    """maj@k: J_k = E[value of the plurality answer of k iid samples] (Tang et al. §4.5)."""
    opts = {"baseline": baseline, "p": p, "leave_p_out_form": leave_p_out_form}

    def weights(group: Group) -> np.ndarray:
        r = _rewards(group, "majk", k)
        return majk_weights(group.answers, r, k, baseline, p, leave_p_out_form)

    return _ksample_objective("majk", k, opts, frozenset({"answers"}), weights)


@register_objective("softmaxk", paper=TANG, summary="softmax / log-sum-exp interpolation between mean and max@k (k-sample, LOO)")
def softmaxk_objective(k: int = 4, beta: float = 1.0, family: str = "softmax", baseline: str = "loo", p: int = 2,
                       leave_p_out_form: str = "unbiased") -> Objective:
    """Softmax-interpolated k-sample objective J_k = E[f_beta(y_1..k)] (Tang et al. App. B.2, §4.8)."""
    _soft_family(beta, family)
    opts = {"beta": beta, "family": family, "baseline": baseline, "p": p, "leave_p_out_form": leave_p_out_form}

    def weights(group: Group) -> np.ndarray:
        return softmaxk_weights(_rewards(group, "softmaxk", k), k, beta, family, baseline, p, leave_p_out_form)

    return _ksample_objective("softmaxk", k, opts, frozenset(), weights)
