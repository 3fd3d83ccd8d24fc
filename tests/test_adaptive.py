"""Two-stage adaptive sampling (bonbench.metrics.adaptive): exact expectations by enumeration.

Unbiasedness is checked without Monte Carlo: every outcome sequence the design can produce is
enumerated with its probability, and the estimate's expectation must equal the metric of i.i.d.
draws to 1e-12, for pass@k, bon@k (with score ties) and maj@k. The same enumeration shows the plain
estimator on all samples pooled biased under the same designs, so the check can fail. A half-width
target's allocation is enumerated over whole datasets (every problem's pilot, so every decision the
other problems' pilots can make), and a design that also sees its own pilot is shown biased there.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pytest

from bonbench.metrics.adaptive import Z95, TwoStage, allocate, allocate_halfwidth, pilot_prior
from bonbench.metrics.maj import maj_at_k
from bonbench.metrics.pass_bon import bon_at_k, pass_at_k

# (score, correct, answer) outcomes: a verifier that ties a right and a wrong answer at 0.5 and ranks
# one wrong answer first; two wrong answers that can outvote the right one
OUTCOMES = [(0.5, 1, "7"), (0.9, 1, "7"), (0.5, 0, "8"), (0.95, 0, "9"), (0.1, 0, "8")]
PROBS = [0.2, 0.15, 0.3, 0.1, 0.25]
DESIGNS = [TwoStage(2, (2, 4, 3), 0.3), TwoStage(2, (3, 2, 2), 0.0), TwoStage(2, (2, 2, 3), 1.0),
           TwoStage(3, (2, 3, 2, 2), 0.55)]

Outcome = tuple[float, int, str]
Metric = Callable[[list[Outcome], int], float]


def _pass(xs: list[Outcome], k: int) -> float:
    return pass_at_k([c for _, c, _ in xs], k)


def _bon(xs: list[Outcome], k: int) -> float:
    return bon_at_k([s for s, _, _ in xs], [c for _, c, _ in xs], k)


def _maj(xs: list[Outcome], k: int) -> float:
    return maj_at_k([a for _, _, a in xs], [c for _, c, _ in xs], k)


METRICS: dict[str, Metric] = {"pass": _pass, "bon": _bon, "maj": _maj}


def _runs(design: TwoStage, outcomes: Sequence[Outcome],
          probs: Sequence[float]) -> Iterator[tuple[float, list[Outcome], list[Outcome]]]:
    """Every (pilot, second stage) the design can draw from i.i.d. outcomes, with its probability;
    orders within a part are summed into one (the fixed-n estimators read a part's multiset)."""
    runs: dict[tuple[tuple[int, ...], tuple[int, ...]], float] = {}
    for head in itertools.product(range(len(outcomes)), repeat=design.pilot):
        s1 = sum(outcomes[i][1] for i in head)
        for tail in itertools.product(range(len(outcomes)), repeat=design.second[s1]):
            key = (tuple(sorted(head)), tuple(sorted(tail)))
            runs[key] = runs.get(key, 0.0) + math.prod(probs[i] for i in head + tail)
    for (head, tail), w in runs.items():
        yield w, [outcomes[i] for i in head], [outcomes[i] for i in tail]


def _truth(metric: Metric, outcomes: Sequence[Outcome], probs: Sequence[float], k: int) -> float:
    """The metric at k of k i.i.d. draws, by enumerating the k-tuples (a k-tuple is its own only subset)."""
    return sum(math.prod(probs[i] for i in t) * metric([outcomes[i] for i in t], k)
               for t in itertools.product(range(len(outcomes)), repeat=k))


@pytest.mark.parametrize("design", DESIGNS, ids=str)
@pytest.mark.parametrize("name", sorted(METRICS))
def test_the_two_stage_estimate_is_exactly_unbiased(design: TwoStage, name: str) -> None:
    metric = METRICS[name]
    for k in range(1, 3):
        design.check_k(k)
        expect = sum(w * design.estimate(metric(head, k), metric(tail, k)) for w, head, tail in _runs(design, OUTCOMES, PROBS))
        assert expect == pytest.approx(_truth(metric, OUTCOMES, PROBS, k), abs=1e-12)


@pytest.mark.parametrize("name", sorted(METRICS))
def test_pooling_every_sample_is_biased_under_the_same_design(name: str) -> None:
    metric, design = METRICS[name], DESIGNS[0]
    pooled = sum(w * metric(head + tail, 2) for w, head, tail in _runs(design, OUTCOMES, PROBS))
    assert abs(pooled - _truth(metric, OUTCOMES, PROBS, 2)) > 1e-3
    fixed = TwoStage(2, (3, 3, 3), 0.4)  # a design that does not adapt: pooling is unbiased there
    pooled = sum(w * metric(head + tail, 2) for w, head, tail in _runs(fixed, OUTCOMES, PROBS))
    assert pooled == pytest.approx(_truth(metric, OUTCOMES, PROBS, 2), abs=1e-12)


def test_designs_refuse_what_they_cannot_estimate() -> None:
    with pytest.raises(ValueError, match="above the pilot"):
        TwoStage(2, (4, 4, 4), 0.5).check_k(3)
    TwoStage(2, (4, 4, 4), 0.0).check_k(3)  # the pilot carries no weight: only the second stage needs k
    with pytest.raises(ValueError, match="allocate with floor >= k"):
        TwoStage(3, (1, 5, 5, 5), 0.5).check_k(2)
    with pytest.raises(ValueError, match="a size >= 0 for each of 0..3"):
        TwoStage(3, (1, 2), 0.5)
    with pytest.raises(ValueError, match=r"weight must be in \[0, 1\]"):
        TwoStage(1, (1, 1), 1.5)
    with pytest.raises(ValueError, match="floor >= 1"):
        allocate([0, 1], 2, 10, floor=0)
    with pytest.raises(ValueError, match="between 0 and the pilot"):
        allocate([5], 4, 10)


def test_a_problems_design_is_the_rule_it_was_allocated_by() -> None:
    # unbiasedness needs: with the other problems' pilots fixed, a problem's second stage is
    # second[s1] for whatever s1 it had, and its weight the same. Re-run with each pilot changed.
    rng = np.random.default_rng(3)
    pilots = [int(x) for x in rng.binomial(4, rng.beta(0.3, 4, 60))]
    designs = allocate(pilots, 4, 600, floor=2, cap=40)
    for i in (0, 7, 31, 59):
        for s in range(5):
            again = allocate(pilots[:i] + [s] + pilots[i + 1:], 4, 600, floor=2, cap=40)[i]
            assert again.second[s] == designs[i].second[s] and again.weight == designs[i].weight
    spent = sum(d.second[s] for d, s in zip(designs, pilots, strict=True))
    assert 0.8 * 600 <= spent <= 1.2 * 600  # the budget is a target, rounding moves it a little
    assert all(2 <= m <= 40 for d in designs for m in d.second)


def test_allocation_gives_more_to_problems_whose_pilot_is_mixed() -> None:
    pilots = [0] * 80 + [2] * 10 + [4] * 10
    designs = allocate(pilots, 4, 1000)
    m = {s: designs[pilots.index(s)].second[s] for s in (0, 2, 4)}
    assert m[2] > m[0] and m[2] > m[4]
    assert 0.0 < designs[0].weight < 1.0


def test_the_weight_minimises_the_expected_variance_under_the_fitted_prior() -> None:
    pilots = [0] * 40 + [1] * 15 + [2] * 5
    design = allocate(pilots, 2, 300, floor=1)[0]
    others = np.bincount(pilots[1:], minlength=3)  # problem 0's design comes from the others
    a, b = pilot_prior(others, 2)
    ps = np.linspace(1e-4, 1 - 1e-4, 20001)
    log_pdf = (a - 1) * np.log(ps) + (b - 1) * np.log1p(-ps)
    dens = np.exp(log_pdf - log_pdf.max())
    dens /= dens.sum()
    pilot_of = [math.comb(2, s) * ps ** s * (1 - ps) ** (2 - s) for s in range(3)]
    v_pilot = float(dens @ (ps * (1 - ps) / 2))
    v_second = float(dens @ sum(q * ps * (1 - ps) / design.second[s] for s, q in enumerate(pilot_of)))

    def variance(w: float) -> float:  # the two parts are uncorrelated (module docstring)
        return w * w * v_pilot + (1 - w) ** 2 * v_second

    grid = np.linspace(0, 1, 2001)
    best = float(grid[int(np.argmin([variance(w) for w in grid]))])
    assert design.weight == pytest.approx(best, abs=2e-3)
    assert variance(design.weight) < min(variance(0.0), variance(1.0), variance(0.5))


# ----------------------------------------------------------------------------- a half-width target


def _binom(c: int, m: int, p: float) -> float:
    return math.comb(m, c) * p ** c * (1 - p) ** (m - c)


def _pass_of_counts(c: int, m: int, k: int) -> float:
    return 1 - math.comb(m - c, k) / math.comb(m, k)


def _expectations(ps: Sequence[float], pilot: int, halfwidth: float, k: int, cap: int, *,
                  peek: bool) -> tuple[list[float], bool]:
    """Each problem's expected two-stage pass@k under ``allocate_halfwidth``, exactly: every joint
    pilot of the dataset with its probability, then the second stage's binomial law. ``peek`` counts
    a problem's own pilot among the others (the mistake the allocation must not make). Also whether
    some table gave different sizes to different pilot counts (the enumeration is not vacuous)."""
    expect, varied = [0.0] * len(ps), False
    for s in itertools.product(range(pilot + 1), repeat=len(ps)):
        chance = math.prod(_binom(x, pilot, p) for x, p in zip(s, ps, strict=True))
        designs = allocate_halfwidth(list(s), pilot, halfwidth, k=k, floor=k, cap=cap)[0]
        for i, p in enumerate(ps):
            d = allocate_halfwidth([*s, s[i]], pilot, halfwidth, k=k, floor=k, cap=cap)[0][i] if peek else designs[i]
            varied |= len(set(d.second)) > 1
            m = d.second[s[i]]
            second = sum(_binom(c, m, p) * _pass_of_counts(c, m, k) for c in range(m + 1))
            expect[i] += chance * d.estimate(_pass_of_counts(s[i], pilot, k), second)
    return expect, varied


@pytest.mark.parametrize(("halfwidth", "k"), [(0.25, 1), (0.3, 2)])
def test_a_halfwidth_targets_estimate_is_exactly_unbiased_over_whole_datasets(halfwidth: float, k: int) -> None:
    ps = [0.15, 0.5, 0.8, 0.35]
    expect, varied = _expectations(ps, 2, halfwidth, k, 4, peek=False)
    assert varied
    assert expect == pytest.approx([1 - (1 - p) ** k for p in ps], abs=1e-12)
    if k == 1:  # a design that also sees its own pilot: the same enumeration finds the bias
        peeked, _ = _expectations(ps, 2, halfwidth, k, 4, peek=True)
        assert max(abs(e - p) for e, p in zip(peeked, ps, strict=True)) > 1e-3


def test_a_run_that_goes_on_only_when_the_target_is_in_reach_is_a_selection() -> None:
    # the stop after the pilot (fallback=stop) reads every pilot, the problem's own included: the
    # runs that go on are biased in the pilot's term, while finishing every run (fallback=cap) is exact
    ps, pilot, h = [0.15, 0.5, 0.8, 0.35], 2, 0.4
    every, going_on, reach = [0.0] * 4, [0.0] * 4, 0.0
    for s in itertools.product(range(pilot + 1), repeat=len(ps)):
        chance = math.prod(_binom(x, pilot, p) for x, p in zip(s, ps, strict=True))
        designs, hw = allocate_halfwidth(list(s), pilot, h, cap=4)
        reach += chance * hw.reaches(h)
        for i, (d, p) in enumerate(zip(designs, ps, strict=True)):
            m = d.second[s[i]]
            value = d.estimate(_pass_of_counts(s[i], pilot, 1), sum(_binom(c, m, p) * c / m for c in range(m + 1)))
            every[i] += chance * value
            going_on[i] += chance * hw.reaches(h) * value
    assert 0.5 < reach < 0.95
    assert every == pytest.approx(ps, abs=1e-12)
    assert max(abs(g / reach - p) for g, p in zip(going_on, ps, strict=True)) > 5e-3


def test_a_problems_halfwidth_design_is_the_rule_it_was_allocated_by() -> None:
    rng = np.random.default_rng(5)
    pilots = [int(x) for x in rng.binomial(4, rng.beta(0.3, 3, 80))]
    designs, hw = allocate_halfwidth(pilots, 4, 0.031, floor=2, cap=40)
    assert len({d.second for d in designs}) > 1 and len({d.second[s] for d, s in zip(designs, pilots, strict=True)}) > 1
    for i in (0, 9, 44, 79):
        for s in range(5):
            again = allocate_halfwidth(pilots[:i] + [s] + pilots[i + 1:], 4, 0.031, floor=2, cap=40)[0][i]
            assert again.second[s] == designs[i].second[s] and again.weight == designs[i].weight
    assert hw.between < hw.at_cap < hw.predicted and hw.reaches(0.031)


def test_a_wider_target_spends_less_and_one_out_of_reach_takes_the_cap() -> None:
    rng = np.random.default_rng(7)
    pilots = [int(x) for x in rng.binomial(4, rng.beta(0.5, 2, 200))]

    def spend(h: float) -> int:
        return sum(d.size(s) for d, s in zip(allocate_halfwidth(pilots, 4, h, cap=60)[0], pilots, strict=True))

    spends = [spend(h) for h in (0.0292, 0.03, 0.032, 0.034, 0.04)]
    assert spends == sorted(spends, reverse=True) and len(set(spends)) == len(spends)
    assert spends[-1] == 5 * len(pilots)  # the floor of one sample reaches a wide target
    designs, hw = allocate_halfwidth(pilots, 4, hw_below := 0.5 * allocate_halfwidth(pilots, 4, 0.1, cap=60)[1].between,
                                     cap=60)
    assert not hw.reaches(hw_below) and all(d.second == (60,) * 5 for d in designs)
    # a pilot larger than the cap on the second stage, at k = 2
    designs, hw = allocate_halfwidth(pilots, 4, 0.03, k=2, floor=2, cap=3)
    assert all(d.second == (3,) * 5 for d in designs) and hw.between < hw.at_cap


def test_the_predicted_halfwidth_is_the_spread_of_the_problems_estimates_under_the_prior() -> None:
    from scipy.stats import betabinom

    pilots = [0] * 30 + [1] * 12 + [2] * 6 + [3] * 2
    designs, hw = allocate_halfwidth(pilots, 3, 0.09, k=2, floor=2, cap=12)
    a, b = pilot_prior(np.bincount(pilots, minlength=4), 3)
    mean, square, within = [], [], []
    for d, s in zip(designs, pilots, strict=True):  # each problem under its posterior Beta(a + s, b + 3 - s)
        post = (a + s, b + 3 - s)
        theta = 1 - betabinom.pmf(0, 2, *post)  # E[1 - (1 - p)^2]
        theta2 = 1 - 2 * betabinom.pmf(0, 2, *post) + betabinom.pmf(0, 4, *post)

        def var(m: int, post: tuple[float, float] = post, theta2: float = theta2) -> float:  # of pass@2 from m, given p
            return float(sum(betabinom.pmf(c, m, *post) * _pass_of_counts(c, m, 2) ** 2 for c in range(m + 1))) - theta2

        mean.append(theta)
        square.append(theta2)
        within.append(d.weight ** 2 * var(3) + (1 - d.weight) ** 2 * var(d.second[s]))
    between = float(np.mean(square) - np.mean(mean) ** 2)
    assert hw.predicted == pytest.approx(Z95 * math.sqrt((between + float(np.mean(within))) / len(pilots)), rel=1e-9)
    assert hw.between == pytest.approx(Z95 * math.sqrt(between / len(pilots)), rel=1e-9)
    assert len({d.second for d in designs}) > 1
