"""wmaj@k against explicit enumeration of every k-subset (exact rationals: ties are exact), its
special cases (ties at weight 0, float-order ties, abstentions, one class, equal scores = maj@k), the
curve's exact paths against the per-problem function, and its Monte Carlo: within 4 standard errors
of the exact value over many seeds, unbiased on average, reproducible, a problem's value independent
of the others, the adaptive M meeting its target, and bad input."""

from __future__ import annotations

import random
from collections import defaultdict
from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest

from bonbench.metrics.bootstrap import Z95
from bonbench.metrics.maj import maj_at_k, maj_curve
from bonbench.metrics.weighted import wmaj_at_k, wmaj_curve

F = Fraction
TOL = 1e-12


def brute_wmaj(answers: list, correct: list[float], scores: list[float], k: int) -> Fraction:
    """The definition over every k-subset: the class with the largest sum of scores in the subset
    wins (exact sums, ties uniform, classes present with weight 0 included); its value is the mean
    correct of all its members; no votes scores 0."""
    members: dict = defaultdict(list)
    for a, c in zip(answers, correct, strict=True):
        if a is not None:
            members[a].append(F(c))
    value = {a: sum(v, F(0)) / len(v) for a, v in members.items()}
    total = F(0)
    subsets = list(combinations(range(len(answers)), k))
    for s in subsets:
        weight: dict = defaultdict(F)
        for i in s:
            if answers[i] is not None:
                weight[answers[i]] += F(scores[i])
        if not weight:
            continue
        top = max(weight.values())
        winners = [a for a, w in weight.items() if w == top]
        total += sum((value[a] for a in winners), F(0)) / len(winners)
    return total / len(subsets)


def random_problem(rng: random.Random, n: int, style: str) -> tuple[list, list[float], list[float]]:
    labels = [None, "a", "b", "c", "d"][: rng.randint(2, 5)]
    answers = [rng.choice(labels) for _ in range(n)]
    correct = [float(rng.random() < 0.5) for _ in range(n)]
    if style == "ties":  # few levels: ties between classes and within them
        scores = [rng.choice([0.0, 0.5, 1.0, 1.5]) for _ in range(n)]
    elif style == "zeros":
        scores = [rng.choice([0.0, 0.0, rng.random()]) for _ in range(n)]
    else:
        scores = [rng.random() for _ in range(n)]
    return answers, correct, scores


# ---------------------------------------------------------------------------------------------
# the definition against enumeration


@pytest.mark.parametrize("seed", range(60))
def test_wmaj_at_k_matches_enumeration(seed: int) -> None:
    rng = random.Random(seed)
    answers, correct, scores = random_problem(rng, rng.randint(1, 8), ("ties", "zeros", "plain")[seed % 3])
    for k in range(1, len(answers) + 1):
        assert wmaj_at_k(answers, correct, scores, k) == pytest.approx(
            float(brute_wmaj(answers, correct, scores, k)), abs=TOL), (answers, correct, scores, k)


def test_special_cases() -> None:
    # weight-0 classes are present and tie at 0; an absent class never wins
    assert wmaj_at_k(["a", "b"], [1, 0], [0.0, 0.0], 2) == pytest.approx(0.5)
    assert wmaj_at_k(["a", "b"], [1, 0], [0.0, 0.5], 2) == 0.0
    assert wmaj_at_k(["a", "b", None], [1, 0, 0], [0.0, 0.5, 9.0], 1) == pytest.approx(1 / 3)
    # one heavy voter beats two light ones
    assert wmaj_at_k(["a", "b", "b"], [1, 0, 0], [0.9, 0.4, 0.4], 3) == 1.0
    # float sums in another order still tie: 0.1 + 0.2 + 0.3 = 0.6000000000000001
    assert 0.1 + 0.2 + 0.3 != 0.6
    assert wmaj_at_k(["a", "a", "a", "b"], [1, 1, 1, 0], [0.1, 0.2, 0.3, 0.6], 4) == pytest.approx(0.5)
    # all abstain, n = k, k = 1, partial credit as the class value
    assert wmaj_at_k([None, None], [1, 1], [1.0, 1.0], 1) == 0.0
    assert wmaj_at_k(["x", "y", "x"], [0.5, 1, 0.0], [0.2, 0.3, 0.2], 3) == pytest.approx(0.25)
    assert wmaj_at_k(["x", None, "y"], [1, 0, 0], [5.0, 1.0, 0.0], 1) == pytest.approx(1 / 3)


@pytest.mark.parametrize("seed", range(10))
def test_equal_positive_scores_and_one_class_are_maj(seed: int) -> None:
    rng = random.Random(300 + seed)
    answers, correct, _ = random_problem(rng, rng.randint(1, 9), "plain")
    level = rng.choice([0.25, 1.0, 7.0])
    scores = [level if a is not None else rng.random() for a in answers]  # abstainers' scores do not count
    one = [None if a is None else "only" for a in answers]
    for k in range(1, len(answers) + 1):
        assert wmaj_at_k(answers, correct, scores, k) == pytest.approx(maj_at_k(answers, correct, k), abs=TOL)
        assert wmaj_at_k(one, correct, scores, k) == pytest.approx(maj_at_k(one, correct, k), abs=TOL)


# ---------------------------------------------------------------------------------------------
# the curve's exact paths


def test_curve_is_exact_where_it_can_be() -> None:
    rng = random.Random(11)
    problems = [random_problem(rng, rng.randint(1, 9), ("ties", "zeros", "plain")[i % 3]) for i in range(30)]
    problems.append(([None] * 4, [1.0] * 4, [1.0] * 4))
    answers, correct, scores = (list(x) for x in zip(*problems, strict=True))
    ks = [1, 2, 3, 5, 9, 4]
    curve = wmaj_curve(answers, correct, scores, ks, keys=[f"p{i}" for i in range(len(problems))])
    assert curve.exact and curve.draws == 0 and not curve.mc_var.any()
    for p in range(len(problems)):
        for j, k in enumerate(ks):
            if k > len(correct[p]):
                assert np.isnan(curve.values[p, j])
            else:
                assert abs(curve.values[p, j] - wmaj_at_k(answers[p], correct[p], scores[p], k)) <= TOL


def test_curve_shortcuts_at_n_64_equal_maj() -> None:
    rng = np.random.default_rng(5)
    n, ks = 64, list(range(1, 65))
    answers = [[None if u < 0.1 else f"a{int(u * 5)}" for u in rng.random(n)] for _ in range(3)]
    answers.append([None if u < 0.1 else "one" for u in rng.random(n)])
    correct = [[float(a == "a2" or a == "one") for a in row] for row in answers]
    scores = [[0.7] * n, [2.0] * n, [0.1] * n, rng.random(n).tolist()]  # the last: one class, any scores
    curve = wmaj_curve(answers, correct, scores, ks, keys=list("abcd"), max_exact_subsets=0)
    assert curve.exact and curve.draws == 0
    assert np.max(np.abs(curve.values - maj_curve(answers, correct, ks))) <= TOL


# ---------------------------------------------------------------------------------------------
# Monte Carlo


def sampled_dataset(seed: int, problems: int = 8) -> tuple[list, list, list, list[str]]:
    rng = random.Random(seed)
    rows = [random_problem(rng, rng.randint(6, 9), ("ties", "plain")[i % 2]) for i in range(problems)]
    answers, correct, scores = (list(x) for x in zip(*rows, strict=True))
    return answers, correct, scores, [f"q{i}" for i in range(problems)]


def test_monte_carlo_within_four_standard_errors_and_unbiased() -> None:
    answers, correct, scores, keys = sampled_dataset(1)
    ks = list(range(1, 10))
    exact = wmaj_curve(answers, correct, scores, ks, keys=keys)
    assert exact.exact
    truth = np.nanmean(exact.values, axis=0)
    estimates, variances = [], []
    for seed in range(60):
        est = wmaj_curve(answers, correct, scores, ks, keys=keys, seed=seed, max_exact_subsets=0, draws=64)
        assert not est.exact and est.draws == 64
        se = est.dataset_mc_se()
        sampled = se > 0
        assert sampled[2:6].all()  # k = 3..6 are sampled for every problem (C(n, k) > n)
        mean = np.nanmean(est.values, axis=0)
        assert np.all(np.abs(mean - truth)[sampled] <= 4 * se[sampled]), (seed, mean - truth, se)
        assert np.all(np.abs(mean - truth)[~sampled] <= TOL)  # the exact columns (k = 1, n-1, n where n = 9)
        estimates.append(mean)
        variances.append(se**2)
    avg_se = np.sqrt(np.sum(variances, axis=0)) / len(estimates)
    bias = np.mean(estimates, axis=0) - truth
    assert np.all(np.abs(bias) <= 4 * avg_se + TOL), (bias, avg_se)


def test_adaptive_monte_carlo_is_unbiased_and_meets_its_target() -> None:
    answers, correct, scores, keys = sampled_dataset(2, problems=40)
    ks = list(range(1, 10))
    truth = np.nanmean(wmaj_curve(answers, correct, scores, ks, keys=keys).values, axis=0)
    estimates, variances = [], []
    for seed in range(15):
        est = wmaj_curve(answers, correct, scores, ks, keys=keys, seed=seed, max_exact_subsets=0, rel_mc=0.2)
        se = est.dataset_mc_se()
        sd = np.nanstd(est.values, axis=0, ddof=1)
        count = (~np.isnan(est.values)).sum(axis=0)
        assert est.draws < 1024  # not capped, so the target must hold
        assert np.all(se <= 0.2 * Z95 * sd / np.sqrt(count)), (seed, est.draws)
        estimates.append(np.nanmean(est.values, axis=0))
        variances.append(se**2)
    avg_se = np.sqrt(np.sum(variances, axis=0)) / len(estimates)
    assert np.all(np.abs(np.mean(estimates, axis=0) - truth) <= 4 * avg_se + TOL)


def test_monte_carlo_reproducible_and_independent_of_other_problems() -> None:
    answers, correct, scores, keys = sampled_dataset(3)
    ks = [2, 3, 4, 5]
    args = dict(keys=keys, max_exact_subsets=0)
    first = wmaj_curve(answers, correct, scores, ks, seed=7, **args)
    again = wmaj_curve(answers, correct, scores, ks, seed=7, **args)
    other = wmaj_curve(answers, correct, scores, ks, seed=8, **args)
    assert np.array_equal(first.values, again.values) and np.array_equal(first.mc_var, again.mc_var)
    assert not np.array_equal(first.values, other.values)
    # the adaptive M, fixed, draws the same permutations
    fixed = wmaj_curve(answers, correct, scores, ks, seed=7, draws=first.draws, **args)
    assert np.array_equal(first.values, fixed.values)
    # a subset of the problems, in another order, with the same M: the same per-problem values
    pick = [5, 0, 3]
    alone = wmaj_curve([answers[p] for p in pick], [correct[p] for p in pick], [scores[p] for p in pick], ks,
                       keys=[keys[p] for p in pick], seed=7, max_exact_subsets=0, draws=first.draws)
    assert np.array_equal(alone.values, first.values[pick])
    # the key, not the position, seeds a problem
    renamed = wmaj_curve(answers, correct, scores, ks, keys=[k + "x" for k in keys], seed=7, max_exact_subsets=0,
                         draws=first.draws)
    assert not np.array_equal(renamed.values, first.values)


# ---------------------------------------------------------------------------------------------
# bad input


def test_bad_input_raises() -> None:
    for bad in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="wmaj@k needs non-negative verifier scores"):
            wmaj_at_k(["a", "b"], [1, 0], [0.5, bad], 1)
        with pytest.raises(ValueError, match="wmaj@k needs non-negative verifier scores"):
            wmaj_curve([["a", "b"]], [[1, 0]], [[bad, 0.5]], [1], keys=["p"])
    with pytest.raises(ValueError, match="1 <= k <= n"):
        wmaj_at_k(["a"], [1], [1.0], 2)
    with pytest.raises(ValueError, match="differ in length"):
        wmaj_at_k(["a", "b"], [1], [1.0, 1.0], 1)
    with pytest.raises(ValueError, match="distinct key"):
        wmaj_curve([["a"], ["b"]], [[1], [0]], [[1.0], [1.0]], [1], keys=["p", "p"])
    with pytest.raises(ValueError, match="number of problems"):
        wmaj_curve([["a"]], [[1], [0]], [[1.0], [1.0]], [1], keys=["p", "q"])
    with pytest.raises(ValueError, match="rel_mc > 0"):
        wmaj_curve([["a"]], [[1]], [[1.0]], [1], keys=["p"], rel_mc=0.0)


def test_sampled_cells_are_marked_even_when_their_draws_agree() -> None:
    # two classes, the right one far heavier: every permutation's k-prefix picks the same winner once
    # k is large, so the sampled variance is 0 there; the cell is still a Monte Carlo estimate
    answers = [["a"] * 6 + ["b"] * 2]
    correct = [[1.0] * 6 + [0.0] * 2]
    scores = [[0.9] * 6 + [0.1] * 2]
    curve = wmaj_curve(answers, correct, scores, [1, 4, 7, 8], keys=["p"], max_exact_subsets=0, draws=8)
    assert curve.sampled is not None
    assert curve.sampled[0].tolist() == [False, True, False, False]  # k = 1, n - 1, n are enumerated
    assert curve.sampled_at().tolist() == [False, True, False, False] and not curve.exact
