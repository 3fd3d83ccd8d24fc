"""Exactness of Chow et al.'s and Amini et al.'s objectives (bonbench.plugins.objectives.chow / .amini).

Every estimator's expectation is computed exactly on a tabular softmax policy (every G-tuple of
outcomes enumerated, tests/objective_harness.py) and compared with the gradient of the objective it
claims, computed independently (the score-function identity over all N-tuples, or torch float64
autograd of a closed form). Where an estimator is only consistent, its exact expectation is computed
for growing G and must converge. Test vectors are math-reference §5 / §2.2 / §3.4.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from scipy.stats import binom

from bonbench.api.objective import NEEDS, REGISTRY, Group, make_objective
from bonbench.core.errors import BonbenchError
from bonbench.plugins.objectives import amini
from bonbench.plugins.objectives.bonbon import (
    bonbon,
    bonbon_loss_numpy,
    bonbon_loss_torch,
    bonbon_pairs,
    bonbon_target,
    bonbon_weights,
)
from bonbench.plugins.objectives.chow.rl import bon_rl_s, bon_rl_v, rl_s, rl_v
from bonbench.plugins.objectives.chow.rlb import bon_binary, bon_rlb, bon_rlb_p, rlb_sample_weights, rlb_weights
from bonbench.plugins.objectives.chow.sft import bon_sft, bon_sft_weights, lambda_n, sft, star, tilt_kl, tilt_win_rate
from tests.objective_harness import autograd, expected_estimate, k_sample_gradient, softmax

TOL = 1e-10


def close(a, b, tol=TOL):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    err = float(np.max(np.abs(a - b))) if a.size else 0.0
    assert err <= tol, f"max error {err:.3g} > {tol:.1g}\n{a}\n{b}"


def glogpi(theta, outcomes):
    """grad log pi(a) = e_a - pi for each outcome a."""
    pi = softmax(theta)
    return np.stack([np.eye(len(theta))[a] - pi for a in outcomes])


THETA4 = np.array([0.3, -0.7, 0.5, 0.1])
THETA5 = np.array([0.2, -0.4, 0.9, -1.1, 0.35])


# ------------------------------------------------------------------------------------------------
# test vectors


def test_eq8_vector_and_enumeration():
    correct, wrong, J = bon_binary(0.5, 4)
    assert (correct, wrong, J) == (15 / 8, 1 / 8, 15 / 16)
    # against the exact BoN distribution (uniform ties) of a policy that fails with p = 0.5
    pi = np.array([0.2, 0.3, 0.1, 0.4])
    R = np.array([1.0, 1.0, 0.0, 0.0])
    b = amini.bon_probs(pi, R, 4)
    close(b / pi, [15 / 8, 15 / 8, 1 / 8, 1 / 8], 1e-14)
    close(b[R == 1].sum(), 15 / 16, 1e-15)


def test_rlb_weight_vector():
    gp, gm, gbar = rlb_weights(0.5, 4)
    close([gp, gm, gbar], [8 / 15, 4, 4 / 15], 1e-15)


LOGF_TABLE = [  # (query r, count below, plain F_hat, add-one F_hat, log add-one)  math-reference §3.4
    (0.05, 0, 0.0, 0.2, -1.6094379124341003),
    (0.5, 1, 0.25, 0.4, -0.916290731874155),
    (0.7, 3, 0.75, 0.8, -0.2231435513142097),
    (1.0, 4, 1.0, 1.0, 0.0),
]


def test_log_f_hat_table():
    ref = [0.1, 0.5, 0.5, 0.9]
    q = np.array([row[0] for row in LOGF_TABLE])
    add = amini.log_f_hat(q, ref)
    close(add, [row[4] for row in LOGF_TABLE], 1e-15)
    close(np.exp(add), [row[3] for row in LOGF_TABLE], 1e-15)
    with np.errstate(divide="ignore"):
        close(np.exp(amini.log_f_hat(q, ref, cdf="plain")), [row[2] for row in LOGF_TABLE], 1e-15)
    assert amini.log_f_hat([0.5], ref)[0] == pytest.approx(-0.916290731874155, abs=1e-15)


def test_log_f_hat_random_order():
    ref = np.array([0.1, 0.5, 0.5, 0.9, 0.5])
    q = np.array([0.05, 0.3, 0.95])  # no ties: identical to strict
    close(amini.log_f_hat(q, ref, ties="random_order", seed=3), amini.log_f_hat(q, ref), 0.0)
    # ties: 1 strictly below and 3 tied; the count lies in [1, 4] and averages 1 + 3/2 over the keys
    counts = [round(np.exp(amini.log_f_hat([0.5], ref, ties="random_order", seed=s)[0]) * 6 - 1) for s in range(4000)]
    assert min(counts) == 1 and max(counts) == 4
    # count = 1 + Binomial(3, u), u ~ U(0, 1): mean 2.5, variance E[3u(1-u)] + Var(3u) = 1/2 + 3/4
    assert abs(np.mean(counts) - 2.5) < 5 * math.sqrt(1.25 / 4000)


@pytest.mark.parametrize("rule,values", [
    ("kl", [2.288641, 4.916908, 9.054541, 17.031899, 33.015789, 65.007853]),
    ("winrate", [2.149126, 4.801008, 8.989913, 16.999988, 33.000000, 65.000000]),
    # the reference's N = 64 entry reads 65.032827; the root is 65.0328241111 (mpmath, 40 digits)
    ("reverse_kl", [2.335131, 5.259443, 9.383759, 17.159314, 33.069340, 65.032824]),
])
def test_lambda_n_table(rule, values):
    for N, v in zip([2, 4, 8, 16, 32, 64], values, strict=True):
        assert abs(lambda_n(N, rule) - v) <= 1e-6, (rule, N, lambda_n(N, rule), v)
    assert lambda_n(1, rule) == 0.0


def test_lambda_n_rules_mean_what_they_say():
    N = 6
    assert tilt_kl(lambda_n(N, "kl")) == pytest.approx(amini.kl_bound(N), abs=1e-12)
    assert tilt_win_rate(lambda_n(N, "winrate")) == pytest.approx(N / (N + 1), abs=1e-12)
    # reverse KL(pi_lambda || pi_bon) on a fine grid of the continuous case is smallest at the root
    u = (np.arange(200000) + 0.5) / 200000

    def rkl(lam):
        d = np.exp(lam * (u - 1.0))
        d /= d.mean()
        return float(np.mean(d * (np.log(d) - np.log(N) - (N - 1) * np.log(u))))

    lam = lambda_n(N, "reverse_kl")
    assert rkl(lam) < rkl(lam - 0.05) and rkl(lam) < rkl(lam + 0.05)


# ------------------------------------------------------------------------------------------------
# BoN-RL-S / V (Lemma 2)

R_S = np.array([0.0, 1.0, 1.0, 0.5])  # rewards (ties between outcomes 1 and 2)
R_V = np.array([1.0, 0.0, 1.0, 0.5])  # graded by these ...
S_V = np.array([0.3, 0.7, 0.7, 0.1])  # ... picked by these verifier scores (1 and 2 tie, grades differ)


def bon_f(keys, grades):
    def f(t):
        k = keys[list(t)]
        top = [i for i, a in enumerate(t) if keys[a] == k.max()]
        return float(np.mean([grades[t[i]] for i in top]))
    return f


@pytest.mark.parametrize("kind", ["s", "v"])
@pytest.mark.parametrize("N,G", [(2, 2), (2, 3), (3, 3), (3, 4), (2, 4)])
@pytest.mark.parametrize("baseline", ["none", "loo"])
def test_bon_rl_exact(kind, N, G, baseline):
    if kind == "s":
        obj = bon_rl_s(N=N, baseline=baseline)
        keys, grades = R_S, R_S
        group_of = lambda t: Group(rewards=R_S[list(t)])
    else:
        obj = bon_rl_v(N=N, baseline=baseline)
        keys, grades = S_V, R_V
        group_of = lambda t: Group(rewards=R_V[list(t)], scores=S_V[list(t)])
    want = k_sample_gradient(THETA4, N, bon_f(keys, grades))
    got = expected_estimate(THETA4, G, lambda t: obj.weights(group_of(t)))
    assert np.abs(want).max() > 1e-2
    close(got, want)


def test_bon_rl_v_tie_break_matters():
    """Ties broken by row order equal uniform ties (rows are exchangeable); by response identity not."""
    def f_first_row(t):
        return float(R_V[t[int(np.argmax(S_V[list(t)]))]])

    def f_lowest_id(t):
        top = max(S_V[a] for a in t)
        return float(R_V[min(a for a in t if S_V[a] == top)])

    want = k_sample_gradient(THETA4, 3, bon_f(S_V, R_V))
    close(k_sample_gradient(THETA4, 3, f_first_row), want, 1e-14)
    assert np.abs(k_sample_gradient(THETA4, 3, f_lowest_id) - want).max() > 1e-3


def test_bon_rl_expert_rows_ignored():
    obj = bon_rl_s(N=2)
    g = Group(rewards=np.array([1.0, 0.0, 0.5, 1.0]), expert=np.array([False, False, False, True]))
    w = obj.weights(g)
    assert w[3] == 0.0
    close(w[:3], obj.weights(Group(rewards=np.array([1.0, 0.0, 0.5]))), 0.0)


# ------------------------------------------------------------------------------------------------
# BoN-RLB, BoN-RLB(P) (Lemma 3 / Cor. 4) and the sign question

R_BIN = np.array([1.0, 0.0, 1.0, 0.0, 0.0])
FAIL = R_BIN == 0


def p_fail(theta):
    return float(softmax(theta)[FAIL].sum())


def grad_J(theta, N):
    return autograd(lambda t: 1 - torch.softmax(t, 0)[torch.as_tensor(FAIL)].sum() ** N, theta)


@pytest.mark.parametrize("N", [2, 3, 4])
def test_rlb_paper_form_under_pi_bon(N):
    """The reported weights as expectations under pi_bon: plus form = grad J, minus = (1+p)/(1-p) grad J."""
    pi, p = softmax(THETA5), p_fail(THETA5)
    b = amini.bon_probs(pi, R_BIN, N)
    gp, gm, gbar = rlb_weights(p, N)
    sc = glogpi(THETA5, range(5))
    plus = sum(b[a] * (gp if R_BIN[a] else gm) * sc[a] for a in range(5))
    minus = sum(b[a] * (gp if R_BIN[a] else -gm) * sc[a] for a in range(5))
    pos = sum(b[a] * (gbar if R_BIN[a] else 0.0) * sc[a] for a in range(5))
    neg_only = sum(b[a] * (0.0 if R_BIN[a] else -N) * sc[a] for a in range(5))
    gJ = grad_J(THETA5, N)
    close(plus, gJ)
    close(pos, gJ)
    close(neg_only, gJ)
    close(minus, (1 + p) / (1 - p) * gJ)
    assert np.abs(minus - gJ).max() > 1e-2  # the minus form is not the gradient


@pytest.mark.parametrize("N", [2, 4])
@pytest.mark.parametrize("G", [1, 3])
def test_rlb_population_weights_from_pi_samples(N, G):
    """Samples of pi reweighted by Eq. 8, true p: plus and positive-only are exactly grad(1 - p^N)."""
    p = p_fail(THETA5)
    gJ = grad_J(THETA5, N)
    for kw, factor in [({"sign": "plus"}, 1.0), ({"positive_only": True}, 1.0), ({"sign": "minus"}, (1 + p) / (1 - p))]:
        got = expected_estimate(THETA5, G, lambda t, kw=kw: rlb_sample_weights(R_BIN[list(t)] == 1, p, N, **kw))
        close(got, factor * gJ)


@pytest.mark.parametrize("N,G", [(2, 2), (2, 4), (3, 3), (3, 4)])
def test_rlb_p_unbiased_estimator_exact(N, G):
    obj = bon_rlb_p(N=N)  # p_estimate='unbiased' by default
    R = R_BIN[:4]
    got = expected_estimate(THETA4, G, lambda t: obj.weights(Group(rewards=R[list(t)])))
    want = autograd(lambda t: 1 - torch.softmax(t, 0)[torch.as_tensor(R == 0)].sum() ** N, THETA4)
    close(got, want)


def _binomial_expectation(theta, G, weights):
    """Exact E[sum_i w_i grad log pi(y_i)] for weights that depend on own correctness and the group's
    failure count only: G * sum_a pi_a (e_a - pi) E_{F' ~ Bin(G-1, p)}[w_row0 | y_0 = a]."""
    pi, p = softmax(theta), p_fail(theta)
    sc = glogpi(theta, range(len(theta)))
    Fs = np.arange(G)
    pmf = binom.pmf(Fs, G - 1, p)
    w_row0 = {}
    for own in (0.0, 1.0):
        vals = []
        for F in Fs:  # F failures among the other G-1
            r = np.array([own] + [0.0] * F + [1.0] * (G - 1 - F))
            vals.append(weights(Group(rewards=r))[0])
        w_row0[own] = float(np.dot(pmf, vals))
    return G * sum(pi[a] * w_row0[R_BIN[a]] * sc[a] for a in range(len(theta)))


@pytest.mark.parametrize("make,kw", [(bon_rlb, {"p_estimate": "plugin"}), (bon_rlb_p, {"p_estimate": "plugin"})])
def test_rlb_plugin_is_consistent_not_unbiased(make, kw):
    N = 4
    obj = make(N=N, **kw)
    gJ = grad_J(THETA5, N)
    # small G agrees with brute-force enumeration of G-tuples (checks the binomial shortcut)
    close(_binomial_expectation(THETA5, 3, obj.weights),
          expected_estimate(THETA5, 3, lambda t: obj.weights(Group(rewards=R_BIN[list(t)]))))
    errs = [np.abs(_binomial_expectation(THETA5, G, obj.weights) - gJ).max() for G in (4, 16, 64, 256)]
    assert errs[0] > 1e-3  # biased at small G
    assert all(b < a for a, b in zip(errs, errs[1:], strict=False))  # and converging
    assert errs[-1] < errs[-2] / 3  # O(1/G): G x 4 cuts the bias about 4-fold


def test_rlb_rejects_non_binary_rewards():
    with pytest.raises(BonbenchError, match="0/1"):
        bon_rlb().weights(Group(rewards=np.array([1.0, 0.5])))


# ------------------------------------------------------------------------------------------------
# BoN-SFT (Lemma 1)

THETA6 = np.array([0.4, -0.3, 0.8, 0.0, -0.9, 0.25])
KEYS6 = np.array([0.1, 0.9, 0.4, 0.4, 0.7, 0.2])  # ties between outcomes 2 and 3


def log_pi_lambda(t, keys, star, lam):
    pi = torch.softmax(t, 0)
    k = torch.as_tensor(keys)
    Q = (pi[None, :] * (k[:, None] >= k[None, :]).double()).sum(1)
    return torch.log(pi[star]) + lam * Q[star] - torch.log((pi * torch.exp(lam * Q)).sum())


@pytest.mark.parametrize("star", [1, 3, 5])
def test_bon_sft_population_is_lemma1(star):
    lam = 3.0
    pi = softmax(THETA6)
    w_exp, w_pol = bon_sft_weights(KEYS6[[star]], KEYS6, lam, mass=pi)
    sc = glogpi(THETA6, range(6))
    got = w_exp[0] * sc[star] + w_pol @ sc
    want = autograd(lambda t: log_pi_lambda(t, KEYS6, star, lam), THETA6)
    close(got, want)
    # the grad Q terms matter (math-reference: 0.26 error without them)
    Q = np.array([(pi * (KEYS6[a] >= KEYS6)).sum() for a in range(6)])
    u = pi * np.exp(lam * Q)
    u /= u.sum()
    assert np.abs(sc[star] - u @ sc - want).max() > 1e-2


def test_bon_sft_sampled_is_consistent():
    lam, star = 3.0, 1
    want = autograd(lambda t: log_pi_lambda(t, KEYS6, star, lam), THETA6)
    rng = np.random.default_rng(7)
    errs = []
    for G in (200, 20000):
        ys = rng.choice(6, size=G, p=softmax(THETA6))
        w_exp, w_pol = bon_sft_weights(KEYS6[[star]], KEYS6[ys], lam)
        sc = glogpi(THETA6, ys)
        errs.append(np.abs(w_exp[0] * glogpi(THETA6, [star])[0] + w_pol @ sc - want).max())
    assert errs[1] < 0.03 and errs[1] < errs[0]


def test_bon_sft_objective_rows():
    obj = bon_sft(N=4)
    assert obj.options["lambda"] == pytest.approx(4.916908, abs=1e-6)
    g = Group(rewards=np.array([1.0, 0.0, 1.0, 0.0, 1.0]), expert=np.array([True, False, False, False, False]))
    w = obj.weights(g)
    w_exp, w_pol = bon_sft_weights(np.array([1.0]), np.array([0.0, 1.0, 0.0, 1.0]), obj.options["lambda"])
    close(w, np.concatenate([w_exp, w_pol]), 0.0)
    assert w[0] == 1.0
    assert bon_sft(lam=2.0).options["lambda"] == 2.0


# ------------------------------------------------------------------------------------------------
# baselines


def test_sft_star_rl_exact():
    R = np.array([1.0, 0.0, 1.0, 0.0])
    S = np.array([0.2, 0.9, 0.4, 0.1])
    g = Group(rewards=np.array([1.0, 0.0]), expert=np.array([True, False]))
    close(sft().weights(g), [1.0, 0.0], 0.0)
    star_ = star()
    got = expected_estimate(THETA4, 3, lambda t: star_.weights(Group(rewards=R[list(t)])))
    close(got, autograd(lambda t: torch.softmax(t, 0)[torch.as_tensor(R == 1)].sum(), THETA4))
    for baseline in ("loo", "none"):
        rs = rl_s(baseline=baseline)
        got = expected_estimate(THETA4, 3, lambda t, rs=rs: rs.weights(Group(rewards=R_S[list(t)])))
        close(got, autograd(lambda t: torch.softmax(t, 0) @ torch.as_tensor(R_S), THETA4))
        rv = rl_v(baseline=baseline)
        got = expected_estimate(THETA4, 3, lambda t, rv=rv: rv.weights(Group(rewards=R[list(t)], scores=S[list(t)])))
        close(got, autograd(lambda t: torch.softmax(t, 0) @ torch.as_tensor(S), THETA4))


# ------------------------------------------------------------------------------------------------
# the learned value (Chow et al. §2.8): baseline value, p from the value


@pytest.mark.parametrize("V", [0.0, 0.37, 2.0])
@pytest.mark.parametrize("N,G", [(1, 1), (2, 2), (2, 3), (3, 4)])
def test_bon_rl_value_baseline_is_exact_for_any_value(V, N, G):
    """baseline='value': any V(x) (a function of x alone) keeps the BoN-RL estimator exactly unbiased."""
    obj = bon_rl_s(N=N, baseline="value")
    assert "value" in obj.needs and obj.min_group == N
    got = expected_estimate(THETA4, G, lambda t: obj.weights(Group(rewards=R_S[list(t)], value=V)))
    close(got, k_sample_gradient(THETA4, N, bon_f(R_S, R_S)))
    # the regression target is U_N of the group: its expectation is J_N exactly
    J = sum(np.prod(softmax(THETA4)[list(t)]) * bon_f(R_S, R_S)(t) for t in itertools.product(range(4), repeat=N))
    EU = sum(np.prod(softmax(THETA4)[list(t)]) * obj.value_target(Group(rewards=R_S[list(t)]))
             for t in itertools.product(range(4), repeat=G))
    close(EU, J)
    # any constant baseline is unbiased, so the scale is checked directly: each sample lies in N/G of the
    # N-subsets, each of which subtracts V once
    g = Group(rewards=R_S[[1, 0, 3, 2][:G]], value=V)
    close(obj.weights(g), bon_rl_s(N=N, baseline="none").weights(g) - N / G * V, 1e-14)


@pytest.mark.parametrize("V", [0.0, 0.6])
def test_rl_value_baseline_is_exact(V):
    R = np.array([1.0, 0.0, 1.0, 0.0])
    S = np.array([0.2, 0.9, 0.4, 0.1])
    rs, rv = rl_s(baseline="value"), rl_v(baseline="value")
    got = expected_estimate(THETA4, 3, lambda t: rs.weights(Group(rewards=R_S[list(t)], value=V)))
    close(got, autograd(lambda t: torch.softmax(t, 0) @ torch.as_tensor(R_S), THETA4))
    got = expected_estimate(THETA4, 2, lambda t: rv.weights(Group(rewards=R[list(t)], scores=S[list(t)], value=V)))
    close(got, autograd(lambda t: torch.softmax(t, 0) @ torch.as_tensor(S), THETA4))
    g = Group(rewards=np.array([1.0, 0.0, 0.5]), scores=np.array([0.3, 0.2, 0.9]), value=V)
    close(rs.weights(g), (np.array([1.0, 0.0, 0.5]) - V) / 3, 1e-15)
    assert rs.value_target(g) == 0.5 and rv.value_target(g) == pytest.approx(1.4 / 3)


@pytest.mark.parametrize("N", [2, 4])
@pytest.mark.parametrize("G", [1, 3])
def test_perfect_value_gives_the_closed_form_rlb_weights(N, G):
    """p_source='value' with the true p: the weights are the closed forms at p, and both estimators are
    exactly grad(1 - p^N) (BoN-RLB with sign plus, BoN-RLB(P))."""
    p = p_fail(THETA5)
    gJ = grad_J(THETA5, N)
    rlb, rlbp = bon_rlb(N=N, p_source="value"), bon_rlb_p(N=N, p_source="value")
    assert rlb.needs == rlbp.needs == frozenset({"value"}) and rlbp.min_group == 1
    r = np.array([1.0, 0.0, 0.0])
    g = Group(rewards=r, value=p)
    close(rlb.weights(g), np.where(r == 1, N * p ** (N - 1) / (1 - p), N * p**N / (1 - p)) / 3, 1e-14)
    close(rlbp.weights(g), np.where(r == 1, N * p ** (N - 1), 0.0) / 3, 1e-14)
    for obj in (rlb, rlbp):
        close(expected_estimate(THETA5, G, lambda t, obj=obj: obj.weights(Group(rewards=R_BIN[list(t)], value=p))), gJ)
        # the head regresses on the failing fraction, whose expectation is p
        Ef = sum(np.prod(softmax(THETA5)[list(t)]) * obj.value_target(Group(rewards=R_BIN[list(t)]))
                 for t in itertools.product(range(5), repeat=G))
        close(Ef, p)


def test_value_p_is_clipped_before_the_weights():
    r = np.array([1.0, 0.0])
    for raw, p in [(1.7, 0.8), (-0.3, 0.0), (0.5, 0.5)]:
        got = bon_rlb(N=2, p_clip=0.8, p_source="value").weights(Group(rewards=r, value=raw))
        close(got, rlb_sample_weights(r == 1, p, 2), 0.0)


def test_missing_value_names_the_flag():
    for obj in (bon_rl_s(N=2, baseline="value"), rl_s(baseline="value"), bon_rlb(p_source="value")):
        with pytest.raises(BonbenchError) as e:
            obj.weights(Group(rewards=np.array([1.0, 0.0, 1.0])))
        msg = str(e.value)
        assert NEEDS["value"] in msg and "--baseline value" in msg and "\n" not in msg
    with pytest.raises(BonbenchError, match="p_source"):
        bon_rlb(p_source="network")


def test_star_keeps_correct_rationalisations():
    """Expert rows of a STaR group are its rationalisations: kept like correct samples (1/G, G policy rows)."""
    g = Group(rewards=np.array([0.0, 0.0, 0.0, 0.0, 1.0, 1.0]), expert=np.array([False] * 4 + [True] * 2))
    close(star().weights(g), [0, 0, 0, 0, 0.25, 0.25], 0.0)
    close(star(normalise="correct").weights(g), [0, 0, 0, 0, 0.5, 0.5], 0.0)


# ------------------------------------------------------------------------------------------------
# Amini et al.: exact BoN distribution, vBoN, vBoN-L, kl_rl, PPO form

PI_REF5 = np.array([0.15, 0.3, 0.1, 0.25, 0.2])
REW5 = np.array([0.42, 0.1, 0.91, 0.66, 0.3])  # distinct


def bon_enumerated(p, r, N):
    out = np.zeros(len(p))
    for t in itertools.product(range(len(p)), repeat=N):
        prob = np.prod(p[list(t)])
        top = [a for a in t if r[a] == max(r[b] for b in t)]
        for a in top:
            out[a] += prob / len(top)
    return out


def test_bon_probs_exact():
    close(amini.bon_probs(PI_REF5, REW5, 4), bon_enumerated(PI_REF5, REW5, 4), 1e-14)
    close(amini.bon_prob(amini.strict_cdf(PI_REF5, REW5), PI_REF5, 4), bon_enumerated(PI_REF5, REW5, 4), 1e-14)
    tied = np.array([0.4, 0.1, 0.4, 0.66, 0.1])
    close(amini.bon_probs(PI_REF5, tied, 3), bon_enumerated(PI_REF5, tied, 3), 1e-14)
    # the §3.1 formula with strict F is not the tie-uniform BoN when distinct outcomes tie
    assert np.abs(amini.bon_prob(amini.strict_cdf(PI_REF5, tied), PI_REF5, 3) - bon_enumerated(PI_REF5, tied, 3)).max() > 1e-3


def test_log_bon_prob_stable():
    F = np.array([0.0, 0.3, 0.999, 1e-300])
    p = np.array([0.2, 1e-40, 1e-3, 1e-310])
    with np.errstate(divide="ignore"):
        lf = np.log(F)
    got = amini.log_bon_prob(lf, np.log(p), 5)
    # reference: the binomial sum in log space (the authors' form)
    ref = []
    for f, q in zip(F, p, strict=True):
        terms = [math.log(math.comb(5, i)) + ((5 - i) * math.log(f) if i < 5 else 0.0) + i * math.log(q)
                 for i in range(1, 6) if f > 0 or i == 5]
        ref.append(np.logaddexp.reduce(terms))
    close(got, ref, 1e-12 * max(1.0, np.abs(ref).max()))
    assert np.all(np.isfinite(got))


def _tab(theta):
    return softmax(theta), np.log(softmax(theta))


@pytest.mark.parametrize("baseline", ["none", "loo"])
@pytest.mark.parametrize("N", [2, 4])
def test_vbon_exact_F(baseline, N):
    pi, lp = _tab(THETA5)
    F = amini.strict_cdf(PI_REF5, REW5)
    with np.errstate(divide="ignore"):
        log_bon = amini.log_bon_prob(np.log(F), np.log(PI_REF5), N)  # F = 0 for the lowest outcome
    target = amini.bon_probs(PI_REF5, REW5, N)
    close(np.exp(log_bon), target, 1e-15)
    got = expected_estimate(THETA5, 3, lambda t: amini.vbon_weights(log_bon[list(t)], lp[list(t)], baseline))
    tgt = torch.as_tensor(target)
    want = autograd(lambda t: -(torch.softmax(t, 0) * (torch.log_softmax(t, 0) - torch.log(tgt))).sum(), THETA5)
    close(got, want)


REF_REWARDS = np.array([0.2, 0.42, 0.05, 0.7, 0.66, 0.95, 0.3])  # M = 7 reference rewards (ties with REW5)


def _group5(t, **extra):
    pi, lp = _tab(THETA5)
    t = list(t)
    return Group(rewards=REW5[t], logprobs=lp[t], ref_logprobs=np.log(PI_REF5)[t], ref_rewards=REF_REWARDS, **extra)


@pytest.mark.parametrize("cdf", ["add_one", "plain"])
@pytest.mark.parametrize("baseline", ["none", "loo"])
def test_vbon_objective_with_f_hat(cdf, baseline):
    N = 3
    obj = amini.vbon(N=N, baseline=baseline, cdf=cdf)
    with np.errstate(divide="ignore"):
        lf = amini.log_f_hat(REW5, REF_REWARDS, cdf=cdf)
    log_bon_hat = torch.as_tensor(amini.log_bon_prob(lf, np.log(PI_REF5), N))
    got = expected_estimate(THETA5, 3, lambda t: obj.weights(_group5(t)))
    want = autograd(lambda t: (torch.softmax(t, 0) * (log_bon_hat - torch.log_softmax(t, 0))).sum(), THETA5)
    close(got, want)


@pytest.mark.parametrize("bound", ["L", "L1"])
def test_vbon_l_exact(bound):
    N = 4
    obj = amini.vbon_l(N=N, bound=bound)
    lf = torch.as_tensor(amini.log_f_hat(REW5, REF_REWARDS))
    lr = torch.as_tensor(np.log(PI_REF5))
    a, b = (N - 1, 1.0) if bound == "L" else (N * (N - 1) / 2, N * (N + 1) / 2)

    def objective(t):
        pi, lp = torch.softmax(t, 0), torch.log_softmax(t, 0)
        if bound == "L":
            return a * (pi * lf).sum() - (pi * (lp - lr)).sum()
        H = -(pi * lp).sum()
        return a * (pi * lf).sum() - (N + 2) * (N - 1) / 2 * H - b * (pi * (lp - lr)).sum()

    got = expected_estimate(THETA5, 3, lambda t: obj.weights(_group5(t)))
    close(got, autograd(objective, THETA5))


def test_vbon_bounds_order():
    """-KL(pi || pi_bon) >= log N + L >= log N + L_1 with the exact F (Theorem 4)."""
    pi, lp = _tab(THETA5)
    lf = np.log(np.maximum(amini.strict_cdf(PI_REF5, REW5), 1e-300))
    for N in (2, 4, 8):
        neg_kl = -amini.kl(pi, amini.bon_probs(PI_REF5, REW5, N))
        L = pi @ amini.vbon_l_terms(lf, lp, np.log(PI_REF5), N, "L")
        L1 = pi @ amini.vbon_l_terms(lf, lp, np.log(PI_REF5), N, "L1")
        assert neg_kl >= math.log(N) + L >= math.log(N) + L1


@pytest.mark.parametrize("baseline", ["none", "loo"])
def test_kl_rl_exact(baseline):
    beta = 0.3
    obj = amini.kl_rl(beta=beta, baseline=baseline)
    got = expected_estimate(THETA5, 3, lambda t: obj.weights(_group5(t)))
    lr = torch.as_tensor(np.log(PI_REF5))
    r = torch.as_tensor(REW5)
    want = autograd(lambda t: torch.softmax(t, 0) @ r - beta * (torch.softmax(t, 0) * (torch.log_softmax(t, 0) - lr)).sum(),
                    THETA5)
    close(got, want)


def test_ppo_form_identity():
    """reward (log pi_bon - log pi_ref)/N with beta = 1/N: the KL-RL objective is -(1/N) KL(pi || pi_bon)."""
    pi, lp = _tab(THETA5)
    lr = np.log(PI_REF5)
    for N in (2, 5, 8):
        log_bon = np.log(amini.bon_probs(PI_REF5, REW5, N))
        rew = amini.ppo_form_reward(log_bon, lr, N)
        value = pi @ rew - (1 / N) * amini.kl(pi, PI_REF5)
        assert value == pytest.approx(-amini.kl(pi, np.exp(log_bon)) / N, abs=1e-14)
        t = [0, 2, 2, 4]
        close(amini.kl_rl_weights(rew[t], lp[t], lr[t], 1 / N), amini.vbon_weights(log_bon[t], lp[t]) / N, 1e-15)
        # and the weights are not those of a different beta
        assert np.abs(amini.kl_rl_weights(rew[t], lp[t], lr[t], 1 / (N + 1))
                      - amini.vbon_weights(log_bon[t], lp[t]) / N).max() > 1e-4


def test_kl_bound_and_win_rate():
    # near-continuous: 4000 equal atoms with distinct rewards
    K = 4000
    p = np.full(K, 1.0 / K)
    r = np.random.default_rng(0).permutation(K).astype(float)
    for N in (2, 4, 16):
        kl = amini.bon_kl_to_ref(p, r, N)
        assert kl <= amini.kl_bound(N) and amini.kl_bound(N) - kl < 1e-6
        assert amini.bon_win_rate(p, r, N) == pytest.approx(N / (N + 1), abs=1e-6)
    assert amini.bon_kl_to_ref(p, r, 4) == pytest.approx(0.636294314, abs=2e-9)
    # discrete with ties (K = 5): strictly below both
    tied = np.array([0.4, 0.1, 0.4, 0.66, 0.1])
    assert amini.bon_kl_to_ref(PI_REF5, tied, 4) < amini.kl_bound(4) - 0.05
    assert amini.bon_win_rate(PI_REF5, tied, 4) < 0.8 - 0.02


# ------------------------------------------------------------------------------------------------
# BoNBoN


def test_bonbon_target_is_best_worst_gap():
    """(N-1) H_{N-1} = E[log(pi_bon/pi_ref)(best of N) - (worst of N)] for a near-continuous reward."""
    K, N = 20000, 8
    k = np.arange(1, K + 1, dtype=np.float64)
    cdf_hi, cdf_lo = k / K, (k - 1) / K
    log_ratio = np.log((cdf_hi**N - cdf_lo**N) * K)  # pi_bon / pi_ref of the k-th ranked atom
    p_best = cdf_hi**N - cdf_lo**N
    p_worst = (1 - cdf_lo) ** N - (1 - cdf_hi) ** N
    gap = p_best @ log_ratio - p_worst @ log_ratio
    assert gap == pytest.approx(bonbon_target(N), rel=2e-3)
    assert bonbon_target(2) == 1.0 and bonbon_target(4) == pytest.approx(3 * (1 + 1 / 2 + 1 / 3))


@pytest.mark.parametrize("N,outcomes", [(4, [0, 2, 4, 1]), (3, [0, 2, 2, 4, 1]), (2, [3, 0, 1])])
def test_bonbon_weights_are_the_loss_gradient(N, outcomes):
    alpha = 0.3
    t = list(outcomes)
    rew = np.array([0.42, 0.1, 0.91, 0.66, 0.3])[t]
    ref = torch.as_tensor(np.log(PI_REF5)[t])
    pi, lp = _tab(THETA5)
    w = bonbon_weights(lp[t], np.log(PI_REF5)[t], rew, N, alpha)
    got = w @ glogpi(THETA5, t)
    want = -autograd(lambda th: bonbon_loss_torch(torch.log_softmax(th, 0)[t], ref, rew, N, alpha), THETA5)
    close(got, want, 1e-12)
    loss_t = bonbon_loss_torch(torch.as_tensor(lp[t]), ref, rew, N, alpha).item()
    assert bonbon_loss_numpy(lp[t], np.log(PI_REF5)[t], rew, N, alpha) == pytest.approx(loss_t, abs=1e-12)
    obj = bonbon(N=N, alpha=alpha)
    close(obj.weights(Group(rewards=rew, logprobs=lp[t], ref_logprobs=np.log(PI_REF5)[t])), w, 0.0)


def test_bonbon_pairs_subset_counts():
    r = np.array([0.3, 0.1, 0.9, 0.5, 0.7])
    best, worst, P, top = bonbon_pairs(r, 3)
    counts = {}
    for S in itertools.combinations(range(5), 3):
        key = (max(S, key=lambda i: r[i]), min(S, key=lambda i: r[i]))
        counts[key] = counts.get(key, 0) + 1 / 10
    assert {(int(b), int(w)): p for b, w, p in zip(best, worst, P, strict=True) if p > 0} == pytest.approx(counts)
    close(top, [0, 0, 6 / 10, 1 / 10, 3 / 10], 1e-15)  # C(rank, 2)/C(5, 3), ranks 0-based ascending


# ------------------------------------------------------------------------------------------------
# bad input and registry


def test_missing_scores_names_the_flag():
    with pytest.raises(BonbenchError) as e:
        bon_rl_v(N=2).weights(Group(rewards=np.array([1.0, 0.0, 1.0])))
    msg = str(e.value)
    assert "scores" in msg and NEEDS["scores"] in msg and "\n" not in msg


def test_missing_ref_rewards_names_the_flag():
    g = Group(rewards=np.array([0.1, 0.4]), logprobs=np.array([-1.0, -2.0]), ref_logprobs=np.array([-1.5, -1.0]))
    for obj in (amini.vbon(), amini.vbon_l()):
        with pytest.raises(BonbenchError) as e:
            obj.weights(g)
        msg = str(e.value)
        assert "ref_rewards" in msg and NEEDS["ref_rewards"] in msg and "\n" not in msg


def test_registry_and_options():
    names = {"bon_rl_s", "bon_rl_v", "bon_rlb", "bon_rlb_p", "bon_sft", "sft", "star", "rl_s", "rl_v",
             "vbon", "vbon_l", "bonbon", "kl_rl"}
    assert names <= set(REGISTRY)
    assert REGISTRY["bon_rl_v"].needs == frozenset({"scores"})
    assert REGISTRY["vbon"].needs == frozenset({"logprobs", "ref_logprobs", "ref_rewards"})
    assert REGISTRY["bon_rlb"].options == {"N": 4, "p_estimate": "unbiased", "sign": "plus", "p_clip": 0.95, "p_source": "group"}
    assert REGISTRY["vbon"].options["N"] == 8 and REGISTRY["kl_rl"].options["beta"] == 0.05
    assert make_objective("bon_rl_s", N=3).min_group == 3
    with pytest.raises(BonbenchError, match="sign"):
        bon_rlb(sign="neg")
    with pytest.raises(BonbenchError, match="lambda_rule"):
        bon_sft(lambda_rule="bogus")
    with pytest.raises(BonbenchError, match="at least 3"):
        bon_rl_s(N=3).weights(Group(rewards=np.array([1.0, 0.0])))
