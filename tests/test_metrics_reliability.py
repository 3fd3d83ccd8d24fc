"""pass^k, G-Pass@k and mG-Pass@k against explicit enumeration of every k-subset (exact rationals),
exact integer formulas at n = 256, the paper's mG-Pass@k sum (even k: equal; odd k: it drops half an
interval), the equalities with pass@k, the curve functions against the per-problem ones, and bad input."""

from __future__ import annotations

import math
import random
from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest

from bonbench.metrics.pass_bon import pass_at_k
from bonbench.metrics.reliability import (
    gpass_at_k,
    gpass_curve,
    gpass_threshold,
    mgpass_at_k,
    mgpass_curve,
    pass_hat_at_k,
    pass_hat_curve,
)

F = Fraction
TOL = 1e-12
TAUS = ("0", "0.1", "0.25", "1/3", "0.5", "0.6", "0.7", "0.75", "0.9", "1")


def brute_at_least(correct: list[int], k: int, m: int) -> Fraction:
    """Share of the k-subsets with at least m right samples."""
    subsets = list(combinations(correct, k))
    return F(sum(sum(s) >= m for s in subsets), len(subsets))


def brute_pass_hat(correct: list[int], k: int) -> Fraction:
    subsets = list(combinations(correct, k))
    return F(sum(all(s) for s in subsets), len(subsets))


def threshold(tau: Fraction, k: int) -> int:
    """G-Pass@k's threshold in exact arithmetic: at least ceil(tau k) right, and at least one."""
    return max(1, math.ceil(tau * k))


def brute_mgpass(correct: list[int], k: int) -> Fraction:
    """2 * int_{1/2}^{1} G-Pass@k_tau dtau, the step function integrated piece by piece: on
    tau in ((i-1)/k, i/k] the threshold is i."""
    total = F(0)
    for i in range(1, k + 1):
        lo, hi = max(F(i - 1, k), F(1, 2)), F(i, k)
        if hi > lo:
            total += (hi - lo) * brute_at_least(correct, k, i)
    return 2 * total


def paper_mgpass(correct: list[int], k: int) -> Fraction:
    """The GPassK paper's mG-Pass@k = (2/k) sum_{i=ceil(k/2)+1}^{k} G-Pass@k_{i/k}."""
    return F(2, k) * sum((brute_at_least(correct, k, i) for i in range(math.ceil(k / 2) + 1, k + 1)), F(0))


def random_grades(rng: random.Random, n_max: int = 9) -> list[int]:
    n = rng.randint(1, n_max)
    c = rng.choice([0, n, rng.randint(0, n)])
    grades = [1] * c + [0] * (n - c)
    rng.shuffle(grades)
    return grades


# ---------------------------------------------------------------------------------------------
# against enumeration


@pytest.mark.parametrize("seed", range(40))
def test_every_metric_matches_enumeration(seed: int) -> None:
    rng = random.Random(seed)
    grades = random_grades(rng)
    n = len(grades)
    for k in range(1, n + 1):
        assert pass_hat_at_k(grades, k) == pytest.approx(float(brute_pass_hat(grades, k)), abs=TOL)
        assert mgpass_at_k(grades, k) == pytest.approx(float(brute_mgpass(grades, k)), abs=TOL)
        for tau in TAUS:
            expected = brute_at_least(grades, k, threshold(F(tau), k))
            assert gpass_at_k(grades, k, float(F(tau))) == pytest.approx(float(expected), abs=TOL), (tau, k)


def test_threshold_survives_float_products() -> None:
    assert 0.28 * 25 > 7 and 0.07 * 100 > 7  # float products a plain ceil would round up to 8
    assert gpass_threshold(25, 0.28) == 7
    assert gpass_threshold(100, 0.07) == 7
    assert gpass_threshold(10, 0.7) == 7
    assert gpass_threshold(10, 0.3) == 3
    assert gpass_threshold(3, 1 / 3) == 1
    assert gpass_threshold(100, 0.29) == 29  # 0.29 * 100 = 28.999999999999996
    assert gpass_threshold(4, 0.0) == 1  # at least one right: tau = 0 is pass@k
    assert gpass_threshold(7, 1.0) == 7
    grades = [1] * 7 + [0] * 20
    assert gpass_at_k(grades, 25, 0.28) == pytest.approx(float(brute_at_least(grades, 25, 7)), abs=TOL)
    assert gpass_at_k(grades, 25, 0.28) > gpass_at_k(grades, 25, 0.29)  # 0.29: threshold 8


def test_edge_cases() -> None:
    assert pass_hat_at_k([1, 1, 1], 3) == 1.0
    assert pass_hat_at_k([1, 1, 0], 3) == 0.0
    assert pass_hat_at_k([0, 1, 0], 1) == pytest.approx(1 / 3, abs=TOL)
    assert gpass_at_k([0, 0, 0, 0], 2, 0.0) == 0.0
    assert mgpass_at_k([1] * 5, 5) == 1.0
    assert mgpass_at_k([True, False, True], 2) == pytest.approx(1 / 3, abs=TOL)  # bools are grades


# ---------------------------------------------------------------------------------------------
# equalities


@pytest.mark.parametrize("seed", range(20))
def test_tau_zero_is_pass_and_tau_one_is_pass_hat(seed: int) -> None:
    rng = random.Random(100 + seed)
    grades = random_grades(rng, n_max=40)
    for k in range(1, len(grades) + 1):
        assert gpass_at_k(grades, k, 0.0) == pytest.approx(pass_at_k(grades, k), abs=TOL)
        assert gpass_at_k(grades, k, 1.0) == pytest.approx(pass_hat_at_k(grades, k), abs=TOL)
    assert mgpass_at_k(grades, 1) == pytest.approx(pass_at_k(grades, 1), abs=TOL)


@pytest.mark.parametrize("seed", range(10))
def test_mgpass_paper_formula_even_k_and_its_odd_k_gap(seed: int) -> None:
    rng = random.Random(200 + seed)
    grades = random_grades(rng)
    for k in range(1, len(grades) + 1):
        ours = mgpass_at_k(grades, k)
        if k % 2 == 0:
            assert ours == pytest.approx(float(paper_mgpass(grades, k)), abs=TOL)
        else:
            # the paper's sum leaves out tau in (1/2, (k+1)/2k]: a half interval of threshold (k+1)/2
            gap = F(1, k) * brute_at_least(grades, k, (k + 1) // 2)
            assert ours == pytest.approx(float(paper_mgpass(grades, k) + gap), abs=TOL)
    assert paper_mgpass([1, 1, 0], 1) == 0  # the paper's mG-Pass@1 is 0 whatever the grades
    assert mgpass_at_k([1, 1, 0], 1) == pytest.approx(2 / 3, abs=TOL)


# ---------------------------------------------------------------------------------------------
# precision at n = 256 against exact integer sums


def test_exact_at_n_256() -> None:
    rng = random.Random(7)
    n = 256
    for _ in range(60):
        c, k, tau = rng.randint(0, n), rng.randint(1, n), rng.choice([0.0, 0.3, 0.5, 0.75, 0.9, 1.0])
        grades = [1] * c + [0] * (n - c)
        m = gpass_threshold(k, tau)
        tail = F(sum(math.comb(c, j) * math.comb(n - c, k - j) for j in range(m, k + 1)), math.comb(n, k))
        hat = F(math.comb(c, k), math.comb(n, k))
        for got, want in ((gpass_at_k(grades, k, tau), tail), (pass_hat_at_k(grades, k), hat)):
            if want == 0:
                assert got == 0.0
            else:  # relative: pass^k reaches 1/C(256, 128) ~ 1e-76
                assert abs(got - float(want)) <= TOL * float(want), (c, k, tau, got, float(want))
    # the smallest non-zero pass^k there is, still to full relative precision
    tiny = pass_hat_at_k([1] * 128 + [0] * 128, 128)
    assert abs(tiny - 1 / math.comb(256, 128)) <= TOL / math.comb(256, 128)


# ---------------------------------------------------------------------------------------------
# curves


def test_curves_match_per_problem_and_give_nan_below_k() -> None:
    rng = random.Random(3)
    problems = [random_grades(rng, n_max=30) for _ in range(25)]
    ks = [1, 2, 3, 5, 8, 13, 21, 30, 2]  # unsorted, repeated, some above every n
    hat, gp, mg = pass_hat_curve(problems, ks), gpass_curve(problems, ks, 0.7), mgpass_curve(problems, ks)
    for p, grades in enumerate(problems):
        for j, k in enumerate(ks):
            if k > len(grades):
                assert np.isnan(hat[p, j]) and np.isnan(gp[p, j]) and np.isnan(mg[p, j])
                continue
            assert abs(hat[p, j] - pass_hat_at_k(grades, k)) <= TOL
            assert abs(gp[p, j] - gpass_at_k(grades, k, 0.7)) <= TOL
            assert abs(mg[p, j] - mgpass_at_k(grades, k)) <= TOL


def test_curves_on_a_matrix_equal_the_ragged_path() -> None:
    rng = np.random.default_rng(0)
    mat = (rng.random((40, 16)) < rng.random((40, 1))).astype(np.float64)
    ks = list(range(1, 17))
    rows = [list(r) for r in mat]
    for fn in (pass_hat_curve, mgpass_curve, lambda c, k: gpass_curve(c, k, 0.5)):
        a, b = fn(mat, ks), fn(rows + [[1.0]], ks)[:40]  # the extra short row makes the input ragged
        assert np.array_equal(a, b)
        assert not np.isnan(a).any()


# ---------------------------------------------------------------------------------------------
# bad input


def test_bad_input_raises() -> None:
    with pytest.raises(ValueError, match=r"pass\^k needs 0/1 grades"):
        pass_hat_at_k([1, 0.5, 0], 2)
    with pytest.raises(ValueError, match="gpass@k needs 0/1 grades"):
        gpass_curve([[1, 0], [0.2, 1]], [1], 0.5)
    with pytest.raises(ValueError, match="mgpass@k needs 0/1 grades"):
        mgpass_at_k([2, 0], 1)
    for tau in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match=r"tau in \[0, 1\]"):
            gpass_at_k([1, 0], 1, tau)
        with pytest.raises(ValueError, match=r"tau in \[0, 1\]"):
            gpass_curve([[1, 0]], [1], tau)
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_hat_at_k([1, 0], 3)
    with pytest.raises(ValueError, match="1 <= k <= n"):
        mgpass_at_k([1, 0], 0)
    with pytest.raises(ValueError, match="finite"):
        pass_hat_at_k([1, float("nan")], 1)
