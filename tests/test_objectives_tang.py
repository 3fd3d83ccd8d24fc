"""Tang et al.'s k-sample objectives and the mean-reward policy gradients, held to exact expectations.

On a tabular softmax policy over K outcomes (tests/objective_harness.py: every G-tuple enumerated)
each estimator's expectation must equal the exact gradient of the objective it claims to be
unbiased for, to 1e-10: pass@k / max@k, maj@k with ties and abstainers, softmax interpolation, the
biased variant (grad J_{k-1}), leave-p-out in both forms, and the U-statistic over G > k samples.
The closed forms are also checked against a brute-force implementation of the papers' per-subset
equations, the worked examples of math-reference §4.3-4.5 and §5, the scale conventions, large
groups in exact rationals, and the one-line errors for bad options.
"""

from __future__ import annotations

import itertools
import math
import time
from fractions import Fraction

import numpy as np
import pytest
import torch
from objective_harness import autograd, expected_estimate, k_sample_gradient, k_sample_objective, random_thetas, softmax

import bonbench.plugins.objectives.tang as tang  # registers passk, majk, softmaxk, mean
from bonbench.api.objective import REGISTRY, Group, make_objective
from bonbench.core.errors import BonbenchError
from bonbench.plugins.objectives.ksample import (
    biased_advantages,
    logsumexp_value,
    loo_advantages,
    majority_value,
    max_value,
    softmax_value,
)

TOL = 1e-10
THETAS = random_thetas(4, 2, seed=3)
THETAS3 = random_thetas(3, 2, seed=5)
# per-outcome rewards with a tie, and 0/1 rewards
REAL4 = np.array([0.0, 0.5, 0.5, 1.3])
BIN4 = np.array([0.0, 1.0, 0.0, 1.0])
# majority voting: outcomes 0 and 2 give the same answer, outcome 3 abstains
MAJ_ANS = ("A", "B", "A", None)
MAJ_R = np.array([1.0, 0.0, 1.0, 0.0])
# ... and an answer whose samples carry different rewards (its value is their mean in the tuple)
MAJ_ANS2 = ("A", "A", "B", None)
MAJ_R2 = np.array([1.0, 0.4, -0.5, 0.3])


def f_max(rew):
    return lambda t: float(max_value(rew[list(t)])) if t else 0.0


def f_maj(ans, rew):
    return lambda t: majority_value([ans[a] for a in t], [rew[a] for a in t])


def f_subset_mean(f, m):
    """J^(p)'s aggregation (§4.6): f averaged over the m-subsets of the tuple (m = k - p)."""
    return lambda t: float(np.mean([f(s) for s in itertools.combinations(t, m)]))


def est(theta, G, weights_of):
    return expected_estimate(theta, G, weights_of)


def close(a, b, tol=TOL):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert np.max(np.abs(a - b)) <= tol, (a, b)


# ------------------------------------------------------------------------------------------------
# worked examples (math-reference §4.3-4.5, §5): the paper's advantages, and weights == advantages


@pytest.mark.parametrize("rewards, loo, biased", [
    ([0.2, 0.9, 0.5, 0.7], [0, 0.2, 0, 0], [-0.05, 0.15, -0.05, -0.05]),
    ([0.2, 0.9, 0.5, 0.9], [0, 0, 0, 0], [0, 0, 0, 0]),
    ([0, 1, 0, 0], [0, 1, 0, 0], [-0.25, 0.75, -0.25, -0.25]),
    ([0, 1, 1, 0], [0, 0, 0, 0], [0, 0, 0, 0]),
])
def test_passk_worked_examples(rewards, loo, biased):
    r = np.array(rewards, dtype=np.float64)
    close(loo_advantages(f_max(r), 4), loo, 1e-15)
    close(biased_advantages(f_max(r), 4), biased, 1e-15)
    # the trainer's weights at G = k are the paper's advantages (scale 1)
    close(tang.passk_weights(r, 4, "loo"), loo, 1e-15)
    close(tang.passk_weights(r, 4, "biased"), biased, 1e-15)
    close(make_objective("passk").weights(Group(rewards=r)), loo, 1e-15)


def test_passk_pm1_rewards_double_the_advantage():
    close(tang.passk_weights(np.array([-1.0, 1.0, -1.0, -1.0]), 4), [0, 2, 0, 0], 1e-15)


F3 = Fraction(1, 3)


@pytest.mark.parametrize("answers, f, loo, biased", [
    ("AABC", 1, [2 * F3, 2 * F3, 0, 0], [F3, F3, -F3, -F3]),
    ("ABBC", 0, [0, -F3, -F3, 0], [Fraction(1, 6), -Fraction(1, 6), -Fraction(1, 6), Fraction(1, 6)]),
    ("ABCD", Fraction(1, 4), [Fraction(1, 4), -Fraction(1, 12), -Fraction(1, 12), -Fraction(1, 12)],
     [Fraction(1, 4), -Fraction(1, 12), -Fraction(1, 12), -Fraction(1, 12)]),
    ("AAAB", 1, [0, 0, 0, 0], [0, 0, 0, 0]),
])
def test_majk_worked_examples(answers, f, loo, biased):
    ans = tuple(answers)
    r = np.array([1.0 if a == "A" else 0.0 for a in ans])
    assert majority_value(ans, r) == pytest.approx(float(f), abs=1e-15)
    close(loo_advantages(f_maj(ans, r), 4), [float(x) for x in loo], 1e-15)
    close(biased_advantages(f_maj(ans, r), 4), [float(x) for x in biased], 1e-15)
    close(tang.majk_weights(ans, r, 4, "loo"), [float(x) for x in loo], 1e-15)
    close(tang.majk_weights(ans, r, 4, "biased"), [float(x) for x in biased], 1e-15)


def test_majk_ties_are_not_the_iff_shortcut():
    # "A wins iff i is in A" would give [1, 0, 0, 0]-like credit; with a 1-1-1-1 tie f = 1/4 and
    # dropping a wrong vote raises A's share to 1/3: A_i = 1/4 - 1/3 < 0 for the wrong samples
    w = tang.majk_weights(tuple("ABCD"), np.array([1.0, 0, 0, 0]), 4)
    assert w[1] < 0 and w[0] > 0
    # abstainers take a slot but never get LOO credit; everyone abstaining scores 0
    ans = ("A", None, "B", None)
    assert majority_value((None, None), (1.0, 1.0)) == 0.0
    w = tang.majk_weights(ans, np.array([1.0, 1.0, 0, 0]), 4)
    assert w[1] == 0 and w[3] == 0
    close(w, [0.5, 0, -0.5, 0], 1e-15)


def test_mean_scale_and_k2_identity():
    r = np.array([1.0, 0.0, 0.0, 1.0, 0.5])
    G = r.size
    # mean PG carries 1/G: weights = RLOO advantages / G
    close(tang.mean_weights(r, "loo"), (r - (r.sum() - r) / (G - 1)) / G, 1e-15)
    close(tang.mean_weights(r, "none"), r / G, 1e-15)
    # §4.4: pass@2 mean-centred = RLOO for the mean reward, same scale, for any G
    close(tang.passk_weights(r, 2, "biased"), tang.mean_weights(r, "loo"), 1e-14)
    # rewards (1, 0): A' = (0.5, -0.5) (§4.4), exactly RLOO's (1 - 0) / G
    close(tang.passk_weights(np.array([1.0, 0.0]), 2, "biased"), [0.5, -0.5], 1e-15)
    close(tang.mean_weights(np.array([1.0, 0.0]), "loo"), [0.5, -0.5], 1e-15)
    # Dr.GRPO = mean-centred without std; GRPO divides that by the group std (ddof = 1)
    close(tang.mean_weights(r, "mean", "drgrpo"), (r - r.mean()) / G, 1e-15)
    close(tang.mean_weights(r, "mean", "grpo", eps=0.0), (r - r.mean()) / r.std(ddof=1) / G, 1e-15)


# ------------------------------------------------------------------------------------------------
# exact expectations: pass@k / max@k


@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("rew", [REAL4, BIN4], ids=["real", "binary"])
def test_passk_loo_unbiased(k, rew):
    for theta in THETAS:
        g = est(theta, k, lambda t: tang.passk_weights(rew[list(t)], k, "loo"))
        close(g, k_sample_gradient(theta, k, f_max(rew)))


def test_passk_none_and_gradient_check():
    theta = THETAS[0]
    g = est(theta, 3, lambda t: tang.passk_weights(REAL4[list(t)], 3, "none"))
    close(g, k_sample_gradient(theta, 3, f_max(REAL4)))
    # the harness' score-function gradient against float64 autograd of the closed-form J_3
    v, idx = np.sort(REAL4), np.argsort(REAL4)

    def j3(t):
        pi = torch.softmax(t, 0)[idx]
        cdf = torch.cumsum(pi, 0)
        lower = torch.cat([torch.zeros(1, dtype=t.dtype), cdf[:-1]])
        return (torch.tensor(v) * (cdf**3 - lower**3)).sum()

    close(autograd(j3, theta), k_sample_gradient(theta, 3, f_max(REAL4)))


@pytest.mark.parametrize("k", [2, 3, 4])
def test_passk_biased_is_grad_J_k_minus_1(k):
    theta = THETAS[1]
    g = est(theta, k, lambda t: tang.passk_weights(REAL4[list(t)], k, "biased"))
    close(g, k_sample_gradient(theta, k - 1, f_max(REAL4)))
    assert np.max(np.abs(g - k_sample_gradient(theta, k, f_max(REAL4)))) > 1e-3  # biased for J_k


@pytest.mark.parametrize("p", [1, 2, 3])
def test_leave_p_out_unbiased_form(p):
    theta = THETAS[0]
    g = est(theta, 4, lambda t: tang.passk_weights(REAL4[list(t)], 4, "leave_p_out", p, "unbiased"))
    close(g, k_sample_gradient(theta, 4, f_max(REAL4)))


@pytest.mark.parametrize("p", [1, 2, 3])
def test_leave_p_out_paper_form(p):
    theta = THETAS[1]
    g = est(theta, 4, lambda t: tang.passk_weights(REAL4[list(t)], 4, "leave_p_out", p, "paper"))
    jp = f_subset_mean(f_max(REAL4), 4 - p)  # J^(p) exactly as §4.6 defines it
    close(g, k_sample_gradient(theta, 4, jp))
    close(g, k_sample_gradient(theta, 4 - p, f_max(REAL4)))  # = J_{k-p}
    assert np.max(np.abs(g - k_sample_gradient(theta, 4, f_max(REAL4)))) > 1e-3


def test_u_statistic_g_greater_than_k():
    theta = THETAS3[0]
    rew = np.array([0.2, 0.2, 1.0])
    f = f_max(rew)
    for baseline, target_k in [("loo", 3), ("none", 3), ("biased", 2)]:
        g = est(theta, 5, lambda t, baseline=baseline: tang.passk_weights(rew[list(t)], 3, baseline))
        close(g, k_sample_gradient(theta, target_k, f))
    g = est(theta, 5, lambda t: tang.passk_weights(rew[list(t)], 3, "leave_p_out", 2, "unbiased"))
    close(g, k_sample_gradient(theta, 3, f))
    g = est(theta, 5, lambda t: tang.passk_weights(rew[list(t)], 3, "leave_p_out", 2, "paper"))
    close(g, k_sample_gradient(theta, 1, f))


# ------------------------------------------------------------------------------------------------
# exact expectations: maj@k (ties, shared answers, abstainers) and softmax interpolation


@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("ans, rew", [(MAJ_ANS, MAJ_R), (MAJ_ANS2, MAJ_R2)], ids=["shared", "mixed-rewards"])
def test_majk_loo_unbiased(k, ans, rew):
    f = f_maj(ans, rew)
    theta = THETAS[0]
    g = est(theta, k, lambda t: tang.majk_weights(tuple(ans[a] for a in t), rew[list(t)], k, "loo"))
    close(g, k_sample_gradient(theta, k, f))


def test_majk_biased_leave_p_out_and_u_statistic():
    f = f_maj(MAJ_ANS, MAJ_R)
    theta = THETAS[1]

    def w(t, k, *opt):
        return tang.majk_weights(tuple(MAJ_ANS[a] for a in t), MAJ_R[list(t)], k, *opt)

    close(est(theta, 4, lambda t: w(t, 4, "biased")), k_sample_gradient(theta, 3, f))
    close(est(theta, 4, lambda t: w(t, 4, "leave_p_out", 2, "unbiased")), k_sample_gradient(theta, 4, f))
    close(est(theta, 4, lambda t: w(t, 4, "leave_p_out", 2, "paper")), k_sample_gradient(theta, 2, f))
    ans3, rew3 = ("A", "B", None), np.array([1.0, 0.0, 0.0])
    f3 = f_maj(ans3, rew3)
    theta3 = THETAS3[1]
    g = est(theta3, 5, lambda t: tang.majk_weights(tuple(ans3[a] for a in t), rew3[list(t)], 3, "loo"))
    close(g, k_sample_gradient(theta3, 3, f3))


@pytest.mark.parametrize("family, beta", [("softmax", 1.0), ("softmax", 3.0), ("logsumexp", 0.5)])
def test_softmaxk_unbiased(family, beta):
    theta = THETAS[0]
    agg = softmax_value if family == "softmax" else (lambda r, b: logsumexp_value(r, 1.0 / b))
    f = lambda t: float(agg(REAL4[list(t)], beta))
    g = est(theta, 3, lambda t: tang.softmaxk_weights(REAL4[list(t)], 3, beta, family))
    close(g, k_sample_gradient(theta, 3, f))
    g = est(THETAS3[0], 4, lambda t: tang.softmaxk_weights(REAL4[:3][list(t)], 2, beta, family))
    close(g, k_sample_gradient(THETAS3[0], 2, lambda t: float(agg(REAL4[:3][list(t)], beta))))


def test_softmax_family_limits():
    r = np.array([0.1, 0.7, -0.3])
    assert softmax_value(r, 0.0) == pytest.approx(r.mean(), abs=1e-15)
    assert softmax_value(r, 200.0) == pytest.approx(r.max(), abs=1e-12)
    assert logsumexp_value(r, 1e-3) == pytest.approx(r.max(), abs=1e-2)
    assert logsumexp_value(r, math.inf) == pytest.approx(r.mean(), abs=1e-15)
    close(tang.softmaxk_weights(r, 3, 0.0), loo_advantages(lambda t: float(r[list(t)].mean()) if t else 0.0, 3), 1e-14)


# ------------------------------------------------------------------------------------------------
# mean reward: RLOO / REINFORCE exact, mean-centred (G-1)/G, GRPO biased (what is provably true)


def grad_mean_reward(theta, rew):
    return autograd(lambda t: torch.softmax(t, 0) @ torch.tensor(rew), theta)


@pytest.mark.parametrize("G", [2, 4])
def test_mean_loo_none_unbiased(G):
    for theta in THETAS:
        for baseline, factor in [("loo", 1.0), ("none", 1.0), ("mean", (G - 1) / G)]:
            g = est(theta, G, lambda t, baseline=baseline: tang.mean_weights(REAL4[list(t)], baseline))
            close(g, factor * grad_mean_reward(theta, REAL4))


def test_grpo_biased_but_honest():
    rng = np.random.default_rng(0)
    for _ in range(20):
        r = rng.normal(size=5)
        w = tang.mean_weights(r, "mean", "grpo")
        assert abs(w.sum()) < 1e-14  # zero-sum
        assert np.all(np.sign(w) == np.sign(r - r.mean()))
        close(tang.mean_weights(3.0 * r + 7.0, "mean", "grpo", eps=0.0), tang.mean_weights(r, "mean", "grpo", eps=0.0), 1e-12)
    assert np.all(tang.mean_weights(np.ones(4), "mean", "grpo") == 0)
    theta = THETAS[0]
    # 0/1 rewards: a positive multiple of grad E[r] (sum_i (r_i - mean)(r_i - p) >= 0), but not 1x
    g = est(theta, 4, lambda t: tang.mean_weights(BIN4[list(t)], "mean", "grpo"))
    true = grad_mean_reward(theta, BIN4)
    c = float(g @ true / (true @ true))
    close(g, c * true)
    assert c > 0 and abs(c - 1) > 1e-2
    # real rewards: not parallel to grad E[r]
    g = est(theta, 4, lambda t: tang.mean_weights(REAL4[list(t)], "mean", "grpo"))
    true = grad_mean_reward(theta, REAL4)
    cos = float(g @ true / np.linalg.norm(g) / np.linalg.norm(true))
    assert cos < 1 - 1e-4


# ------------------------------------------------------------------------------------------------
# the closed forms against the papers' per-subset equations, brute force


def brute_weights(f, G, k, baseline, p=2, form="unbiased"):
    """The U-statistic of §4.7 over every k-subset of the per-subset estimators of §4.2-4.6."""
    w = np.zeros(G)
    subsets = list(itertools.combinations(range(G), k))
    fz = lambda t: f(t) if t else 0.0
    for S in subsets:
        fS = f(S)
        A = {i: fS - fz(tuple(j for j in S if j != i)) for i in S}
        for i in S:
            if baseline == "none":
                w[i] += fS
            elif baseline == "loo":
                w[i] += A[i]
            elif baseline == "biased":
                w[i] += A[i] - np.mean(list(A.values()))
            elif form == "unbiased":
                w[i] += fS - np.mean([fz(T) for T in itertools.combinations([j for j in S if j != i], k - p)])
            else:
                As = {s: fS - fz(tuple(j for j in S if j not in s)) for s in itertools.combinations(S, p)}
                mean_a = np.mean(list(As.values()))
                w[i] += sum(a - mean_a for s, a in As.items() if i in s) / math.comb(k - 1, p - 1)
    return w / len(subsets)


def test_engine_matches_brute_force():
    rng = np.random.default_rng(7)
    for _ in range(60):
        G = int(rng.integers(2, 8))
        k = int(rng.integers(2, G + 1))
        r = rng.integers(-1, 3, G) / 2.0  # heavy ties
        ans = tuple(rng.choice(np.array(["A", "B", "C", None], dtype=object), G))
        baseline = str(rng.choice(["none", "loo", "biased", "leave_p_out"]))
        p, form = int(rng.integers(1, k)), str(rng.choice(["unbiased", "paper"]))
        for f, mine in [(f_max(r), tang.passk_weights(r, k, baseline, p, form)),
                        (f_maj(ans, r), tang.majk_weights(ans, r, k, baseline, p, form)),
                        (lambda t, r=r: float(softmax_value(r[list(t)], 1.7)),
                         tang.softmaxk_weights(r, k, 1.7, "softmax", baseline, p, form))]:
            close(mine, brute_weights(f, G, k, baseline, p, form), 1e-12)


def test_paper_leave_p_out_equals_biased_of_k_minus_p_plus_1():
    r = np.array([0.3, -1.0, 2.0, 0.3, 0.9])
    close(tang.passk_weights(r, 5, "leave_p_out", 3, "paper"), tang.passk_weights(r, 3, "biased"), 1e-14)


def test_large_group_exact_rationals():
    """G = 64, k = 32 pass@k LOO weights against exact rationals (sorted ranks, independent form)."""
    rng = np.random.default_rng(11)
    G, k = 64, 32
    q = [Fraction(int(x), 8) for x in rng.integers(-20, 21, G)]  # ties
    r = np.array([float(x) for x in q])
    t0 = time.perf_counter()
    w = tang.passk_weights(r, k, "loo")
    assert time.perf_counter() - t0 < 1.0
    order = sorted(range(G), key=lambda i: q[i])
    v = [q[i] for i in order]
    # sum over k-subsets containing position j of max: j is the top (C(j-1, k-1)) or m > j is (C(m-2, k-2))
    # sum over (k-1)-subsets of the others of max: rank m < j keeps m, m > j becomes m - 1
    exact = [Fraction(0)] * G
    for j in range(1, G + 1):
        plus = v[j - 1] * math.comb(j - 1, k - 1) + sum(v[m - 1] * math.comb(m - 2, k - 2) for m in range(j + 1, G + 1))
        minus = (sum(v[m - 1] * math.comb(m - 1, k - 2) for m in range(1, j))
                 + sum(v[m - 1] * math.comb(m - 2, k - 2) for m in range(j + 1, G + 1)))
        exact[order[j - 1]] = (plus - minus) / math.comb(G, k)
    close(w, [float(x) for x in exact], 1e-12)


def test_large_groups_are_fast():
    rng = np.random.default_rng(2)
    ans = tuple(rng.choice(np.array(list("ABCDEFGH") + [None], dtype=object), 64))
    r = np.array([1.0 if a == "A" else 0.0 for a in ans])
    t0 = time.perf_counter()
    w = tang.majk_weights(ans, r, 16, "leave_p_out", 4, "paper")
    tang.softmaxk_weights(r, 16, 2.0)  # 0/1 rewards: two distinct values, cheap
    assert time.perf_counter() - t0 < 2.0 and np.all(np.isfinite(w))
    loo = tang.majk_weights(ans, r, 16, "loo")
    assert all(abs(loo[i]) < 1e-12 for i in range(64) if ans[i] is None)  # abstainers: no LOO credit
    with pytest.raises(BonbenchError, match="smaller k"):
        tang.softmaxk_weights(rng.normal(size=64), 6)


# ------------------------------------------------------------------------------------------------
# registry, options, errors


def test_registry_and_defaults():
    assert REGISTRY["passk"].options == {"k": 4, "baseline": "loo", "p": 2, "leave_p_out_form": "unbiased"}
    assert REGISTRY["majk"].needs == frozenset({"answers"})
    assert REGISTRY["softmaxk"].options["beta"] == 1.0 and REGISTRY["softmaxk"].options["family"] == "softmax"
    assert REGISTRY["mean"].options == {"baseline": "loo", "normalise": "none", "eps": 1e-6}
    obj = make_objective("majk", k=3)
    assert obj.min_group == 3 and obj.needs == frozenset({"answers"}) and obj.options["k"] == 3
    assert make_objective("mean").min_group == 2 and make_objective("mean", baseline="none").min_group == 1


@pytest.mark.parametrize("name, options, match", [
    ("passk", {"baseline": "median"}, "unknown baseline"),
    ("passk", {"k": 0}, "k must be"),
    ("majk", {"k": 2.5}, "k must be"),
    ("passk", {"baseline": "leave_p_out", "p": 4}, "1 <= p <= k - 1"),
    ("passk", {"baseline": "leave_p_out", "p": 0}, "1 <= p <= k - 1"),
    ("softmaxk", {"leave_p_out_form": "exact"}, "leave_p_out_form"),
    ("softmaxk", {"beta": -1.0}, "beta"),
    ("softmaxk", {"family": "tempered"}, "family"),
    ("mean", {"baseline": "loo2"}, "unknown baseline"),
    ("mean", {"normalise": "std"}, "unknown normalise"),
    ("passk", {"temperature": 1.0}, "no option"),
])
def test_bad_options(name, options, match):
    with pytest.raises(BonbenchError, match=match) as err:
        make_objective(name, **options)
    assert "\n" not in str(err.value)


def test_bad_groups():
    with pytest.raises(BonbenchError, match="needs answers") as err:
        make_objective("majk").weights(Group(rewards=np.zeros(4)))
    assert "\n" not in str(err.value)
    with pytest.raises(BonbenchError, match="at least 4 samples"):
        make_objective("passk").weights(Group(rewards=np.zeros(3)))
    with pytest.raises(BonbenchError, match="expert"):
        make_objective("passk").weights(Group(rewards=np.zeros(4), expert=np.array([1, 0, 0, 0], dtype=bool)))
    with pytest.raises(BonbenchError, match="finite"):
        make_objective("mean").weights(Group(rewards=np.array([0.0, np.nan])))


def test_objective_weights_through_groups():
    ans = ("A", "A", "B", None, "B")
    r = np.array([1.0, 1.0, 0.0, 0.0, 0.0])
    g = Group(rewards=r, answers=ans)
    close(make_objective("majk", k=3).weights(g), tang.majk_weights(ans, r, 3), 0)
    close(make_objective("passk", k=2, baseline="biased").weights(g), make_objective("mean").weights(g), 1e-15)
    assert k_sample_objective(THETAS[0], 2, f_max(BIN4)) == pytest.approx(1 - (1 - softmax(THETAS[0]) @ BIN4) ** 2)
