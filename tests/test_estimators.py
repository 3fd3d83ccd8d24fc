"""Estimators against exact rationals: math-reference §5 vectors, brute force over every k-subset
(fractions.Fraction) for per-problem and curve functions, large-n maj@k against exact integer
formulas, bootstrap behaviour, per-group metric names, and the module layout (estimators re-exports
pass_bon, maj, bootstrap and names; no import cycle). Metric names, the registry and the dataset
entry points (compute_metrics, compute_curves): tests/test_metric_registry.py."""

from __future__ import annotations

import math
import random
from collections import Counter
from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest

from bonbench.metrics import checks as estimators_checks
from bonbench.metrics import estimators
from bonbench.metrics import maj as estimators_maj
from bonbench.metrics.estimators import (
    bon_at_k,
    bon_curve,
    bon_weights,
    bootstrap_ci,
    maj_at_k,
    maj_curve,
    mean_correct,
    paired_bootstrap_diff,
    pass_at_k,
    pass_curve,
)

F = Fraction
TOL = 1e-12


# ---------------------------------------------------------------------------------------------
# brute force: average the procedure over every k-subset, in exact rationals


def brute_pass(correct: list[Fraction], k: int) -> Fraction:
    """Expected max of `correct` over k-subsets (pass@k for 0/1)."""
    subsets = list(combinations(range(len(correct)), k))
    return sum((max(correct[i] for i in s) for s in subsets), F(0)) / len(subsets)


def brute_bon(scores: list[float], correct: list[Fraction], k: int) -> Fraction:
    total = F(0)
    subsets = list(combinations(range(len(scores)), k))
    for s in subsets:
        top = max(scores[i] for i in s)
        tied = [correct[i] for i in s if scores[i] == top]
        total += sum(tied, F(0)) / len(tied)  # uniform pick among the tied samples present
    return total / len(subsets)


def brute_maj(answers: list, correct: list[Fraction], k: int) -> Fraction:
    members: dict = {}
    for a, c in zip(answers, correct, strict=True):
        if a is not None:
            members.setdefault(a, []).append(c)
    value = {a: sum(v, F(0)) / len(v) for a, v in members.items()}
    total = F(0)
    subsets = list(combinations(range(len(answers)), k))
    for s in subsets:
        votes = Counter(answers[i] for i in s if answers[i] is not None)
        if not votes:
            continue
        top = max(votes.values())
        winners = [a for a, c in votes.items() if c == top]
        total += sum((value[a] for a in winners), F(0)) / len(winners)
    return total / len(subsets)


def random_case(rng: random.Random) -> tuple[list, list[Fraction], list[float]]:
    n = rng.randint(1, 8)
    style = rng.random()
    if style < 0.5:
        correct = [F(rng.random() < 0.5) for _ in range(n)]
    else:  # partial credit / real rewards, with repeats so clusters mix values
        correct = [rng.choice([F(0), F(1), F(1, 2), F(1, 4)]) for _ in range(n)]
    pool = ["A", "B", "C", "D"][: rng.randint(1, 4)]
    answers = [None if rng.random() < 0.2 else rng.choice(pool) for _ in range(n)]
    levels = rng.choice([2, 3, 50])  # 2-3 levels: heavy ties; 50: mostly distinct
    scores = [float(rng.randrange(levels)) / 7 for _ in range(n)]
    return answers, correct, scores


CASES = [random_case(random.Random(seed)) for seed in range(2000)]


@pytest.fixture(scope="module")
def brute() -> list[dict[str, list[Fraction]]]:
    """Brute-force pass/bon/maj for k = 1..n of every case, computed once for both tests below."""
    return [{"pass": [brute_pass(cor, k) for k in range(1, len(cor) + 1)],
             "bon": [brute_bon(sc, cor, k) for k in range(1, len(cor) + 1)],
             "maj": [brute_maj(ans, cor, k) for k in range(1, len(cor) + 1)]} for ans, cor, sc in CASES]


# ---------------------------------------------------------------------------------------------
# math-reference §5 vectors


@pytest.mark.parametrize("n,c,k,expected", [(10, 3, 2, F(8, 15)), (5, 2, 3, F(9, 10)), (20, 5, 4, F(232, 323)),
                                            (4, 1, 4, F(1)), (100, 0, 10, F(0))])
def test_pass_vectors(n: int, c: int, k: int, expected: Fraction) -> None:
    correct = [True] * c + [False] * (n - c)
    assert pass_at_k(correct, k) == pytest.approx(float(expected), abs=1e-15)
    assert pass_curve([correct], [k])[0, 0] == pytest.approx(float(expected), abs=1e-15)


def test_pass_float_vector() -> None:
    correct = [1] * 17 + [0] * 183
    assert abs(pass_at_k(correct, 10) - 0.5974489015799118) <= 1e-15
    assert abs(pass_curve([correct])[0, 9] - 0.5974489015799118) <= 1e-15


def test_bon_vectors() -> None:
    scores, correct = [0.9, 0.8, 0.8, 0.3, 0.1], [0, 1, 0, 1, 1]
    for k, expected in [(1, F(3, 5)), (2, F(7, 20)), (3, F(1, 5)), (5, F(0))]:
        assert bon_at_k(scores, correct, k) == pytest.approx(float(expected), abs=1e-15)
        assert bon_curve([scores], [correct])[0, k - 1] == pytest.approx(float(expected), abs=1e-15)
    np.testing.assert_allclose(bon_weights(scores, 2), [0.4, 0.25, 0.25, 0.1, 0.0], atol=1e-15)


@pytest.mark.parametrize("answers,correct,expected", [
    (list("AAABBC"), [1, 1, 1, 0, 0, 0], [F(1, 2), F(1, 2), F(3, 5), F(7, 10), F(3, 4), F(1)]),
    (["A", "B", "B", None, "A", "C"], [1, 0, 0, 0, 1, 0], [F(1, 3), F(2, 5), F(5, 12), F(41, 90), F(1, 2), F(1, 2)]),
])
def test_maj_vectors(answers: list, correct: list[int], expected: list[Fraction]) -> None:
    curve = maj_curve([answers], [correct])[0]
    np.testing.assert_allclose(curve, [float(e) for e in expected], rtol=0, atol=1e-15)
    for k, e in enumerate(expected, start=1):
        assert maj_at_k(answers, [bool(c) for c in correct], k) == pytest.approx(float(e), abs=1e-15)


# ---------------------------------------------------------------------------------------------
# brute force on thousands of random small cases


def test_per_problem_functions_match_brute_force(brute: list[dict[str, list[Fraction]]]) -> None:
    for (answers, correct, scores), want in zip(CASES, brute, strict=True):
        cf = [float(c) for c in correct]
        for k in range(1, len(correct) + 1):
            assert pass_at_k(cf, k) == pytest.approx(float(want["pass"][k - 1]), abs=TOL)
            assert bon_at_k(scores, cf, k) == pytest.approx(float(want["bon"][k - 1]), abs=TOL)
            assert maj_at_k(answers, cf, k) == pytest.approx(float(want["maj"][k - 1]), abs=TOL)


def test_curve_functions_match_brute_force(brute: list[dict[str, list[Fraction]]]) -> None:
    answers = [a for a, _, _ in CASES]
    correct = [[float(c) for c in cor] for _, cor, _ in CASES]
    scores = [s for _, _, s in CASES]
    ks = list(range(1, 10))  # one past the largest n: that column must be all NaN
    curves = {"pass": pass_curve(correct, ks), "bon": bon_curve(scores, correct, ks),
              "maj": maj_curve(answers, correct, ks)}
    for p, want in enumerate(brute):
        n = len(CASES[p][1])
        for kind, row in curves.items():
            np.testing.assert_allclose(row[p, :n], [float(w) for w in want[kind]], rtol=0, atol=TOL,
                                       err_msg=f"{kind} case {p}")
            assert np.isnan(row[p, n:]).all(), f"{kind} case {p}: k > n must be NaN"


@pytest.mark.parametrize("band_terms", [0, 10**9])
def test_maj_both_level_strategies_match_brute_force(band_terms: int, brute: list[dict[str, list[Fraction]]],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """maj@k sums a band of levels either as one tensor or level by level (polynomial products);
    force each strategy everywhere, on the small cases and on larger ones with several bands."""
    # patched where the machinery reads it (bonbench.metrics.estimators only re-exports maj@k)
    monkeypatch.setattr(estimators_maj, "_BAND_TERMS_PER_LEVEL", band_terms)
    estimators_maj.WINS_CACHE.clear()
    try:
        curves = maj_curve([a for a, _, _ in CASES], [[float(c) for c in cor] for _, cor, _ in CASES])
        for p, want in enumerate(brute):
            n = len(CASES[p][1])
            np.testing.assert_allclose(curves[p, :n], [float(w) for w in want["maj"]], rtol=0, atol=TOL)
        rng = random.Random(band_terms)
        for _ in range(6):
            n = 13
            answers = [None if rng.random() < 0.1 else rng.choice("AAABBBCCDE") for _ in range(n)]
            correct = [F(1) if a == "A" else F(rng.random() < 0.2, 2) for a in answers]
            got = maj_curve([answers], [[float(c) for c in correct]])[0]
            want = [float(brute_maj(answers, correct, k)) for k in range(1, n + 1)]
            np.testing.assert_allclose(got, want, rtol=0, atol=TOL)
    finally:
        estimators_maj.WINS_CACHE.clear()  # entries computed under the forced strategy


def test_maj_curve_in_small_chunks_matches_brute_force(brute: list[dict[str, list[Fraction]]],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Signatures are solved in chunks (bounded memory); chunk edges must not change any value."""
    monkeypatch.setattr(estimators_maj, "_WINS_CHUNK_N", 20)
    estimators_maj.WINS_CACHE.clear()
    curves = maj_curve([a for a, _, _ in CASES[:400]], [[float(c) for c in cor] for _, cor, _ in CASES[:400]])
    for p, want in enumerate(brute[:400]):
        n = len(CASES[p][1])
        np.testing.assert_allclose(curves[p, :n], [float(w) for w in want["maj"]], rtol=0, atol=TOL)


def test_bon_weights_match_brute_force_pick_probabilities() -> None:
    for _, _, scores in CASES[:500]:
        n = len(scores)
        for k in range(1, n + 1):
            picks = [F(0)] * n
            subsets = list(combinations(range(n), k))
            for s in subsets:
                top = max(scores[i] for i in s)
                tied = [i for i in s if scores[i] == top]
                for i in tied:
                    picks[i] += F(1, len(tied))
            want = [float(p / len(subsets)) for p in picks]
            np.testing.assert_allclose(bon_weights(scores, k), want, rtol=0, atol=TOL)


def test_oracle_verifier_bon_equals_pass() -> None:
    rng = np.random.default_rng(1)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        correct = (rng.random(n) < rng.random()).astype(float)
        for k in range(1, n + 1):
            assert bon_at_k(correct, correct, k) == pytest.approx(pass_at_k(correct, k), abs=TOL)
    correct = [list((rng.random(30) < 0.3).astype(float)) for _ in range(20)]
    np.testing.assert_allclose(bon_curve(correct, correct), pass_curve(correct), rtol=0, atol=TOL)


# ---------------------------------------------------------------------------------------------
# maj@k at large n: exact integer formulas (float64 limit n = 1024, longdouble above)


def _two_cluster_exact(s1: int, s2: int, k: int) -> Fraction:
    """Hypergeometric tail: cluster 1 (correct) beats cluster 2, ties worth 1/2 (math-reference §1.3)."""
    wins = sum(math.comb(s1, a) * math.comb(s2, k - a) for a in range(k // 2 + 1, k + 1))
    if k % 2 == 0:
        wins_half = F(math.comb(s1, k // 2) * math.comb(s2, k // 2), 2)
        return (wins + wins_half) / math.comb(s1 + s2, k)
    return F(wins, math.comb(s1 + s2, k))


@pytest.mark.parametrize("s1,s2", [(400, 624), (560, 540), (600, 500)])  # the last needs longdouble
def test_maj_two_clusters_large_n(s1: int, s2: int) -> None:
    answers = ["A"] * s1 + ["B"] * s2
    correct = [1] * s1 + [0] * s2
    ks = [1, 2, 3, 10, 101, 256, 511, 512, 513, 800, 1023, s1 + s2 - 1, s1 + s2]
    curve = maj_curve([answers], [correct], ks)[0]
    want = [float(_two_cluster_exact(s1, s2, k)) for k in ks]
    np.testing.assert_allclose(curve, want, rtol=1e-12, atol=0)


def _reference_dp(sizes: list[int], s0: int, k: int) -> Fraction:
    """math-reference §1.3 reference DP: cluster 0 of `sizes` is the correct one."""
    n = sum(sizes) + s0
    s_t, others = sizes[0], sizes[1:]
    total = F(0)
    for a in range(1, min(s_t, k) + 1):
        dp = {(0, 0): 1}
        for s in others:
            nd: dict = {}
            for (u, t), ways in dp.items():
                for b in range(0, min(s, a, k - a - u) + 1):
                    key = (u + b, t + (b == a))
                    nd[key] = nd.get(key, 0) + ways * math.comb(s, b)
            dp = nd
        acc = sum((F(w * math.comb(s0, k - a - u), t + 1) for (u, t), w in dp.items() if 0 <= k - a - u <= s0), F(0))
        total += math.comb(s_t, a) * acc
    return total / math.comb(n, k)


@pytest.mark.parametrize("n", [1024, 1100])
def test_maj_many_clusters_large_n(n: int) -> None:
    sizes = [300, 300, 150, 100, 60, 40, 20, 10, 5, 3, 2, 1, 1, 1]
    s0 = n - sum(sizes)
    answers = [None] * s0 + [i for i, s in enumerate(sizes) for _ in range(s)]
    correct = [0] * s0 + [1] * sizes[0] + [0] * (n - s0 - sizes[0])
    ks = [1, 2, 3, 5, 8, n]
    curve = maj_curve([answers], [correct], ks)[0]
    assert np.isfinite(curve).all()
    want = [float(_reference_dp(sizes, s0, k)) for k in ks[:-1]] + [0.5]  # k = n: two-way tie at 300
    np.testing.assert_allclose(curve, want, rtol=1e-12, atol=0)


# ---------------------------------------------------------------------------------------------
# argument errors and NaN handling


@pytest.mark.parametrize("call", [
    lambda: pass_at_k([1, 0], 0),
    lambda: pass_at_k([1, 0], 3),
    lambda: pass_at_k([], 1),
    lambda: bon_at_k([0.1, 0.2], [1, 0], 3),
    lambda: bon_at_k([0.1, 0.2, 0.3], [1, 0], 1),
    lambda: bon_at_k([0.1, float("nan")], [1, 0], 1),
    lambda: bon_weights([0.1, 0.2], 0),
    lambda: maj_at_k(["A", "B"], [True, False], 0),
    lambda: maj_at_k(["A", "B"], [True, False], 3),
    lambda: maj_at_k(["A"], [True, False], 1),
    lambda: pass_curve([[1, 0]], [0, 1]),
    lambda: bon_curve([[0.1]], [[1], [0]]),
    lambda: bon_curve([[0.1, 0.2]], [[1]]),
    lambda: bon_curve([[0.1, 0.2], [0.3]], [[1, 0], [1, 1]]),
    lambda: bon_curve([[0.1, float("nan")]], [[1, 0]]),
    lambda: pass_curve([[1.0, float("inf")]]),
    lambda: maj_curve([["A"]], [[1, 0]]),
])
def test_value_errors(call) -> None:
    with pytest.raises(ValueError):
        call()


def test_curves_nan_beyond_n_with_mixed_n() -> None:
    correct = [[1, 1, 1, 1], [1, 0], [1, 1, 1, 1, 1, 1]]
    answers = [["A"] * 4, ["A", "B"], ["A"] * 6]
    scores = [[1.0] * 4, [1.0, 0.5], [0.0] * 6]
    for curve in (pass_curve(correct), bon_curve(scores, correct), maj_curve(answers, correct)):
        assert curve.shape == (3, 6)
        assert np.isnan(curve[0, 4:]).all() and np.isnan(curve[1, 2:]).all() and not np.isnan(curve[2]).any()
        assert not np.isnan(curve[0, :4]).any() and not np.isnan(curve[1, :2]).any()
    np.testing.assert_allclose(mean_correct(correct), [1.0, 0.5, 1.0])


# ---------------------------------------------------------------------------------------------
# bootstrap


def test_bootstrap_ci_contains_mean_and_is_reproducible() -> None:
    rng = np.random.default_rng(3)
    vals = rng.beta(0.5, 0.8, size=(300, 5))
    lo, hi = bootstrap_ci(vals, n_boot=500, seed=7)
    means = vals.mean(axis=0)
    assert np.all(lo < means) and np.all(means < hi)
    lo2, hi2 = bootstrap_ci(vals, n_boot=500, seed=7)
    np.testing.assert_array_equal(lo, lo2)
    np.testing.assert_array_equal(hi, hi2)
    lo3, _ = bootstrap_ci(vals, n_boot=500, seed=8)
    assert not np.array_equal(lo, lo3)
    # a column bootstraps the same alone (1-D form returns floats) as inside the matrix
    lo1, hi1 = bootstrap_ci(vals[:, 2], n_boot=500, seed=7)
    assert isinstance(lo1, float) and (lo1, hi1) == pytest.approx((lo[2], hi[2]), rel=1e-12)


def test_bootstrap_ci_drops_nan_rows_per_column() -> None:
    rng = np.random.default_rng(4)
    vals = rng.random((200, 3))
    vals[:50, 1] = np.nan
    vals[:, 2] = np.nan
    lo, hi = bootstrap_ci(vals, n_boot=400, seed=1)
    assert (lo[1], hi[1]) == pytest.approx(bootstrap_ci(vals[50:, 1], n_boot=400, seed=1), rel=1e-12)
    assert lo[0] < np.nanmean(vals[:, 0]) < hi[0]
    assert np.isnan(lo[2]) and np.isnan(hi[2])


def test_bootstrap_ci_narrows_with_more_problems() -> None:
    rng = np.random.default_rng(5)
    lo_s, hi_s = bootstrap_ci(rng.random(50), n_boot=500)
    lo_l, hi_l = bootstrap_ci(rng.random(5000), n_boot=500)
    assert hi_l - lo_l < (hi_s - lo_s) / 4


def test_paired_bootstrap_diff() -> None:
    rng = np.random.default_rng(6)
    base = rng.random(400)
    better = np.clip(base + 0.1 + rng.normal(0, 0.05, 400), 0, 1)
    diff, lo, hi, p = paired_bootstrap_diff(better, base, n_boot=1000, seed=0)
    assert diff == pytest.approx(float(np.mean(better - base)))
    assert 0 < lo < diff < hi and p < 0.01
    assert paired_bootstrap_diff(better, base, n_boot=1000, seed=0) == (diff, lo, hi, p)
    _, _, _, p_rev = paired_bootstrap_diff(base, better, n_boot=1000, seed=0)
    assert p_rev > 0.99
    a, b = better.copy(), base.copy()
    a[0], b[1] = np.nan, np.nan  # a pair with a NaN on either side is dropped
    assert paired_bootstrap_diff(a, b)[0] == pytest.approx(float(np.mean((better - base)[2:])))
    with pytest.raises(ValueError):
        paired_bootstrap_diff(base, base[:-1])


# ---------------------------------------------------------------------------------------------
# metric names and their one display order


def test_group_metric_names_round_trip() -> None:
    name = estimators.group_metric_name("pass@4", "level", "college math")
    assert name == "pass@4[level=college math]"
    assert estimators.split_metric_name(name) == ("pass@4", "level", "college math")
    # a group may hold '=' or brackets; only the breakdown name is restricted
    odd = estimators.group_metric_name("maj@2", "subject", "a=b [c]")
    assert estimators.split_metric_name(odd) == ("maj@2", "subject", "a=b [c]")
    assert estimators.split_metric_name("reasoning_gap") == ("reasoning_gap", None, None)
    assert estimators.split_metric_name("pass@4[Oct-2023]") == ("pass@4", "", "Oct-2023")  # written before breakdowns
    for bad in ("", "lev=el", "a[b]"):
        with pytest.raises(ValueError, match="breakdown name"):
            estimators.group_metric_name("pass@1", bad, "g")


def test_estimators_reexports_the_maj_module_without_a_cycle() -> None:
    # the names callers import from bonbench.metrics.estimators are the maj module's own objects (so the
    # benchmark's WINS_CACHE.clear() empties the cache the machinery uses)
    for name in ("maj_at_k", "maj_curve", "FLOAT64_MAX_N", "WINS_CACHE", "maj_terms"):
        assert getattr(estimators, name) is getattr(estimators_maj, name), name
    # estimators_checks <- estimators_maj <- estimators: neither lower module imports a higher one
    import ast
    from pathlib import Path

    from bonbench.metrics import bootstrap, names, pass_bon

    top = {"bonbench.metrics.estimators"}
    for module, forbidden in ((estimators_checks, top | {"bonbench.metrics.maj", "bonbench.metrics.pass_bon"}),
                              (estimators_maj, top | {"bonbench.metrics.pass_bon"}), (pass_bon, top), (bootstrap, top),
                              (names, top)):
        tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not imported & forbidden, (module.__name__, imported & forbidden)
