"""A half-width target on maj@k or bon@k (``--adaptive pilot=P,halfwidth=H`` with a maj@k or bon@k first).

A pilot's right-or-wrong counts predict pass@k's CI under a beta prior (``bonbench.metrics.adaptive``).
maj@k and bon@k also depend on the wrong answers a problem gives and on how its verifier ranks them,
so their prediction reads each pilot's answers (maj@k) or verifier scores (bon@k):

- **Within a problem.** Each pilot stands for its problem through a *plug-in law*: its own samples,
  the right ones sharing a chance p of a right sample and the wrong ones the rest. A pilot with no
  right sample adds one right sample of its own answer, scored as its best wrong one; a pilot with
  no wrong sample adds one wrong answer, scored as its worst right one. The variance of the fixed-m
  estimate (a U-statistic of degree k) under that law is exact (``within``):
  sum_c C(k, c) C(m - k, k - c) / C(m, k) zeta_c, with zeta_c from every k-tuple of its samples.
  It is averaged over p drawn from the pilot's posterior Beta(a + s, b + P - s) under the beta prior
  of ``bonbench.metrics.adaptive.pilot_prior`` (``posterior``: exact polynomial interpolation).
- **Between problems.** The variance over problems of the metric's value under each law, with its
  posterior mean and second moment, as ``_PassK.between`` does for pass@k.
- **The dataset.** The two added, as ``_PassK.halfwidth`` does for pass@k, with the margin of
  ``spread_sd`` at a confidence above 0.5.

The design is the one of ``allocate_halfwidth``: Neyman-shaped second stages by pilot count, the
pilot's weight of ``pilot_weight``, the smallest scale reaching the target (``smallest_design``). A
problem's design is computed from the *other* problems' pilots alone (their counts, answers and
scores), so its second-stage size is a fixed function of its own pilot count and its weight does not
depend on its own pilot at all: the two-stage estimate stays exactly unbiased (docs/adaptive.md;
tested by enumerating whole datasets). The pilots are grouped by plug-in law (``_key``), each law
computed once from a pilot built from its key (``_canonical``), so a problem's design is a function
of the counts of the others' laws alone, and problems with the same law share one.

What it does not do: grade, score or read runs (``bonbench.pipeline.adaptive`` passes the pilots), or
estimate the metric (``bonbench.metrics.maj``, ``pass_bon``).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bonbench.metrics.adaptive import (
    Z95,
    HalfWidth,
    TwoStage,
    neyman,
    pilot_prior,
    pilot_weight,
    quantile,
    smallest_design,
)
from bonbench.metrics.maj import maj_at_k
from bonbench.metrics.pass_bon import bon_at_k

METRICS = ("maj", "bon")
MAX_TUPLES = 200_000  # k-tuples of one pilot's plug-in law: (pilot + 1)^k, enumerated for each problem


@dataclass(frozen=True)
class Pilot:
    """One problem's pilot as the prediction reads it: each sample's correctness (1 or 0), the class
    it votes for (maj@k; ``None`` abstains) or its verifier score (bon@k)."""

    correct: tuple[float, ...]
    answers: tuple[Hashable | None, ...] = ()
    scores: tuple[float, ...] = ()

    def value(self, metric: str, k: int) -> float:
        """The pilot's own fixed-n estimate of the metric at k (the run's estimator)."""
        if metric == "maj":
            return maj_at_k(self.answers, self.correct, k)
        return bon_at_k(self.scores, self.correct, k)


def tuples_needed(pilot: int, k: int) -> int:
    """How many k-tuples one pilot's plug-in law has: its samples and one sample it adds."""
    return (pilot + 1) ** k


def _law(metric: str, p: Pilot) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The plug-in law's samples (module docstring): correctness, vote class (-1 abstains), score, and
    the last one's role: 1 if it stands for a right sample the pilot lacks, -1 a wrong one, 0 neither
    (it then gets no mass)."""
    z = np.asarray(p.correct, dtype=float)
    right = z > 0.5
    if metric == "maj":
        names = {a: i for i, a in enumerate(dict.fromkeys(a for a in p.answers if a is not None))}
        cls = np.array([-1 if a is None else names[a] for a in p.answers], dtype=int)
        score = np.zeros(z.size)
    else:
        cls, score = np.zeros(z.size, dtype=int), np.asarray(p.scores, dtype=float)
    role = 1 if not right.any() else -1 if right.all() else 0
    extra_z = 1.0 if role == 1 else 0.0
    extra_score = score.max() if role == 1 else score.min()  # beside the best wrong / the worst right
    return np.append(z, extra_z), np.append(cls, cls.max(initial=-1) + 1), np.append(score, extra_score), role


def kernel(metric: str, z: np.ndarray, cls: np.ndarray, score: np.ndarray, k: int) -> np.ndarray:
    """The metric of every ordered k-tuple of samples (row-major over (T,) * k): bon@k, the mean
    correctness of the top-scored tie block; maj@k, the mean correctness of the plurality class, ties
    shared, abstainers not voting, 0 without a vote (``maj_at_k`` and ``bon_at_k`` at n = k)."""
    idx = np.indices((z.size,) * k).reshape(k, -1).T
    right = z[idx]
    if metric == "bon":
        s = score[idx]
        top = s == s.max(axis=1, keepdims=True)
        return (right * top).sum(axis=1) / top.sum(axis=1)
    votes = cls[idx]
    classes = np.unique(cls[cls >= 0])
    if classes.size == 0:
        return np.zeros(idx.shape[0])
    count = np.stack([(votes == c).sum(axis=1) for c in classes], axis=1)
    total = np.stack([((votes == c) * right).sum(axis=1) for c in classes], axis=1)
    most = count.max(axis=1, keepdims=True)
    wins = (count == most) & (most > 0)
    value = total / np.maximum(count, 1)
    return np.where(most[:, 0] > 0, (wins * value).sum(axis=1) / np.maximum(wins.sum(axis=1), 1), 0.0)


def overlaps(k: int, top: int) -> np.ndarray:
    """O[m, c] = C(k, c) C(m - k, k - c) / C(m, k): the chance that two k-subsets of m share c
    samples, m = 0..top (nan rows below k)."""
    out = np.full((top + 1, k + 1), np.nan)
    for m in range(k, top + 1):
        out[m] = [math.comb(k, c) * math.comb(m - k, k - c) / math.comb(m, k) for c in range(k + 1)]
    return out


def zetas(h: np.ndarray, mass: np.ndarray, k: int) -> tuple[np.ndarray, float]:
    """zeta_c = Var(E[h | c of the k samples]) for c = 0..k under i.i.d. draws of law ``mass``
    (zeta_0 = 0): the variance components of a U-statistic with kernel ``h`` (Hoeffding); and E[h]."""
    t = mass.size
    conditional, out = [h], np.zeros(k + 1)
    for _ in range(k):  # E[h | the first c], c = k-1 .. 0: average the last sample out
        conditional.append(conditional[-1].reshape(-1, t) @ mass)
    theta = float(conditional[-1][0])
    weights = np.ones(1)
    for c in range(1, k + 1):
        weights = np.multiply.outer(weights, mass).ravel()
        out[c] = float(weights @ conditional[k - c] ** 2) - theta ** 2
    return np.clip(out, 0.0, None), theta


def _mass(z: np.ndarray, role: int, p_right: float) -> np.ndarray:
    """The plug-in law's masses (module docstring): the right samples share ``p_right``, the wrong ones the rest."""
    n, right = z.size - 1, z[:-1] > 0.5
    mass = np.zeros(n + 1)
    if role == 1:  # no right sample: the added one carries the chance of a right sample
        mass[:n], mass[n] = (1 - p_right) / n, p_right
    elif role == -1:
        mass[:n], mass[n] = p_right / n, 1 - p_right
    else:
        mass[:n] = np.where(right, p_right / right.sum(), (1 - p_right) / (~right).sum())
    return mass


def within(metric: str, p: Pilot, p_right: float, k: int, table: np.ndarray,
           h: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """The variance of the fixed-m estimate of the metric at k for m = 0..top under the pilot's
    plug-in law with right-sample chance ``p_right`` (module docstring; ``table`` is ``overlaps``),
    and the metric's value under that law."""
    z, cls, score, role = _law(metric, p)
    if h is None:
        h = kernel(metric, z, cls, score, k)
    parts, theta = zetas(h, _mass(z, role, p_right), k)
    return table @ parts, theta


def posterior(metric: str, p: Pilot, a: float, b: float, k: int, table: np.ndarray,
              h: np.ndarray | None = None) -> tuple[np.ndarray, float, float]:
    """``within``'s variance and the metric's first two moments, averaged over the right-sample chance
    drawn from the pilot's posterior Beta(a + s, b + P - s). All three are polynomials of degree <= 2k
    in the chance (the law's masses are linear in it), so they are interpolated exactly on 2k + 1
    Chebyshev nodes and averaged with the beta's moments. The plug-in at the posterior mean would miss
    the curvature: maj@k's and bon@k's variance rises steeply with the chance where the pilots are
    least sure of it."""
    right = sum(c > 0.5 for c in p.correct)
    post_a, post_b = a + right, b + len(p.correct) - right
    degree = 2 * k
    nodes = (1 - np.cos((2 * np.arange(degree + 1) + 1) * math.pi / (2 * (degree + 1)))) / 2
    z, cls, score, role = _law(metric, p)
    if h is None:
        h = kernel(metric, z, cls, score, k)
    rows = []
    for node in nodes:
        parts, theta = zetas(h, _mass(z, role, float(node)), k)
        rows.append(np.concatenate([table @ parts, [theta, theta ** 2]]))
    at = np.nan_to_num(np.array(rows), nan=0.0)  # the table's rows below k are nan: no size below k is read
    coefficients = np.polynomial.polynomial.polyfit(nodes, at, degree)  # [power, column]
    moments = np.cumprod(np.concatenate([[1.0], (post_a + np.arange(degree)) / (post_a + post_b + np.arange(degree))]))
    mean = moments @ coefficients  # E[p^j] = prod_{i < j} (A + i) / (A + B + i)
    var = np.where(np.isnan(table[:, 0]), np.nan, mean[:-2])
    return var, float(mean[-2]), float(mean[-1])


def _key(metric: str, p: Pilot) -> tuple[object, ...]:
    """What a pilot's plug-in law depends on, up to the order of its samples: maj@k, the classes'
    right-or-wrong members and the abstainers; bon@k, the samples' score ranks (ties kept) and verdicts."""
    right = tuple(int(c > 0.5) for c in p.correct)
    if metric == "maj":
        groups: dict[Hashable | None, list[int]] = {}
        for c, a in zip(right, p.answers, strict=True):
            groups.setdefault(a, []).append(c)
        abstain = tuple(sorted(groups.pop(None, [])))
        return tuple(sorted(tuple(sorted(g)) for g in groups.values())), abstain
    rank = {v: i for i, v in enumerate(sorted(set(p.scores)))}
    return tuple(sorted((rank[v], c) for v, c in zip(p.scores, right, strict=True)))


def _canonical(metric: str, key: Any) -> Pilot:
    """The pilot that stands for every pilot of ``key`` (``_key``): built from the key alone, so that
    no problem's own pilot is read through another's (the sums stay a function of the others)."""
    if metric == "maj":
        groups, abstain = key
        answers: list[str | None] = [f"class {g}" for g, members in enumerate(groups) for _ in members]
        answers += [None] * len(abstain)
        right = [c for members in groups for c in members] + list(abstain)
        return Pilot(tuple(float(c) for c in right), tuple(answers))
    return Pilot(tuple(float(c) for _, c in key), scores=tuple(float(r) for r, _ in key))


@dataclass(frozen=True)
class _Laws:
    """The distinct plug-in laws of the pilots (``_key``), in a fixed order, each with the pilot that
    stands for it (``_canonical``), its kernel, its count of right samples and its own estimate; and which law each
    problem's pilot has. Problems with the same law share their design: removing either from the
    others leaves the same others."""

    metric: str
    k: int
    table: np.ndarray
    pilots: tuple[Pilot, ...]
    kernels: tuple[np.ndarray, ...]
    s: np.ndarray
    values: np.ndarray
    of_problem: np.ndarray

    @classmethod
    def of(cls, metric: str, pilots: Sequence[Pilot], k: int, top: int) -> _Laws:
        keys = [_key(metric, p) for p in pilots]
        order = sorted(set(keys), key=repr)
        laws = [_canonical(metric, key) for key in order]
        index = {key: j for j, key in enumerate(order)}
        return cls(metric, k, overlaps(k, top), tuple(laws), tuple(kernel(metric, *_law(metric, p)[:3], k) for p in laws),
                   np.array([int(sum(c > 0.5 for c in p.correct)) for p in laws]),
                   np.array([p.value(metric, k) for p in laws]), np.array([index[key] for key in keys]))

    def counts(self) -> np.ndarray:
        """How many problems have each law."""
        return np.bincount(self.of_problem, minlength=len(self.pilots))

    def moments(self, a: float, b: float) -> _Moments:
        """Each law's ``posterior`` under Beta(a, b)."""
        got = [posterior(self.metric, p, a, b, self.k, self.table, h) for p, h in zip(self.pilots, self.kernels, strict=True)]
        return _Moments(np.array([g[0] for g in got]), np.array([g[1] for g in got]), np.array([g[2] for g in got]))


@dataclass(frozen=True)
class _Moments:
    """Each law's expected variance of the fixed-m estimate (``tables[law, m]``) and its metric's
    expected value and square, under one prior."""

    tables: np.ndarray
    first: np.ndarray
    second: np.ndarray


def _predict(laws: _Laws, moments: _Moments, count: np.ndarray, weight: np.ndarray, size: np.ndarray,
             z: float) -> tuple[float, float]:
    """The predicted variance of a problem's value over ``count[law]`` problems of each law, each with
    the pilot's weight ``weight[law]`` and a second stage of ``size[law]``, with ``z`` margins of its
    standard deviation (``spread_sd``); and the variance between problems alone. Sums over the laws
    in their fixed order, so that the result depends on the counts alone."""
    n = int(count.sum())
    if n == 0:
        return math.inf, 0.0
    between = max(float(count @ moments.second / n - (count @ moments.first / n) ** 2), 0.0)
    pilot = len(laws.pilots[0].correct)
    on_pilot, at_size = moments.tables[:, pilot], moments.tables[np.arange(count.size), size]
    final = weight ** 2 * on_pilot + (1 - weight) ** 2 * at_size
    var = between + float(count @ final) / n
    if z:
        mean = float(count @ laws.values) / n
        var += z * 2 * math.sqrt(max(float(count @ ((laws.values - mean) ** 2 * (on_pilot + final))), 0.0)) / n
    return var, between


def allocate_halfwidth_votes(pilots: Sequence[Pilot], metric: str, halfwidth: float, *, k: int, floor: int, cap: int,
                             confidence: float = 0.5) -> tuple[list[TwoStage], HalfWidth]:
    """Each problem's design after the pilot for a 95% CI half-width target on ``metric``@k (maj or
    bon), from the other problems' pilots (module docstring); and the prediction from every pilot,
    as ``allocate_halfwidth`` returns it: under the designs and at the cap (with the margin of
    ``confidence``), from the spread between problems alone, and the expected half-width."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    pilot = len(pilots[0].correct) if pilots else 0
    if pilot < k or floor < k or cap < floor or not 0 < halfwidth or any(len(p.correct) != pilot for p in pilots):
        raise ValueError(f"need one pilot of the same size >= k = {k} per problem, floor >= k, cap >= floor and halfwidth > 0")
    if tuples_needed(pilot, k) > MAX_TUPLES:
        raise ValueError(f"a pilot of {pilot} at k = {k} has {tuples_needed(pilot, k)} k-tuples, above {MAX_TUPLES}")
    z = quantile(confidence)
    laws = _Laws.of(metric, pilots, k, max(cap, pilot))
    count, problems = laws.counts(), len(pilots)
    by_right = np.bincount(laws.s, weights=count, minlength=pilot + 1).astype(int)
    designs: dict[int, TwoStage] = {}
    moments: dict[int, tuple[tuple[float, float], _Moments]] = {}
    for law in np.flatnonzero(count):
        others = count.copy()
        others[law] -= 1
        s1 = int(laws.s[law])
        if s1 not in moments:  # the prior, from the others' right counts: one per count
            right = by_right.copy()
            right[s1] -= 1
            prior = pilot_prior(right, pilot)
            moments[s1] = prior, laws.moments(*prior)
        prior, m = moments[s1]
        designs[int(law)] = _design(laws, m, others, prior, floor, cap, halfwidth, z, problems)
    chosen = [designs[int(law)] for law in laws.of_problem]
    return chosen, _dataset(laws, designs, count, by_right, cap, z)


def _design(laws: _Laws, moments: _Moments, others: np.ndarray, prior: tuple[float, float], floor: int, cap: int,
            halfwidth: float, z: float, problems: int) -> TwoStage:
    """The design of a problem whose others are ``others[law]`` problems of each law: the smallest
    Neyman scale at which their prediction reaches ``halfwidth`` (every second stage at the cap when
    none does)."""
    (a, b), pilot = prior, len(laws.pilots[0].correct)

    def reached(second: np.ndarray) -> bool:
        weight = np.full(others.size, pilot_weight(a, b, pilot, second))
        var, _ = _predict(laws, moments, others, weight, second[laws.s], z)
        return Z95 * math.sqrt(var / problems) <= halfwidth

    second = smallest_design(neyman(a, b, pilot, floor, cap), reached, cap, pilot)
    return TwoStage(pilot, tuple(int(m) for m in second), float(pilot_weight(a, b, pilot, second)))


def _dataset(laws: _Laws, designs: dict[int, TwoStage], count: np.ndarray, by_right: np.ndarray, cap: int,
             z: float) -> HalfWidth:
    """The prediction from every pilot: the prior fitted to all of them, each law with its own design."""
    pilot, problems = by_right.size - 1, int(count.sum())
    a, b = pilot_prior(by_right, pilot)
    moments = laws.moments(a, b)
    own = [designs.get(j) for j in range(count.size)]
    weight = np.array([0.0 if d is None else d.weight for d in own])
    size = np.array([pilot if d is None else d.second[s] for d, s in zip(own, laws.s, strict=True)])
    full = np.full(count.size, cap)
    at_cap, between = _predict(laws, moments, count, np.full(count.size, pilot_weight(a, b, pilot, np.full(pilot + 1, cap))),
                               full, z)

    def halfwidth(var: float) -> float:
        return Z95 * math.sqrt(max(var, 0.0) / problems)

    return HalfWidth(halfwidth(_predict(laws, moments, count, weight, size, z)[0]), halfwidth(at_cap), halfwidth(between),
                     halfwidth(_predict(laws, moments, count, weight, size, 0.0)[0]) if z else None)
