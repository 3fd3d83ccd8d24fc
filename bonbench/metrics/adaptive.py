"""Two-stage adaptive sampling: allocate samples from a pilot, estimate without bias.

The design (pre-registered; docs/adaptive.md proves what is claimed here). Every problem first gets
``pilot`` samples. From the pilots' correct counts, ``allocate`` gives each problem a table
``second[s1]`` (how many more samples it gets after ``s1`` pilot successes) and a weight ``w``. A
problem's table and weight are computed from the *other* problems' pilots only: given them, its
second-stage size is a fixed function of its own pilot, and ``w`` does not depend on its own pilot.

The estimate of any metric at k (pass@k, bon@k, maj@k, ...) is

    w * (the fixed-n estimate on the pilot) + (1 - w) * (the fixed-n estimate on the second stage).

Both parts are unbiased: the pilot is a fixed-size i.i.d. draw; the second stage is one too once the
pilot is given, its size having been decided before it was drawn (E[second | pilot] = the metric, so
E[second] = the metric). A weight fixed before the pilot is seen keeps the sum unbiased; the two
parts are uncorrelated (E[pilot * second] = E[pilot * E[second | pilot]]), so the weight
``allocate`` picks minimises the expected variance under the fitted prior. The plain mean over all
samples would be biased (the second stage's size depends on the pilot's outcomes: tested).

What it does not do: draw samples or store rounds (the runner), the per-part fixed-n estimators
(``bonbench.metrics.pass_bon``, ``maj``), or bootstrap (``bonbench.metrics.bootstrap``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np


@dataclass(frozen=True)
class TwoStage:
    """One problem's design: ``pilot`` first samples, ``second[s1]`` more after ``s1`` pilot successes,
    and the weight of the pilot's estimate in the final one."""

    pilot: int
    second: tuple[int, ...]
    weight: float

    def __post_init__(self) -> None:
        if self.pilot < 1:
            raise ValueError(f"a two-stage design needs a pilot of at least 1 sample, got {self.pilot}")
        if len(self.second) != self.pilot + 1 or any(m < 0 for m in self.second):
            raise ValueError(f"second must give a size >= 0 for each of 0..{self.pilot} pilot successes, "
                             f"got {self.second}")
        if not 0.0 <= self.weight <= 1.0:
            raise ValueError(f"the pilot's weight must be in [0, 1], got {self.weight}")

    def size(self, successes: int) -> int:
        """Samples drawn in all after ``successes`` pilot successes."""
        return self.pilot + self.second[successes]

    def check_k(self, k: int) -> None:
        """A metric at k needs k samples in each part that carries weight."""
        if self.weight > 0 and k > self.pilot:
            raise ValueError(f"k={k} is above the pilot ({self.pilot}): use a pilot of at least k, or weight 0")
        if self.weight < 1 and k > min(self.second):
            raise ValueError(f"k={k} is above the smallest second stage ({min(self.second)}): allocate with floor >= k")

    def estimate(self, pilot_value: float, second_value: float) -> float:
        """The unbiased estimate from the two parts' fixed-n estimates (module docstring)."""
        if self.weight == 1.0:
            return pilot_value
        if self.weight == 0.0:
            return second_value
        return self.weight * pilot_value + (1 - self.weight) * second_value


# ----------------------------------------------------------------------------------------------
# allocation


def pilot_prior(counts: np.ndarray, pilot: int) -> tuple[float, float]:
    """Beta(a, b) of the problems' success probabilities: the beta-binomial maximum likelihood of the
    pilot counts ``counts[s]`` (problems with s successes), on a grid of means (1e-4 .. 1 - 1e-4,
    logit-spaced) and sizes a + b (0.05 .. 10^4, log-spaced), refined once around the best point.
    Jeffreys' Beta(1/2, 1/2) where the pilots cannot say (fewer than two problems, a pilot of one).
    (A method-of-moments fit was tried first: with pilots of two it often found no overdispersion
    and so no reason to adapt.)"""
    from scipy.special import betaln

    if counts.sum() < 2 or pilot < 2:
        return 0.5, 0.5
    s = np.arange(pilot + 1)
    logit, log_size = np.linspace(-9.2, 9.2, 93), np.linspace(math.log(0.05), math.log(1e4), 93)
    for _ in range(2):
        mean = 1 / (1 + np.exp(-logit))[:, None, None]
        size = np.exp(log_size)[None, :, None]
        a, b = mean * size, (1 - mean) * size
        ll = (counts * (betaln(s + a, pilot - s + b) - betaln(a, b))).sum(axis=2)
        i, j = np.unravel_index(int(np.argmax(ll)), ll.shape)
        best = float(a[i, j, 0]), float(b[i, j, 0])
        step_l, step_s = logit[1] - logit[0], log_size[1] - log_size[0]
        logit = np.linspace(logit[i] - step_l, logit[i] + step_l, 41)
        log_size = np.linspace(log_size[j] - step_s, log_size[j] + step_s, 41)
    return best


def pilot_weight(a: float, b: float, pilot: int, second: np.ndarray) -> float:
    """The pilot's weight minimising the expected variance of the estimate of pass@1 for a problem
    drawn from Beta(a, b): Var(second stage) / (Var(pilot) + Var(second stage)), each averaged over
    the prior (and, for the second stage, over the pilot that fixes its size)."""
    if second.min() == 0:
        return 1.0  # an empty second stage has no estimate: the pilot alone
    log_beta = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    spread = a * b / ((a + b) * (a + b + 1))  # E[p (1 - p)]
    v_second = 0.0
    for s, m in enumerate(second):
        # E[p (1 - p) 1{S1 = s}] = C(pilot, s) B(a + s + 1, b + pilot - s + 1) / B(a, b)
        log_term = (math.lgamma(pilot + 1) - math.lgamma(s + 1) - math.lgamma(pilot - s + 1)
                    + math.lgamma(a + s + 1) + math.lgamma(b + pilot - s + 1) - math.lgamma(a + b + pilot + 2) - log_beta)
        v_second += math.exp(log_term) / m
    return v_second / (spread / pilot + v_second)


def neyman(a: float, b: float, pilot: int, floor: int, cap: int) -> Callable[[float], np.ndarray]:
    """Second-stage sizes at a scale, for each pilot count: Neyman allocation under Beta(a, b), a
    problem's total samples in proportion to sqrt(E[p (1 - p) | its pilot]), the pilot already spent,
    rounded and clipped to ``floor``..``cap``."""
    s = np.arange(pilot + 1)
    post_a, post_b = a + s, b + pilot - s
    # E[p (1 - p) | s]: the variance one more sample of this problem carries, on average
    spread = np.sqrt(post_a * post_b / ((post_a + post_b) * (post_a + post_b + 1)))
    return lambda scale: np.clip(np.rint(scale * spread) - pilot, floor, cap).astype(int)


def _design(others: np.ndarray, pilot: int, budget_each: float, floor: int, cap: int) -> TwoStage:
    """One problem's design, from the other problems' pilot counts only (module docstring)."""
    a, b = pilot_prior(others, pilot)
    sizes = neyman(a, b, pilot, floor, cap)
    target = budget_each * others.sum()
    lo, hi = 0.0, 1.0
    while others @ sizes(hi) < target and hi < 1e12:
        hi *= 2
    for _ in range(60):  # bisection on the scale: the others' second stages spend the budget
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if others @ sizes(mid) < target else (lo, mid)
    second = sizes(hi)
    return TwoStage(pilot, tuple(int(m) for m in second), float(pilot_weight(a, b, pilot, second)))


def allocate(pilot_successes: Sequence[int], pilot: int, budget: int, *, floor: int = 1,
             cap: int | None = None) -> list[TwoStage]:
    """Each problem's design after the pilot: ``budget`` more samples in all (a target: sizes are
    rounded and clipped to ``floor``..``cap``; a metric at k needs ``floor`` >= k), spread in
    proportion to each problem's expected spread sqrt(E[p (1 - p) | its pilot]) under a beta prior
    fitted to the other problems' pilots, and the pilot's weight (``_weight``).

    A problem's design is computed without its own pilot, so its second-stage size is a fixed
    function of its own successes and its weight does not depend on them: what keeps the estimate
    unbiased. Problems with the same pilot count share one design (removing either from the counts
    leaves the same others).
    """
    if pilot < 1 or budget < 0 or floor < 1:
        raise ValueError("need pilot >= 1, budget >= 0 and floor >= 1 (an empty second stage has no estimate)")
    top = cap if cap is not None else max(floor, budget)
    if top < floor:
        raise ValueError(f"cap {cap} is below floor {floor}")
    got = np.asarray(pilot_successes, dtype=int)
    if got.size and (got.min() < 0 or got.max() > pilot):
        raise ValueError(f"pilot successes must be between 0 and the pilot ({pilot})")
    if got.size == 1:  # no other problem to learn from: the whole budget, whatever the pilot shows
        size = np.full(pilot + 1, min(max(budget, floor), top))
        return [TwoStage(pilot, tuple(int(m) for m in size), float(pilot_weight(0.5, 0.5, pilot, size)))]
    counts = np.bincount(got, minlength=pilot + 1)
    each = budget / max(got.size, 1)
    tables = {}
    for s1 in np.unique(got):
        others = counts.copy()
        others[s1] -= 1
        tables[int(s1)] = _design(others, pilot, each, floor, top)
    return [tables[int(s1)] for s1 in got]


# ----------------------------------------------------------------------------------------------
# a CI half-width target (``--adaptive pilot=P,halfwidth=H``; docs/adaptive.md)

Z95 = 1.959963984540054  # the 97.5% normal quantile: a 95% CI's half-width in standard errors


@dataclass(frozen=True)
class HalfWidth:
    """What the pilots predict for the dataset's 95% CI half-width on the target metric: under the
    designs allocated (``predicted``), with every second stage at the cap (``at_cap``), both at the
    confidence asked for (``quantile``), and with infinitely many samples per problem (``between``:
    the spread between problems alone, which no n narrows). ``expected`` is ``predicted`` without the
    margin (the expected half-width); at the default confidence of 0.5 the two are equal."""

    predicted: float
    at_cap: float
    between: float
    expected: float | None = None

    def reaches(self, halfwidth: float) -> bool:
        """Whether the cap can reach ``halfwidth``, as the pilots predict."""
        return self.at_cap <= halfwidth


def quantile(confidence: float) -> float:
    """The normal quantile of ``confidence``, the margin's multiplier (0 at the default 0.5)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    return 0.0 if confidence == 0.5 else NormalDist().inv_cdf(confidence)


def spread_sd(values: np.ndarray, freq: np.ndarray, noise: np.ndarray, problems: int) -> float:
    """The standard deviation of a problem's predicted variance, the margin's unit (docs/adaptive.md, "A
    target met with high probability"): problems with pilot estimate ``values[j]`` in share ``freq[j]``,
    whose pilot and final values carry sampling variance ``noise[j]`` in all. The sample variance of
    the problems' values moves by about 2 (value - mean) times each problem's error, so its variance
    is 4 / problems times the mean of (value - mean)^2 noise: what both the pilots' view of the spread
    between problems and the achieved spread move by."""
    centre = float(freq @ values)
    return 2 * math.sqrt(max(float(freq @ ((values - centre) ** 2 * noise)), 0.0) / problems)


def smallest_design(sizes: Callable[[float], np.ndarray], reached: Callable[[np.ndarray], bool], cap: int,
                    pilot: int) -> np.ndarray:
    """The second-stage sizes at the smallest scale that ``reached`` accepts (a bisection: ``reached``
    is monotone in the scale); every size at the cap when none is."""
    if reached(sizes(0.0)):
        return sizes(0.0)
    hi = 1.0
    while sizes(hi).min() < cap and hi < 1e12:
        hi *= 2
    if not reached(sizes(hi)):
        return np.full(pilot + 1, cap)
    lo = 0.0
    for _ in range(60):  # bisection on the scale; hi always reaches the target
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if reached(sizes(mid)) else (mid, hi)
    return sizes(hi)


@dataclass(frozen=True)
class _PassK:
    """pass@k's moments under Beta(a, b) after each pilot count s: ``mean[s]`` = E[theta | s],
    ``square[s]`` = E[theta^2 | s] (theta = 1 - (1 - p)^k), ``within[s, m]`` = E[the variance of
    the fixed-m estimate of pass@k given p | s] for m = 0..top (nan below k), and ``value[s]`` the
    pilot's own estimate after s successes."""

    mean: np.ndarray
    square: np.ndarray
    within: np.ndarray
    value: np.ndarray

    @classmethod
    def of(cls, a: float, b: float, pilot: int, k: int, top: int) -> _PassK:
        from scipy.special import betaln, gammaln

        s = np.arange(pilot + 1)
        post_a, post_b = a + s, b + pilot - s

        def fall(j: int) -> np.ndarray:  # E[(1 - p)^j | s]
            return np.exp(betaln(post_a, post_b + j) - betaln(post_a, post_b))

        mean, square = 1 - fall(k), 1 - 2 * fall(k) + fall(2 * k)
        within = np.full((pilot + 1, top + 1), np.nan)
        if k == 1:  # Var(mean of m) = p (1 - p) / m
            within[:, 1:] = (post_a * post_b / ((post_a + post_b) * (post_a + post_b + 1)))[:, None] / np.arange(1, top + 1)
        for m in range(k, top + 1) if k > 1 else ():
            c = np.arange(m + 1)
            # the estimate after c of m right, 1 - C(m - c, k) / C(m, k), and c's beta-binomial law given s
            free = np.clip(m - c - k, 0, None)
            miss = np.where(m - c >= k, np.exp(gammaln(m - c + 1) - gammaln(free + 1) - gammaln(m + 1) + gammaln(m - k + 1)), 0.0)
            law = np.exp(gammaln(m + 1) - gammaln(c + 1) - gammaln(m - c + 1)
                         + betaln(c + post_a[:, None], m - c + post_b[:, None]) - betaln(post_a, post_b)[:, None])
            within[:, m] = law @ (1 - miss) ** 2 - square
        value = np.array([1 - math.comb(pilot - x, k) / math.comb(pilot, k) for x in s])
        return cls(mean, square, within, value)

    def halfwidth(self, s: np.ndarray, freq: np.ndarray, problems: int, weight: np.ndarray, pilot: int,
                  size: np.ndarray, z: float = 0.0) -> float:
        """The dataset's predicted 95% CI half-width: problems with pilot count ``s[j]`` in share
        ``freq[j]``, each with the pilot's weight ``weight[j]`` and a second stage of ``size[j]``. A
        problem's value varies by Var(theta) (between problems) plus w^2 Var(pilot | p) + (1 - w)^2
        Var(second | p) (within: the two parts are uncorrelated), and the bootstrap's half-width is
        Z95 times the standard error of the mean over ``problems``. ``z`` standard deviations of the
        variance (``spread_sd``) are added: the half-width reached with that normal probability."""
        on_pilot = self.within[s, pilot]
        final = weight ** 2 * on_pilot + (1 - weight) ** 2 * self.within[s, size]
        var = self.between(s, freq) + float(freq @ final)
        if z:
            var += z * spread_sd(self.value[s], freq, on_pilot + final, problems)
        return Z95 * math.sqrt(max(var, 0.0) / problems)

    def between(self, s: np.ndarray, freq: np.ndarray) -> float:
        """Var(theta) over problems with pilot count ``s[j]`` in share ``freq[j]``."""
        return float(freq @ self.square[s] - (freq @ self.mean[s]) ** 2)


def _law(counts: np.ndarray, a: float, b: float, pilot: int) -> np.ndarray:
    """The share of problems with each pilot count: the counts', or the prior's when there are none."""
    if counts.sum() > 0:
        return counts / counts.sum()
    s = np.arange(pilot + 1)
    log = [math.lgamma(pilot + 1) - math.lgamma(x + 1) - math.lgamma(pilot - x + 1) + math.lgamma(a + x)
           + math.lgamma(b + pilot - x) - math.lgamma(a + b + pilot) + math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
           for x in s]
    return np.exp(np.array(log))


def _target_design(others: np.ndarray, pilot: int, k: int, halfwidth: float, floor: int, cap: int, z: float) -> TwoStage:
    """One problem's design for a half-width target, from the other problems' pilot counts only: the
    smallest Neyman scale at which the dataset's predicted half-width (``_PassK.halfwidth`` at ``z``,
    the others' counts standing for the dataset) reaches ``halfwidth``; every second stage at the cap
    when none does."""
    a, b = pilot_prior(others, pilot)
    sizes, moments = neyman(a, b, pilot, floor, cap), _PassK.of(a, b, pilot, k, max(cap, pilot))
    freq, problems, counts = _law(others, a, b, pilot), int(others.sum()) + 1, np.arange(pilot + 1)

    def reached(second: np.ndarray) -> bool:
        w = np.full(pilot + 1, pilot_weight(a, b, pilot, second))
        return moments.halfwidth(counts, freq, problems, w, pilot, second, z) <= halfwidth

    second = smallest_design(sizes, reached, cap, pilot)
    return TwoStage(pilot, tuple(int(m) for m in second), float(pilot_weight(a, b, pilot, second)))


def allocate_halfwidth(pilot_successes: Sequence[int], pilot: int, halfwidth: float, *, k: int = 1, floor: int = 1,
                       cap: int, confidence: float = 0.5) -> tuple[list[TwoStage], HalfWidth]:
    """Each problem's design after the pilot for a 95% CI half-width target on pass@k: the fewest
    second-stage samples (Neyman-shaped, ``floor``..``cap`` each) at which the dataset's half-width,
    predicted from the other problems' pilots under a beta prior fitted to them, reaches
    ``halfwidth``; the cap where it cannot. At the default ``confidence`` of 0.5 the prediction is
    of the expected half-width; above it, a margin of ``quantile(confidence)`` standard deviations
    of the predicted variance (``spread_sd``) is added, so that the run meets ``halfwidth`` with about
    that probability. As in ``allocate``, a problem's design does not depend on its own pilot, which
    keeps the two-stage estimate unbiased.

    Also returns the prediction from every pilot (the prior fitted to all of them, each problem's own
    design): under these designs, at the cap (both with the margin), and the floor no n goes below.
    """
    if pilot < 1 or floor < max(k, 1) or cap < floor or not 0 < halfwidth:
        raise ValueError(f"need pilot >= 1, floor >= k = {k}, cap >= floor and halfwidth > 0")
    z = quantile(confidence)
    got = np.asarray(pilot_successes, dtype=int)
    if got.size == 0 or got.min() < 0 or got.max() > pilot:
        raise ValueError(f"need one pilot count per problem, each between 0 and the pilot ({pilot})")
    counts = np.bincount(got, minlength=pilot + 1)
    tables = {}
    for s1 in np.unique(got):
        others = counts.copy()
        others[s1] -= 1
        tables[int(s1)] = _target_design(others, pilot, k, halfwidth, floor, cap, z)
    designs = [tables[int(s1)] for s1 in got]
    a, b = pilot_prior(counts, pilot)
    moments, freq = _PassK.of(a, b, pilot, k, max(cap, pilot)), _law(counts, a, b, pilot)
    weight = np.array([d.weight for d in designs])
    size = np.array([d.second[s] for d, s in zip(designs, got, strict=True)])
    # under the designs: each problem with its own pilot count and design; at the cap: by pilot count
    each = np.full(got.size, 1 / got.size)
    predicted = moments.halfwidth(got, each, got.size, weight, pilot, size, z)
    full, by_count = np.full(pilot + 1, cap), np.arange(pilot + 1)
    at_cap = moments.halfwidth(by_count, freq, got.size, np.full(pilot + 1, pilot_weight(a, b, pilot, full)), pilot, full, z)
    between = Z95 * math.sqrt(max(moments.between(by_count, freq), 0.0) / got.size)
    expected = moments.halfwidth(got, each, got.size, weight, pilot, size) if z else None
    return designs, HalfWidth(predicted, at_cap, between, expected)
