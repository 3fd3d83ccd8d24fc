"""Every objective's default ascends its objective, and every biased option's bias is measured.

The independent checker of tests/objective_exact.py (tabular softmax policy, objective values and
gradients from their definitions by torch autograd, the exact expectation of the per-group update
by enumerating every composition of the group through ``make_objective(...).weights``) holds:

* every registered objective's defaults: E[update] = c grad J with c = 1 to 1e-9 where the docs
  call the estimator unbiased, and c in [0.5, 2] with cosine > 0.9 where they call it biased;
* BoN-RLB over G = 4, 8, 16, 32 and failure probabilities p = 0.1..0.7 (issue 24's grid);
* the numbers docs/objectives-bon.md, docs/objectives-tang.md and docs/trainer.md quote for the
  biased named options (plug-in RLB, sampled BoN-SFT, GRPO, STaR normalise=correct, ...), to the
  digits quoted;
* vBoN's tie handling: its default target is a distribution and equals BoN with uniform
  tie-breaking by brute force over all N-tuples; the old strict target is not a distribution.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from objective_exact import (
    ascent_coefficient,
    compositions,
    expected_update,
    grad,
    group_of,
    softmax,
    theta_of,
    tuple_expectation,
)

from bonbench.api.objective import REGISTRY, Group, make_objective
from bonbench.core.errors import BonbenchError
from bonbench.plugins.objectives import amini
from bonbench.plugins.objectives.chow.sft import lambda_n
from bonbench.plugins.objectives.ksample import majority_value, softmax_value

THETA = np.array([0.3, -0.7, 0.5, 0.1])
R_REAL = np.array([0.2, 0.9, 0.5, 0.7])
R_BIN = np.array([1.0, 0.0, 1.0, 0.0])
SCORES = np.array([0.3, 0.3, 0.8, 0.1])  # a verifier with a tie
ANSWERS = ("A", "B", "A", None)  # A correct, None abstains
REF = np.array([0.4, 0.1, 0.2, 0.3])  # reference policy
REF_REWARDS = np.array([0.2, 0.5, 0.5, 0.7, 0.9, 0.2, 0.5])  # M = 7 reference rewards (ties with R_REAL)


# ------------------------------------------------------------------------------------------------
# objective values from their definitions (torch, pi = softmax(theta))


def mean_J(r):
    return lambda pi: (pi * torch.as_tensor(r)).sum()


def best_of(keys, grades):
    """f(tuple) = grade of the top-key member, ties uniform (mean grade over the tied top block)."""
    def f(t):
        top = max(keys[a] for a in t)
        tied = [grades[a] for a in t if keys[a] == top]
        return sum(tied) / len(tied)
    return f


def bon_J(keys, grades, N):
    return lambda pi: tuple_expectation(pi, N, best_of(keys, grades))


def pass_J(N, wrong=(1, 3)):
    return lambda pi: 1 - pi[list(wrong)].sum() ** N


def tilt_log_prob(r, lam, expert, win="indicator"):
    """log pi_lambda(y*) = log pi(y*) + lam Q(y*) - log sum_y pi(y) exp(lam Q(y)), Q(y) = E[K(r(y), r(y''))]."""
    d = torch.as_tensor(r)[:, None] - torch.as_tensor(r)[None, :]
    Kmat = (d >= 0).double() if win == "indicator" else torch.sigmoid(d)

    def J(pi):
        Q = Kmat @ pi
        return torch.log(pi[expert]) + lam * Q[expert] - torch.log((pi * torch.exp(lam * Q)).sum())
    return J


def log_bon_uniform(ref, r, N):
    """log of BoN with uniform tie-breaking, by brute force over all N-tuples of the reference."""
    K = len(ref)
    out = np.zeros(K)
    for t in np.ndindex(*(K,) * N):
        top = max(r[a] for a in t)
        winners = [a for a in t if r[a] == top]
        p = float(np.prod(ref[list(t)]))
        for a in winners:
            out[a] += p / len(winners)
    return np.log(out)


def counts_below_equal(r, ref_rewards):
    below = np.array([(ref_rewards < x).sum() for x in r], dtype=float)
    equal = np.array([(ref_rewards == x).sum() for x in r], dtype=float)
    return below, equal


def vbon_target(r, ref_rewards, ref, N, cdf="add_one"):
    """vbon's default log pi_bon per outcome from M reference rewards, by the binomial sum:
    pi_ref(y) sum_{i=1..N} C(N, i) A^(N-i) E^(i-1), A = F_hat, E = max(tied mass, pi_ref(y))."""
    below, equal = counts_below_equal(r, ref_rewards)
    M = len(ref_rewards)
    A = (1 + below) / (M + 1) if cdf == "add_one" else below / M
    E = np.maximum(equal / (M + 1 if cdf == "add_one" else M), ref)
    s = sum(math.comb(N, i) * A ** (N - i) * E ** (i - 1) for i in range(1, N + 1))
    return np.log(ref * s)


def neg_kl_to(log_target):
    return lambda pi: (pi * (torch.as_tensor(log_target) - torch.log(pi))).sum()


# ------------------------------------------------------------------------------------------------
# every default: name -> (weights_of(outcomes) from the defaults, J, G, sample probs or None, unbiased)

LOG_REF = np.log(REF)


def _with_logprobs(name, rewards, **extra):
    """weights_of for an objective that reads log pi_theta / log pi_ref (from THETA and REF)."""
    obj = make_objective(name, **extra.pop("options", {}))
    lp = np.log(softmax(THETA))
    build = group_of(rewards, logprobs=lp, ref_logprobs=LOG_REF)

    def weights_of(o):
        g = build(o)
        return obj.weights(Group(rewards=g.rewards, logprobs=g.logprobs, ref_logprobs=g.ref_logprobs,
                                 ref_rewards=extra.get("ref_rewards")))
    return weights_of


def _expert(name, expert_outcome, G_policy, **options):
    """weights_of for an objective with one expert row (outcome ``expert_outcome``) beside the samples;
    returns the policy rows' weights and adds the expert row's own step once (it is not sampled)."""
    obj = make_objective(name, **options)

    def weights_of(o):
        rows = np.concatenate([[expert_outcome], o])
        w = obj.weights(Group(rewards=R_REAL[rows], expert=np.arange(rows.size) == 0))
        return w
    return obj, weights_of


def expert_update(name, expert_outcome, G, **options):
    """E[update] of an expert objective: the expert row's weight times grad log pi(y*) plus the samples'."""
    obj, weights_of = _expert(name, expert_outcome, G, **options)
    pi = softmax(THETA)
    e = np.eye(len(THETA))
    # the expert row's weight does not depend on the samples for sft / bon_sft (always 1): read it once
    w_exp = weights_of(np.zeros(G, dtype=int))[0]
    samples = expected_update(THETA, G, lambda o: weights_of(o)[1:])
    return w_exp * (e[expert_outcome] - pi) + samples


def bonbon_J(N, alpha):
    """-E over N reference draws of the BoNBoN loss at theta (distinct rewards: best / worst are the
    top / bottom outcome present)."""
    target = (N - 1) * sum(1.0 / k for k in range(1, N))
    K = len(REF)

    def J(pi):
        lp = torch.log(pi)
        h = lp - torch.as_tensor(LOG_REF)
        total = torch.zeros((), dtype=torch.float64)
        for counts in compositions(N, K):
            present = [a for a in range(K) if counts[a]]
            best = max(present, key=lambda a: R_REAL[a])
            worst = min(present, key=lambda a: R_REAL[a])
            prob = math.factorial(N) * np.prod([REF[a] ** n / math.factorial(n) for a, n in enumerate(counts)])
            loss = alpha * -lp[best] + (1 - alpha) * (h[best] - h[worst] - target) ** 2
            total = total - prob * loss
        return total
    return J


def default_cases():
    d = {n: dict(REGISTRY[n].options) for n in BUILTIN}
    N_rl, N_rlb, k = d["bon_rl_s"]["N"], d["bon_rlb"]["N"], d["passk"]["k"]
    lam = lambda_n(d["bon_sft"]["N"], d["bon_sft"]["lambda_rule"])
    kl_beta = d["kl_rl"]["beta"]
    vb_N = d["vbon"]["N"]
    return {
        "mean": (lambda o: make_objective("mean").weights(Group(rewards=R_REAL[o])), mean_J(R_REAL), 3, None, True),
        "passk": (lambda o: make_objective("passk").weights(Group(rewards=R_REAL[o])),
                  lambda pi: tuple_expectation(pi, k, lambda t: max(R_REAL[a] for a in t)), k + 1, None, True),
        "majk": (lambda o: make_objective("majk").weights(Group(rewards=R_BIN[o], answers=tuple(ANSWERS[a] for a in o))),
                 lambda pi: tuple_expectation(pi, k, lambda t: majority_value([ANSWERS[a] for a in t], [R_BIN[a] for a in t])),
                 k + 1, None, True),
        "softmaxk": (lambda o: make_objective("softmaxk").weights(Group(rewards=R_REAL[o])),
                     lambda pi: tuple_expectation(pi, k, lambda t: float(softmax_value(R_REAL[list(t)], d["softmaxk"]["beta"]))),
                     k, None, True),
        "bon_rl_s": (lambda o: make_objective("bon_rl_s").weights(Group(rewards=R_REAL[o])),
                     bon_J(R_REAL, R_REAL, N_rl), N_rl + 1, None, True),
        "bon_rl_v": (lambda o: make_objective("bon_rl_v").weights(Group(rewards=R_BIN[o], scores=SCORES[o])),
                     bon_J(SCORES, R_BIN, N_rl), N_rl + 1, None, True),
        "bon_rlb": (lambda o: make_objective("bon_rlb").weights(Group(rewards=R_BIN[o])), pass_J(N_rlb), 6, None, True),
        "bon_rlb_p": (lambda o: make_objective("bon_rlb_p").weights(Group(rewards=R_BIN[o])), pass_J(N_rlb), 6, None, True),
        "star": (lambda o: make_objective("star").weights(Group(rewards=R_BIN[o])), mean_J(R_BIN), 4, None, True),
        "rl_s": (lambda o: make_objective("rl_s").weights(Group(rewards=R_REAL[o])), mean_J(R_REAL), 3, None, True),
        "rl_v": (lambda o: make_objective("rl_v").weights(Group(rewards=R_BIN[o], scores=SCORES[o])), mean_J(SCORES), 3, None,
                 True),
        "kl_rl": (_with_logprobs("kl_rl", R_REAL),
                  lambda pi: (pi * torch.as_tensor(R_REAL)).sum()
                  - kl_beta * (pi * (torch.log(pi) - torch.as_tensor(LOG_REF))).sum(),
                  3, None, True),
        "vbon": (_with_logprobs("vbon", R_REAL, ref_rewards=REF_REWARDS),
                 neg_kl_to(vbon_target(R_REAL, REF_REWARDS, REF, vb_N)), 3, None, True),
        "vbon_l": (_with_logprobs("vbon_l", R_REAL, ref_rewards=REF_REWARDS),
                   lambda pi: (pi * torch.as_tensor((d["vbon_l"]["N"] - 1)
                                                    * np.log((1 + counts_below_equal(R_REAL, REF_REWARDS)[0]) / 8)
                                                    + LOG_REF)).sum()
                   - (pi * torch.log(pi)).sum(), 3, None, True),
        "bonbon": (_with_logprobs("bonbon", R_REAL), bonbon_J(d["bonbon"]["N"], d["bonbon"]["alpha"]),
                   d["bonbon"]["N"], REF, True),
        # the expert objectives: handled by expert_update (one expert row of outcome 2 + G samples)
        "sft": (None, lambda pi: torch.log(pi[2]), 2, None, True),
        "bon_sft": (None, tilt_log_prob(R_REAL, lam, 2), 4, None, False),
    }


def default_update(name):
    weights_of, J, G, q, unbiased = default_cases()[name]
    if weights_of is None:
        return expert_update(name, 2, G), grad(J, THETA), unbiased
    if isinstance(weights_of(np.arange(G) % len(THETA)), Group):  # pragma: no cover - helper misuse
        raise AssertionError(name)
    return expected_update(THETA, G, weights_of, q), grad(J, THETA), unbiased


# the built-in objectives (other tests register plugin objectives into the same registry)
BUILTIN = sorted(n for n, info in REGISTRY.items() if info.factory.__module__.startswith("bonbench.plugins.objectives"))


def test_every_registered_objective_has_a_case():
    assert set(default_cases()) == set(BUILTIN) and len(BUILTIN) >= 17


@pytest.mark.parametrize("name", BUILTIN)
def test_every_default_ascends_its_objective(name):
    update, g, unbiased = default_update(name)
    c, cos, rel = ascent_coefficient(update, g)
    if unbiased:
        assert rel < 1e-9, f"{name}: c = {c}, cosine {cos}, relative error {rel}"
    else:
        assert 0.5 <= c <= 2.0 and cos > 0.9, f"{name}: c = {c}, cosine {cos}"


# ------------------------------------------------------------------------------------------------
# BoN-RLB on issue 24's grid: G = 4..32, p = 0.1..0.7 (three outcomes: correct, wrong, correct)

RLB_P = (0.1, 0.4, 0.7)


def rlb_coefficient(name, G, p, **options):
    probs = np.array([(1 - p) * 0.6, p, (1 - p) * 0.4])
    theta = theta_of(probs)
    R = np.array([1.0, 0.0, 1.0])
    obj = make_objective(name, **options)
    update = expected_update(theta, G, lambda o: obj.weights(Group(rewards=R[o])))
    return ascent_coefficient(update, grad(lambda pi: 1 - pi[1] ** obj.options["N"], theta))


@pytest.mark.parametrize("name", ["bon_rlb", "bon_rlb_p"])
@pytest.mark.parametrize("G", [4, 8, 16, 32])
def test_rlb_defaults_are_exactly_unbiased_on_the_grid(name, G):
    for p in RLB_P:
        c, cos, rel = rlb_coefficient(name, G, p)
        assert rel < 1e-9, (name, G, p, c)


# the measured c of the plug-in forms (docs/objectives-bon.md quotes these to 2 decimals)
PLUGIN_C = {
    ("bon_rlb", "plus"): {4: (-71.13, -19.89, -15.97), 8: (-4.04, -2.54, -5.47), 16: (1.03, 0.14, -1.64), 32: (1.38, 0.71, 0.04)},
    ("bon_rlb", "minus"): {4: (98.13, 25.80, 20.01), 8: (16.26, 7.75, 12.06), 16: (5.57, 4.14, 8.78), 32: (2.88, 3.10, 6.90)},
    ("bon_rlb_p", None): {4: (7.59, 1.09, 0.59), 8: (4.24, 1.11, 0.79), 16: (2.57, 1.07, 0.89), 32: (1.77, 1.04, 0.95)},
}


@pytest.mark.parametrize("key", sorted(PLUGIN_C, key=str))
def test_plugin_rlb_coefficients_as_documented(key):
    name, sign = key
    options = {"p_estimate": "plugin", **({"sign": sign} if sign else {})}
    for G, cs in PLUGIN_C[key].items():
        got = [rlb_coefficient(name, G, p, **options)[0] for p in RLB_P]
        assert np.allclose(got, cs, atol=0.006), (key, G, got)


def test_all_wrong_group_weights():
    """Issue 24: the old default put +16.3 on every wrong sample of an all-wrong group of 4; the new
    default puts 0 there (so --skip-zero-grad skips it) and on an all-correct group."""
    wrong, right = Group(rewards=np.zeros(4)), Group(rewards=np.ones(4))
    assert np.allclose(make_objective("bon_rlb", p_estimate="plugin").weights(wrong), 4 * 0.95**4 / 0.05 / 4)
    assert np.allclose(4 * 0.95**4 / 0.05 / 4, 16.29, atol=0.01)
    for g in (wrong, right):
        assert not np.any(make_objective("bon_rlb").weights(g))
    w = make_objective("bon_rlb").weights(Group(rewards=np.array([1.0, 0, 0, 0, 0])))
    assert w[0] > 0 and np.all(w[1:] < 0)  # correct up, wrong down


def test_rlb_unbiased_needs_n_samples():
    with pytest.raises(BonbenchError, match="p_estimate=plugin") as e:
        make_objective("bon_rlb", N=4).weights(Group(rewards=np.array([1.0, 0.0, 0.0])))
    assert "\n" not in str(e.value)
    assert make_objective("bon_rlb", N=4).min_group == 4 and make_objective("bon_rlb", N=1).min_group == 2


# ------------------------------------------------------------------------------------------------
# biased named options: the measured numbers the docs quote

def test_bon_sft_sampled_bias_as_documented():
    """Self-normalised BoN-SFT (expert = outcome 2, the default lambda_N for N = 4): relative error
    |E - grad| / |grad| shrinks with G; the sigmoid win rate (the paper's) is the same estimator form."""
    lam = lambda_n(4, "kl")
    measured = {}
    for win in ("indicator", "sigmoid"):
        g = grad(tilt_log_prob(R_REAL, lam, 2, win), THETA)
        measured[win] = [ascent_coefficient(expert_update("bon_sft", 2, G, win=win), g) for G in (2, 4, 6)]
    rel = {w: [m[2] for m in v] for w, v in measured.items()}
    cos = {w: [m[1] for m in v] for w, v in measured.items()}
    assert np.allclose(rel["indicator"], [0.647, 0.267, 0.168], atol=0.001)
    assert np.allclose(cos["indicator"], [0.765, 0.975, 0.992], atol=0.001)
    assert np.allclose(rel["sigmoid"], [0.401, 0.140, 0.084], atol=0.001)
    assert np.allclose(cos["sigmoid"], [0.927, 0.990, 0.996], atol=0.001)


def test_bon_sft_sigmoid_population_form_is_exact():
    """With the whole support as rows (mass = pi) the sigmoid form is exactly grad log pi_lambda(y*)."""
    from bonbench.plugins.objectives.chow.sft import bon_sft_weights

    lam, pi = 3.0, softmax(THETA)
    w_exp, w_pol = bon_sft_weights(R_REAL[[2]], R_REAL, lam, mass=pi, win="sigmoid")
    e = np.eye(4)
    got = w_exp[0] * (e[2] - pi) + sum(w_pol[a] * (e[a] - pi) for a in range(4)) / 1.0
    # population rows carry their mass already: sum_a w_a (e_a - pi) is the expectation
    assert np.allclose(got, grad(tilt_log_prob(R_REAL, lam, 2, "sigmoid"), THETA), atol=1e-12)
    with pytest.raises(BonbenchError, match="win"):
        make_objective("bon_sft", win="soft")


GRPO = {2: (0.7071, 1.6972, 0.99525), 4: (1.4088, 3.1018, 0.99707), 8: (1.7927, 3.7561, 0.99915)}


@pytest.mark.parametrize("G", sorted(GRPO))
def test_grpo_star_and_mean_centred_as_documented(G):
    c_bin, c_real, cos_real = GRPO[G]
    grpo = make_objective("mean", baseline="mean", normalise="grpo")
    c, cos, _ = ascent_coefficient(expected_update(THETA, G, lambda o: grpo.weights(Group(rewards=R_BIN[o]))),
                                   grad(mean_J(R_BIN), THETA))
    assert abs(c - c_bin) < 1e-4 and cos > 1 - 1e-12  # 0/1 rewards: parallel, wrong length
    c, cos, _ = ascent_coefficient(expected_update(THETA, G, lambda o: grpo.weights(Group(rewards=R_REAL[o]))),
                                   grad(mean_J(R_REAL), THETA))
    assert abs(c - c_real) < 1e-4 and abs(cos - cos_real) < 1e-5  # real rewards: not parallel
    centred = make_objective("mean", baseline="mean")
    c, _, rel = ascent_coefficient(expected_update(THETA, G, lambda o: centred.weights(Group(rewards=R_REAL[o]))),
                                   grad(mean_J(R_REAL), THETA))
    assert abs(c - (G - 1) / G) < 1e-12 and abs(rel - 1 / G) < 1e-12
    star = make_objective("star", normalise="correct")
    c, cos, _ = ascent_coefficient(expected_update(THETA, G, lambda o: star.weights(Group(rewards=R_BIN[o]))),
                                   grad(mean_J(R_BIN), THETA))
    assert abs(c - {2: 1.3482, 4: 1.5116, 8: 1.5338}[G]) < 1e-4 and cos > 1 - 1e-12


@pytest.mark.parametrize("baseline,options,target_k",
                         [("biased", {}, 3), ("leave_p_out", {"p": 2, "leave_p_out_form": "paper"}, 2)])
def test_passk_biased_forms_target_a_smaller_k(baseline, options, target_k):
    """passk baseline=biased is exactly grad J_{k-1}; the paper's leave-p-out exactly grad J_{k-p}."""
    obj = make_objective("passk", k=4, baseline=baseline, **options)
    update = expected_update(THETA, 5, lambda o: obj.weights(Group(rewards=R_REAL[o])))
    J = lambda k: (lambda pi: tuple_expectation(pi, k, lambda t: max(R_REAL[a] for a in t)))
    assert ascent_coefficient(update, grad(J(target_k), THETA))[2] < 1e-9
    c, cos, _ = ascent_coefficient(update, grad(J(4), THETA))  # against grad J_k itself (docs quote these)
    assert np.allclose((c, cos), {3: (1.0181, 0.98739), 2: (0.9989, 0.92178)}[target_k], atol=1e-4), (c, cos)


# ------------------------------------------------------------------------------------------------
# vBoN on tied rewards

TIED_REF = np.array([0.3, 0.2, 0.4, 0.1])


@pytest.mark.parametrize("N", [2, 4])
def test_vbon_default_target_is_bon_with_uniform_ties(N):
    """With the exact A = Pr[r < r(y)] and E = Pr[r = r(y)] of a tabular reference and tied 0/1
    rewards, the default target is a distribution and equals brute-force BoN (uniform ties); the old
    strict target (Eq. 4 with a strict F) has total mass below 1."""
    A = np.array([(TIED_REF * (R_BIN < x)).sum() for x in R_BIN])
    E = np.array([(TIED_REF * (R_BIN == x)).sum() for x in R_BIN])
    with np.errstate(divide="ignore"):  # A = 0 for the lowest reward: log A = -inf is handled
        log_A = np.log(A)
    tied = np.exp(amini.log_bon_prob_tied(log_A, np.log(E), np.log(TIED_REF), N))
    assert abs(tied.sum() - 1) < 1e-12
    assert np.allclose(np.log(tied), log_bon_uniform(TIED_REF, R_BIN, N), atol=1e-12)
    strict = np.exp(amini.log_bon_prob(log_A, np.log(TIED_REF), N))
    assert abs(strict.sum() - {2: 0.72, 4: 0.3552}[N]) < 1e-12  # not a distribution


@pytest.mark.parametrize("N", [2, 4])
def test_vbon_default_ascends_minus_kl_to_true_bon_on_ties(N):
    """End to end through the objective: a uniform reference whose M = 4 reference rewards are one
    draw of each outcome makes F_hat (cdf='plain') and the tie mass exact, so vbon's default must be
    exactly grad -KL(pi_theta || pi_bon) with the true, tie-uniform BoN distribution."""
    ref = np.full(4, 0.25)
    obj = make_objective("vbon", N=N, cdf="plain")
    lp = np.log(softmax(THETA))

    def weights_of(o):
        return obj.weights(Group(rewards=R_BIN[o], logprobs=lp[o], ref_logprobs=np.log(ref)[o], ref_rewards=R_BIN))
    update = expected_update(THETA, 3, weights_of)
    assert ascent_coefficient(update, grad(neg_kl_to(log_bon_uniform(ref, R_BIN, N)), THETA))[2] < 1e-9
    # the strict form targets something else (it is not even normalised)
    strict = make_objective("vbon", N=N, cdf="plain", ties="strict")
    update = expected_update(THETA, 3, lambda o: strict.weights(Group(rewards=R_BIN[o], logprobs=lp[o],
                                                                       ref_logprobs=np.log(ref)[o], ref_rewards=R_BIN)))
    assert ascent_coefficient(update, grad(neg_kl_to(log_bon_uniform(ref, R_BIN, N)), THETA))[2] > 1e-2


def test_vbon_uniform_equals_strict_without_ties():
    """Real rewards no reference reward equals: the default's weights are the old default's."""
    g = Group(rewards=np.array([0.15, 0.65, 0.35]), logprobs=np.log([0.2, 0.3, 0.1]), ref_logprobs=np.log([0.25, 0.2, 0.1]),
              ref_rewards=REF_REWARDS)
    assert np.allclose(make_objective("vbon").weights(g), make_objective("vbon", ties="strict").weights(g), atol=1e-14)


def test_vbon_l_plain_cdf_is_refused_before_training():
    with pytest.raises(BonbenchError, match="add_one") as e:
        make_objective("vbon_l", cdf="plain")
    assert "\n" not in str(e.value)
    # the default (add-one) stays finite where no reference reward lies below a sample
    w = make_objective("vbon_l").weights(Group(rewards=np.array([0.0, 1.0]), logprobs=np.log([0.5, 0.5]),
                                               ref_logprobs=np.log([0.5, 0.5]), ref_rewards=np.array([0.5, 0.5])))
    assert np.all(np.isfinite(w))


def test_add_one_cdf_bias_as_documented():
    """The paper's F_hat = count/M is unbiased for F; the authors' add-one (1+count)/(M+1) is biased up by
    (1-F)/(M+1). At M = 4, F = 0.5: E[F_hat+] - F = 0.1, and E[log F_hat+] - log F = +0.116 (plain: -inf
    with probability (1-F)^M = 1/16)."""
    from scipy.stats import binom

    M, F = 4, 0.5
    b = np.arange(M + 1)
    pmf = binom.pmf(b, M, F)
    assert abs(pmf @ (b / M) - F) < 1e-15
    assert abs(pmf @ ((1 + b) / (M + 1)) - F - (1 - F) / (M + 1)) < 1e-15
    assert abs(pmf @ np.log((1 + b) / (M + 1)) - math.log(F) - 0.116) < 5e-4


# ------------------------------------------------------------------------------------------------
# changed defaults and configs recorded before them


def test_changed_defaults_keep_old_records_meaning():
    """A run recorded before issue 24 named only N (``bonbench train --objective bon_rlb --N 4``), and
    its manifest the full old options; read through ``options_as_trained`` both still build the plug-in
    estimator they trained with, while ``pinned_options`` makes a new run name the new default."""
    from bonbench.api.objective import CHANGED_DEFAULTS, options_as_trained, pinned_options

    old_cli, old_manifest = {"N": 4}, {"N": 4, "sign": "plus", "p_clip": 0.95, "p_source": "group"}
    g = Group(rewards=np.zeros(8))
    plugin = make_objective("bon_rlb", p_estimate="plugin").weights(g)
    for rec in (old_cli, old_manifest):
        assert make_objective("bon_rlb", **options_as_trained("bon_rlb", rec)).options["p_estimate"] == "plugin"
        assert np.array_equal(make_objective("bon_rlb", **options_as_trained("bon_rlb", rec)).weights(g), plugin)
    assert pinned_options("bon_rlb", old_cli) == {"N": 4, "p_estimate": "unbiased"}
    assert pinned_options("bon_rlb", {"p_estimate": "plugin"}) == {"p_estimate": "plugin"}
    assert options_as_trained("vbon", {"N": 8})["ties"] == "strict" and pinned_options("vbon", {})["ties"] == "uniform"
    assert pinned_options("mean", {"baseline": "loo"}) == {"baseline": "loo"}  # unchanged objectives: as given
    for name, changed in CHANGED_DEFAULTS.items():  # every entry is a real option whose default moved
        for key, old in changed.items():
            assert key in REGISTRY[name].options and REGISTRY[name].options[key] != old


def test_rlb_plugin_options_without_plugin_are_refused():
    """sign / p_clip mean nothing to the exact default: one line naming the fix, not a silent ignore."""
    for kw in ({"sign": "minus"}, {"p_clip": 0.9}):
        with pytest.raises(BonbenchError, match="p_estimate=plugin") as e:
            make_objective("bon_rlb", **kw)
        assert "\n" not in str(e.value)
        make_objective("bon_rlb", p_estimate="plugin", **kw)
        make_objective("bon_rlb", p_source="value", **kw)
