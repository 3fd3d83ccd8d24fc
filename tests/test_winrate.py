"""Win rates: exactness against brute force over all k-subsets (with ties), and the analytic
best-of-N references against the math reference's worked examples."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import numpy as np
import pytest

from bonbench.metrics.estimators import bon_at_k
from bonbench.metrics.winrate import bon_kl, bon_kl_bound, bon_winrate_reference, win_values, winrate_curve


def _win(r: Fraction, q: list[Fraction]) -> Fraction:
    return sum((Fraction(1) if r > x else Fraction(1, 2) if r == x else Fraction(0)) for x in q) / len(q)


def _brute_winrate_at_k(rewards: list[Fraction], comparison: list[Fraction], k: int) -> Fraction:
    subsets = list(itertools.combinations(rewards, k))
    return sum(_win(max(s), comparison) for s in subsets) / len(subsets)


def test_winrate_at_k_equals_brute_force_with_ties() -> None:
    rng = random.Random(7)
    for _ in range(300):
        n = rng.randint(1, 8)
        m = rng.randint(1, 5)
        # few distinct values so that ties within samples and against the comparison are common
        rewards = [Fraction(rng.randint(0, 4), 4) for _ in range(n)]
        comparison = [Fraction(rng.randint(0, 4), 4) for _ in range(m)]
        curve = winrate_curve([[float(x) for x in rewards]], [[float(x) for x in comparison]])
        for k in range(1, n + 1):
            assert curve[0, k - 1] == pytest.approx(float(_brute_winrate_at_k(rewards, comparison, k)), abs=1e-12)


def test_winrate_at_1_is_the_plain_win_rate_and_uneven_n_gives_nan() -> None:
    curve = winrate_curve([[0.1, 0.5, 0.9], [0.5]], [[0.5], [0.2, 0.5, 0.8]], ks=[1, 2, 3])
    assert curve[0, 0] == pytest.approx((0 + 0.5 + 1) / 3)
    assert curve[1, 0] == pytest.approx((1 + 0.5 + 0) / 3)
    assert math.isnan(curve[1, 1]) and math.isnan(curve[1, 2])
    assert curve[0, 2] == pytest.approx(1.0)


def test_bon_pick_win_rate_brute_force() -> None:
    """bon@k on win values = win rate of the verifier's pick, ties in the verifier split evenly."""
    rng = random.Random(3)
    for _ in range(200):
        n = rng.randint(1, 7)
        rewards = [rng.randint(0, 3) for _ in range(n)]
        scores = [rng.randint(0, 2) for _ in range(n)]
        comparison = [rng.randint(0, 3) for _ in range(rng.randint(1, 4))]
        w = win_values(rewards, comparison)
        for k in range(1, n + 1):
            total = Fraction(0)
            subsets = list(itertools.combinations(range(n), k))
            for sub in subsets:
                best = max(scores[i] for i in sub)
                tied = [i for i in sub if scores[i] == best]
                total += sum(_win(Fraction(rewards[i]), [Fraction(x) for x in comparison]) for i in tied) / len(tied)
            assert bon_at_k(scores, w, k) == pytest.approx(float(total / len(subsets)), abs=1e-12)


def test_bon_references_match_the_math_reference() -> None:
    assert bon_winrate_reference(4) == 0.8
    assert bon_kl_bound(4) == pytest.approx(0.636294361, abs=1e-9)  # math-reference §3.5
    assert bon_kl_bound(1) == 0.0
    # near-continuous check (4,000 equal atoms): best of N=4 against a fresh sample
    atoms = np.arange(4000, dtype=float)
    w = win_values(atoms, atoms)
    # P(best of 4 iid draws has win value...) = E[W(max)] under iid draws = sum over atoms of P(max = a) W(a)
    cdf = (np.arange(1, 4001) / 4000.0)
    p_max = cdf ** 4 - np.concatenate([[0.0], cdf[:-1]]) ** 4
    assert float(p_max @ w) == pytest.approx(0.79999998, abs=1e-7)


def _brute_bon_kl(rewards: list[int], k: int, ratios: list[Fraction] | None) -> float:
    """Enumerate all n^k ordered draws (with replacement), credit the reward-best (ties: each tied
    draw equally) to its sample, and compute KL(pick distribution || uniform over the n samples)."""
    n = len(rewards)
    pick = [Fraction(0)] * n
    for draw in itertools.product(range(n), repeat=k):
        best = max(rewards[i] for i in draw)
        tied = [i for i in draw if rewards[i] == best]
        for i in tied:
            pick[i] += Fraction(1, len(tied) * n ** k)
    kl = sum(float(q) * math.log(float(q) * n) for q in pick if q > 0)
    if ratios is not None:
        kl += float(sum(q * lr for q, lr in zip(pick, ratios, strict=True)))
    return kl


def test_bon_kl_equals_brute_force_over_all_draws_with_ties() -> None:
    rng = random.Random(11)
    for _ in range(120):
        n, k = rng.randint(1, 6), rng.randint(1, 4)
        rewards = [rng.randint(0, 3) for _ in range(n)]  # few levels: many ties
        ratios = [Fraction(rng.randint(-20, 20), 10) for _ in range(n)]
        assert bon_kl(rewards, k) == pytest.approx(_brute_bon_kl(rewards, k, None), abs=1e-12)
        assert bon_kl(rewards, k, [float(x) for x in ratios]) == pytest.approx(_brute_bon_kl(rewards, k, ratios), abs=1e-12)


def test_bon_kl_approaches_the_analytic_value_and_ties_lower_it() -> None:
    assert bon_kl(list(range(20000)), 4) == pytest.approx(bon_kl_bound(4), abs=1e-3)
    assert bon_kl(list(range(50)), 4) < bon_kl_bound(4)
    assert bon_kl([0.3] * 16, 8) == 0.0  # all tied: the pick is the reference distribution
    assert bon_kl([0.1, 0.9], 1) == 0.0
    assert bon_kl([0.0] * 8 + [1.0] * 8, 2) == pytest.approx(0.75 * math.log(1.5) + 0.25 * math.log(0.5))
    with pytest.raises(ValueError):
        bon_kl([0.1, 0.2], 2, [0.0])


@pytest.mark.parametrize("bad", [([], [0.5]), ([0.5], []), ([float("nan")], [0.1])])
def test_bad_inputs(bad: tuple[list[float], list[float]]) -> None:
    rewards, comparison = bad
    if not rewards:
        assert win_values(rewards, comparison).size == 0
        return
    with pytest.raises(ValueError):
        win_values(rewards, comparison)
