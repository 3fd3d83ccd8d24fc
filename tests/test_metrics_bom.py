"""bom@k (Best-of-Majority) against explicit enumeration of every k-subset in exact rationals (score
ties, abstentions, all-equal scores, shares whose float products are off an integer, n = k, k = 1),
share = 0 against bon@k at n = 64, the curve against the per-problem function, and bad input."""

from __future__ import annotations

import random
from collections import Counter
from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest

from bonbench.metrics.bom import bom_at_k, bom_curve
from bonbench.metrics.pass_bon import bon_at_k

F = Fraction
TOL = 1e-12
SHARES = (F(0), F(1, 4), F(1, 3), F(1, 2), F(3, 5), F(2, 3), F(1))


def brute_bom(answers: list, correct: list[float], scores: list[float], k: int, share: Fraction) -> Fraction:
    """The definition over every k-subset: classes with at least share * V of the V votes are
    eligible; the best-scored eligible sample is chosen (ties uniform); its own correct is the value."""
    total = F(0)
    subsets = list(combinations(range(len(answers)), k))
    for s in subsets:
        voters = [i for i in s if answers[i] is not None]
        votes = Counter(answers[i] for i in voters)
        eligible = [i for i in voters if votes[answers[i]] >= share * len(voters)]
        if not eligible:
            continue
        top = max(scores[i] for i in eligible)
        chosen = [i for i in eligible if scores[i] == top]
        total += sum((F(correct[i]) for i in chosen), F(0)) / len(chosen)
    return total / len(subsets)


def random_problem(rng: random.Random, n: int, style: str) -> tuple[list, list[float], list[float]]:
    labels = [None, "a", "b", "c", "d"][: rng.randint(2, 5)]
    answers = [rng.choice(labels) for _ in range(n)]
    correct = [rng.choice([0.0, 1.0, 1.0, 0.5]) for _ in range(n)]  # partial credit too: the chosen sample's own value
    if style == "ties":
        scores = [rng.choice([-1.0, 0.0, 0.5, 2.0]) for _ in range(n)]
    elif style == "equal":
        scores = [0.3] * n
    else:
        scores = [rng.gauss(0.0, 1.0) for _ in range(n)]  # any finite reals: only the order matters
    return answers, correct, scores


@pytest.mark.parametrize("seed", range(60))
def test_bom_at_k_matches_enumeration(seed: int) -> None:
    rng = random.Random(seed)
    answers, correct, scores = random_problem(rng, rng.randint(1, 8), ("ties", "plain", "equal")[seed % 3])
    share = SHARES[seed % len(SHARES)]
    for k in range(1, len(answers) + 1):
        want = brute_bom(answers, correct, scores, k, share)
        assert bom_at_k(answers, correct, scores, k, float(share)) == pytest.approx(float(want), abs=TOL), (
            answers, correct, scores, k, share)


def test_bom_larger_tie_blocks_match_enumeration() -> None:
    rng = random.Random(99)
    for share in (F(0), F(1, 3), F(1, 2), F(1)):
        answers = [rng.choice([None, "a", "a", "b", "c"]) for _ in range(12)]
        correct = [float(rng.random() < 0.5) for _ in range(12)]
        scores = [rng.choice([0.0, 1.0]) for _ in range(12)]  # two tie blocks of about six
        for k in (1, 4, 6, 11, 12):
            want = brute_bom(answers, correct, scores, k, share)
            assert bom_at_k(answers, correct, scores, k, float(share)) == pytest.approx(float(want), abs=TOL)


def test_special_cases() -> None:
    # a class below the share cannot supply the chosen sample, however well it scores
    assert bom_at_k(["a", "a", "b"], [0, 0, 1], [0.1, 0.2, 0.9], 3, 0.5) == 0.0
    assert bom_at_k(["a", "a", "b"], [0, 0, 1], [0.1, 0.2, 0.9], 3, 0.0) == 1.0
    # share 1: only unanimous subsets count
    assert bom_at_k(["a", "b"], [1, 1], [1.0, 2.0], 2, 1.0) == 0.0
    # abstainers take a slot, do not vote, are never chosen; all abstaining scores 0
    assert bom_at_k([None, "a"], [1, 1], [9.0, 0.0], 1, 0.5) == pytest.approx(0.5)
    assert bom_at_k([None, None], [1, 1], [1.0, 1.0], 2, 0.0) == 0.0
    # 1/3 * 3 is 1 within rounding: a class with one of three votes is eligible at share 1/3
    assert bom_at_k(["a", "b", "c"], [1, 0, 0], [3.0, 2.0, 1.0], 3, 1 / 3) == 1.0
    # 0.1 + 0.2 = 0.30000000000000004, times 10 votes is 3.0000000000000004: three votes still qualify
    answers = ["a"] * 3 + ["b"] * 4 + ["c"] * 3 + [None]
    correct, scores = [1.0] * 3 + [0.0] * 8, [5.0] * 3 + [1.0] * 8
    for k in (10, 11):
        want = brute_bom(answers, correct, scores, k, F(3, 10))
        assert bom_at_k(answers, correct, scores, k, 0.1 + 0.2) == pytest.approx(float(want), abs=TOL)
    assert bom_at_k(answers, correct, scores, 10, 0.1 + 0.2) > 0.0


@pytest.mark.parametrize("seed", range(4))
def test_share_zero_is_bon_among_voters_at_n_64(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 64
    answers = [None if u < 0.15 else f"a{int(u * 6)}" for u in rng.random(n)]
    correct = [float(a is not None and v < 0.5) for a, v in zip(answers, rng.random(n), strict=True)]
    scores = np.round(rng.normal(size=n), 1 if seed % 2 else 6).tolist()  # odd seeds: heavy ties
    # bon@k with the abstainers scored below every voter (and worth 0) picks the best voter when there is one
    floor = [s if a is not None else min(scores) - 1.0 for a, s in zip(answers, scores, strict=True)]
    no_abstain = ["x" if a is None else a for a in answers]
    for k in (1, 2, 7, 31, 63, 64):
        assert bom_at_k(answers, correct, scores, k, 0.0) == pytest.approx(bon_at_k(floor, correct, k), abs=TOL)
        assert bom_at_k(no_abstain, correct, scores, k, 0.0) == pytest.approx(bon_at_k(scores, correct, k), abs=TOL)


def test_curve_matches_per_problem_and_gives_nan_below_k() -> None:
    rng = random.Random(5)
    rows = [random_problem(rng, rng.randint(1, 10), ("ties", "plain", "equal")[i % 3]) for i in range(24)]
    answers, correct, scores = (list(x) for x in zip(*rows, strict=True))
    ks = [1, 3, 2, 10, 6]
    for share in (0.0, 0.5, 1.0):
        curve = bom_curve(answers, correct, scores, ks, share)
        for p in range(len(rows)):
            for j, k in enumerate(ks):
                if k > len(correct[p]):
                    assert np.isnan(curve[p, j])
                else:
                    assert abs(curve[p, j] - bom_at_k(answers[p], correct[p], scores[p], k, share)) <= TOL


def test_bad_input_raises() -> None:
    for share in (-0.1, 1.01, float("nan")):
        with pytest.raises(ValueError, match=r"share in \[0, 1\]"):
            bom_at_k(["a"], [1], [1.0], 1, share)
        with pytest.raises(ValueError, match=r"share in \[0, 1\]"):
            bom_curve([["a"]], [[1]], [[1.0]], [1], share)
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="finite verifier scores"):
            bom_at_k(["a", "b"], [1, 0], [1.0, bad], 1, 0.5)
    with pytest.raises(ValueError, match="differ in length"):
        bom_at_k(["a", "b"], [1, 0], [1.0], 1, 0.5)
    with pytest.raises(ValueError, match="1 <= k <= n"):
        bom_at_k(["a"], [1], [1.0], 2, 0.5)
    with pytest.raises(ValueError, match="n <= 1024"):
        bom_at_k(["a"] * 1025, [1] * 1025, [0.0] * 1025, 1, 0.5)
    with pytest.raises(ValueError, match="number of problems"):
        bom_curve([["a"]], [[1], [1]], [[1.0]], [1], 0.5)
