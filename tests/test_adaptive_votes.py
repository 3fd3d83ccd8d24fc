"""A half-width target on maj@k and bon@k, and a target met with high probability
(bonbench.metrics.adaptive_votes, adaptive.allocate_halfwidth(confidence=)).

Unbiasedness is checked by enumerating whole datasets, as tests/test_adaptive.py does for pass@k:
every joint pilot of three problems with its probability, the allocation run on it, and each
problem's second stage by its exact law; each problem's expected two-stage maj@2 and bon@2 must
equal the truth to 1e-12, at the default confidence and at 0.9. A control lets each design also see
its own pilot, and the same enumeration finds the bias. The prediction's parts are checked against
brute force: the kernel against ``maj_at_k`` / ``bon_at_k`` on every k-tuple, and the variance of the
fixed-m estimate against every m-tuple of the plug-in law.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence

import numpy as np
import pytest

from bonbench.metrics import adaptive_votes
from bonbench.metrics.adaptive import TwoStage, allocate_halfwidth, pilot_prior
from bonbench.metrics.adaptive_votes import Pilot, allocate_halfwidth_votes, kernel, overlaps, posterior, within
from bonbench.metrics.maj import maj_at_k
from bonbench.metrics.pass_bon import bon_at_k

# (score, correct, answer): a right answer tied at 0.5 with a wrong one, and a wrong answer scored above both
OUTCOMES = [(0.5, 1, "7"), (0.5, 0, "8"), (0.95, 0, "9")]
PROBS = [[0.3, 0.4, 0.3], [0.7, 0.2, 0.1], [0.1, 0.5, 0.4]]

Outcome = tuple[float, int, str]


def _value(metric: str, xs: Sequence[Outcome], k: int) -> float:
    if metric == "maj":
        return maj_at_k([a for _, _, a in xs], [c for _, c, _ in xs], k)
    return bon_at_k([s for s, _, _ in xs], [c for _, c, _ in xs], k)


def _draws(probs: Sequence[float], m: int) -> dict[tuple[int, ...], float]:
    """Every multiset of m i.i.d. outcomes with its probability (the estimators read a multiset)."""
    out: dict[tuple[int, ...], float] = {}
    for t in itertools.product(range(len(OUTCOMES)), repeat=m):
        key = tuple(sorted(t))
        out[key] = out.get(key, 0.0) + math.prod(probs[i] for i in t)
    return out


def _pilot(draw: tuple[int, ...]) -> Pilot:
    xs = [OUTCOMES[i] for i in draw]
    return Pilot(tuple(float(c) for _, c, _ in xs), tuple(a for _, _, a in xs), tuple(s for s, _, _ in xs))


@pytest.fixture
def remembered_prior(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same prior fit, remembered by its counts: the enumeration fits it thousands of times."""
    @functools.cache
    def fit(counts: tuple[int, ...], pilot: int) -> tuple[float, float]:
        return pilot_prior(np.array(counts), pilot)

    monkeypatch.setattr(adaptive_votes, "pilot_prior", lambda counts, pilot: fit(tuple(int(c) for c in counts), pilot))


def _expectations(metric: str, halfwidth: float, confidence: float, *, peek: bool, k: int = 2, pilot: int = 2,
                  cap: int = 4) -> tuple[list[float], list[float], set[int]]:
    """Each problem's expected two-stage estimate over every joint pilot, its truth, and the
    second-stage sizes seen (the enumeration is not vacuous). ``peek`` counts a problem's own pilot
    among the others (the mistake the allocation must not make)."""
    truth = [sum(w * _value(metric, [OUTCOMES[i] for i in t], k) for t, w in _draws(p, k).items()) for p in PROBS]

    @functools.cache
    def second(j: int, m: int) -> float:
        return sum(w * _value(metric, [OUTCOMES[i] for i in t], k) for t, w in _draws(PROBS[j], m).items())

    expect, sizes = [0.0] * len(PROBS), set()
    for joint in itertools.product(*(list(_draws(p, pilot).items()) for p in PROBS)):
        chance = math.prod(w for _, w in joint)
        pilots = [_pilot(t) for t, _ in joint]
        designs = allocate_halfwidth_votes(pilots, metric, halfwidth, k=k, floor=k, cap=cap, confidence=confidence)[0]
        for i, p in enumerate(pilots):
            d = (allocate_halfwidth_votes([*pilots, p], metric, halfwidth, k=k, floor=k, cap=cap,
                                          confidence=confidence)[0][i] if peek else designs[i])
            m = d.second[int(sum(p.correct))]
            sizes.add(m)
            expect[i] += chance * d.estimate(p.value(metric, k), second(i, m))
    return expect, truth, sizes


@pytest.mark.parametrize("confidence", [0.5, 0.9])
@pytest.mark.parametrize("metric", ["maj", "bon"])
def test_a_maj_or_bon_targets_estimate_is_exactly_unbiased_over_whole_datasets(metric: str, confidence: float,
                                                                              remembered_prior: None) -> None:
    expect, truth, sizes = _expectations(metric, 0.25, confidence, peek=False)
    assert len(sizes) > 1
    assert expect == pytest.approx(truth, abs=1e-12)


@pytest.mark.parametrize("metric", ["maj", "bon"])
def test_a_design_that_sees_its_own_pilot_is_biased_in_the_same_enumeration(metric: str, remembered_prior: None) -> None:
    expect, truth, _ = _expectations(metric, 0.25, 0.5, peek=True)
    assert max(abs(e - t) for e, t in zip(expect, truth, strict=True)) > 1e-3


def _random_pilots(seed: int, problems: int, pilot: int = 4) -> list[Pilot]:
    rng = np.random.default_rng(seed)
    out = []
    for p in rng.beta(0.4, 1.5, problems):
        right = rng.random(pilot) < p
        answers = tuple("r" if r else (None if rng.random() < 0.1 else str(int(rng.geometric(0.4)))) for r in right)
        out.append(Pilot(tuple(float(r) for r in right), answers, tuple(float(x) for x in rng.normal(right, 1.0))))
    return out


@pytest.mark.parametrize("metric", ["maj", "bon"])
def test_a_problems_design_does_not_depend_on_its_own_pilot(metric: str) -> None:
    pilots, h = _random_pilots(1, 60), {"maj": 0.09, "bon": 0.1}[metric]  # in reach, below the floor's half-width
    designs, hw = allocate_halfwidth_votes(pilots, metric, h, k=4, floor=4, cap=40, confidence=0.8)
    assert len({d.second[int(sum(p.correct))] for d, p in zip(designs, pilots, strict=True)}) > 1
    others = _random_pilots(2, 4)
    for i in (0, 17, 59):
        for own in others:  # any other pilot in its place: the same table and weight
            assert allocate_halfwidth_votes([*pilots[:i], own, *pilots[i + 1:]], metric, h, k=4, floor=4, cap=40,
                                            confidence=0.8)[0][i] == designs[i]
    assert hw.between < hw.at_cap and hw.expected is not None and hw.expected < hw.predicted


@pytest.mark.parametrize("metric", ["maj", "bon"])
def test_the_kernel_is_the_metric_of_each_k_tuple(metric: str) -> None:
    z = np.array([1.0, 0.0, 0.0, 1.0, 0.0])
    cls, score = np.array([0, 1, -1, 0, 2]), np.array([0.5, 0.5, 0.9, 0.2, 0.9])
    for k in (1, 2, 3):
        h = kernel(metric, z, cls, score, k)
        for j, t in enumerate(itertools.product(range(z.size), repeat=k)):
            idx = list(t)
            want = (maj_at_k([None if cls[i] < 0 else int(cls[i]) for i in idx], z[idx].tolist(), k) if metric == "maj"
                    else bon_at_k(score[idx], z[idx], k))
            assert h[j] == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("metric", ["maj", "bon"])
@pytest.mark.parametrize("correct", [(1.0, 0.0, 0.0), (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)])
def test_within_is_the_variance_of_the_fixed_m_estimate_under_the_plug_in_law(metric: str,
                                                                               correct: tuple[float, ...]) -> None:
    # the law: the pilot's samples (right ones sharing 0.3), and one added sample where a side is missing
    answers = tuple("r" if c else a for c, a in zip(correct, ("8", None, "9"), strict=True))
    p, k, q = Pilot(correct, answers, (0.5, 0.9, 0.5)), 2, 0.3
    table, theta = within(metric, p, q, k, overlaps(k, 5))
    right = sum(correct)
    extra: Outcome = (0.9, 1, "new") if right == 0 else (0.5, 0, "new")  # beside its best wrong / worst right
    law = [((s, int(c), a), (q / right if c else (1 - q) / (3 - right)) if 0 < right < 3 else
            ((1 - q) / 3 if right == 0 else q / 3)) for s, c, a in zip(p.scores, correct, answers, strict=True)]
    if not 0 < right < 3:
        law.append((extra, q if right == 0 else 1 - q))
    for m in (2, 3, 4):
        moments = [0.0, 0.0]
        for t in itertools.product(range(len(law)), repeat=m):
            w = math.prod(law[i][1] for i in t)
            xs = [law[i][0] for i in t]
            v = (maj_at_k([a for _, _, a in xs], [c for _, c, _ in xs], k) if metric == "maj"
                 else bon_at_k([s for s, _, _ in xs], [c for _, c, _ in xs], k))
            moments[0] += w * v
            moments[1] += w * v * v
        assert table[m] == pytest.approx(moments[1] - moments[0] ** 2, abs=1e-12)
        assert theta == pytest.approx(moments[0], abs=1e-12)  # the fixed-m estimate is unbiased for it


@pytest.mark.parametrize("metric", ["maj", "bon"])
def test_the_posterior_average_is_the_integral_over_the_beta_posterior(metric: str) -> None:
    # exact quadrature on k + 1 nodes against a fine grid over the right-sample chance
    p, k, a, b = Pilot((0.0, 1.0, 0.0), ("8", "r", "8"), (0.2, 0.5, 0.9)), 2, 1.0, 3.0
    table = overlaps(k, 6)
    var, first, second = posterior(metric, p, a, b, k, table)
    grid = np.linspace(1e-6, 1 - 1e-6, 20001)
    dens = grid ** (a + 1 - 1) * (1 - grid) ** (b + 2 - 1)
    dens /= np.trapezoid(dens, grid)
    at = [within(metric, p, float(q), k, table) for q in grid]
    thetas = np.array([t for _, t in at])
    assert first == pytest.approx(float(np.trapezoid(dens * thetas, grid)), rel=1e-6)
    assert second == pytest.approx(float(np.trapezoid(dens * thetas ** 2, grid)), rel=1e-6)
    for m in (2, 4, 6):
        assert var[m] == pytest.approx(float(np.trapezoid(dens * np.array([v[m] for v, _ in at]), grid)), rel=1e-6)


def test_a_higher_confidence_spends_more_and_predicts_a_wider_expected_margin() -> None:
    rng = np.random.default_rng(7)
    counts = [int(x) for x in rng.binomial(4, rng.beta(0.5, 2, 200))]
    pilots = _random_pilots(3, 200)

    def spend(designs: Sequence[TwoStage], s1: Sequence[int]) -> int:
        return sum(d.size(s) for d, s in zip(designs, s1, strict=True))

    for confidence in (0.5, 0.75, 0.9, 0.97):
        pass_designs, pass_hw = allocate_halfwidth(counts, 4, 0.032, cap=60, confidence=confidence)
        maj_designs, maj_hw = allocate_halfwidth_votes(pilots, "maj", 0.045, k=4, floor=4, cap=60, confidence=confidence)
        if confidence == 0.5:
            assert pass_hw.expected is None and maj_hw.expected is None
            base = spend(pass_designs, counts), spend(maj_designs, [int(sum(p.correct)) for p in pilots])
            continue
        assert pass_hw.expected is not None and pass_hw.expected < pass_hw.predicted
        now = spend(pass_designs, counts), spend(maj_designs, [int(sum(p.correct)) for p in pilots])
        assert now[0] > base[0] and now[1] > base[1]
        base = now


def test_bad_arguments_are_refused() -> None:
    pilots = _random_pilots(4, 5)
    with pytest.raises(ValueError, match="metric must be one of"):
        allocate_halfwidth_votes(pilots, "pass", 0.1, k=2, floor=2, cap=8)
    with pytest.raises(ValueError, match="k-tuples, above"):
        allocate_halfwidth_votes(_random_pilots(4, 5, pilot=12), "maj", 0.1, k=6, floor=6, cap=8)
    with pytest.raises(ValueError, match="confidence must be between 0 and 1"):
        allocate_halfwidth_votes(pilots, "maj", 0.1, k=2, floor=2, cap=8, confidence=1.0)
    with pytest.raises(ValueError, match="same size >= k"):
        allocate_halfwidth_votes(pilots, "maj", 0.1, k=5, floor=5, cap=8)
