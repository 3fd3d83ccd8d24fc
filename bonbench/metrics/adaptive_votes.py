"""A half-width target on maj@k or bon@k (``--adaptive pilot=P,halfwidth=H`` with a maj@k or bon@k first).

A pilot's right-or-wrong counts predict pass@k's CI under a beta prior (``bonbench.metrics.adaptive``).
maj@k and bon@k also depend on the wrong answers a problem gives and on how its verifier ranks them,
so their prediction reads each pilot's answers (maj@k) or verifier scores (bon@k):

- **Within a problem.** Each pilot stands for its problem through a *plug-in law*: its own samples,
  the right ones sharing the chance p~ = (a + s) / (a + b + P) of a right sample (the posterior mean
  under the beta prior of ``bonbench.metrics.adaptive.pilot_prior``) and the wrong ones the rest. A
  pilot with no right sample adds one right sample of its own answer, scored as its best wrong one;
  a pilot with no wrong sample adds one wrong answer, scored as its worst right one. The variance of
  the fixed-m estimate (a U-statistic of degree k) under that law is exact (``within``):
  sum_c C(k, c) C(m - k, k - c) / C(m, k) zeta_c, with zeta_c from every k-tuple of its samples.
- **Between problems.** The sample variance of the pilots' own estimates, less their mean predicted
  variance on the pilot: what is left is the spread of the metric between problems (zero if negative).
- **The dataset.** The two added, as ``_PassK.halfwidth`` does for pass@k, with the margin of
  ``spread_sd`` at a confidence above 0.5.

The design is the one of ``allocate_halfwidth``: Neyman-shaped second stages by pilot count, the
pilot's weight of ``pilot_weight``, the smallest scale reaching the target (``smallest_design``). A
problem's design is computed from the *other* problems' pilots alone (their counts, answers and
scores), so its second-stage size is a fixed function of its own pilot count and its weight does not
depend on its own pilot at all: the two-stage estimate stays exactly unbiased (docs/adaptive.md;
tested by enumerating whole datasets). Each problem's leave-one-out prediction is the dataset's sums
less its own terms, so the allocation costs one pass over the problems per distinct pilot count.

What it does not do: grade, score or read runs (``bonbench.pipeline.adaptive`` passes the pilots), or
estimate the metric (``bonbench.metrics.maj``, ``pass_bon``).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

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


def zetas(h: np.ndarray, mass: np.ndarray, k: int) -> np.ndarray:
    """zeta_c = Var(E[h | c of the k samples]) for c = 0..k under i.i.d. draws of law ``mass``
    (zeta_0 = 0): the variance components of a U-statistic with kernel ``h`` (Hoeffding)."""
    t = mass.size
    conditional, out = [h], np.zeros(k + 1)
    for _ in range(k):  # E[h | the first c], c = k-1 .. 0: average the last sample out
        conditional.append(conditional[-1].reshape(-1, t) @ mass)
    theta = float(conditional[-1][0])
    weights = np.ones(1)
    for c in range(1, k + 1):
        weights = np.multiply.outer(weights, mass).ravel()
        out[c] = float(weights @ conditional[k - c] ** 2) - theta ** 2
    return np.clip(out, 0.0, None)


def within(metric: str, p: Pilot, p_right: float, k: int, table: np.ndarray, h: np.ndarray | None = None) -> np.ndarray:
    """The variance of the fixed-m estimate of the metric at k for m = 0..top under the pilot's
    plug-in law with right-sample chance ``p_right`` (module docstring); ``table`` is ``overlaps``."""
    z, cls, score, role = _law(metric, p)
    if h is None:
        h = kernel(metric, z, cls, score, k)
    n, right = z.size - 1, z[:-1] > 0.5
    mass = np.zeros(n + 1)
    if role == 1:  # no right sample: the added one carries the chance of a right sample
        mass[:n], mass[n] = (1 - p_right) / n, p_right
    elif role == -1:
        mass[:n], mass[n] = p_right / n, 1 - p_right
    else:
        mass[:n] = np.where(right, p_right / right.sum(), (1 - p_right) / (~right).sum())
    return table @ zetas(h, mass, k)


@dataclass(frozen=True)
class _Sums:
    """The dataset's sums that a problem's leave-one-out prediction subtracts its own terms from:
    ``tables[j, m]`` (problem j's ``within`` at m) and ``by_count[r, s, m]`` = sum over problems with
    pilot count s of value^r tables[j, m], r = 0, 1, 2."""

    tables: np.ndarray
    by_count: np.ndarray

    @classmethod
    def of(cls, tables: np.ndarray, values: np.ndarray, s: np.ndarray, pilot: int) -> _Sums:
        by_count = np.zeros((3, pilot + 1, tables.shape[1]))
        for r in range(3):
            np.add.at(by_count[r], s, values[:, None] ** r * tables)
        return cls(tables, by_count)


def _predict(sums: _Sums, values: np.ndarray, s: np.ndarray, drop: int | None, weight: float, second: np.ndarray,
             z: float) -> tuple[float, float]:
    """The predicted variance of a problem's value with Neyman sizes ``second`` and the pilot's weight
    ``weight``, from every problem but ``drop`` (module docstring), with ``z`` margins of its standard
    deviation; and the between-problem part alone."""
    keep = np.ones(values.size, dtype=bool)
    if drop is not None:
        keep[drop] = False
    n = int(keep.sum())
    if n == 0:
        return math.inf, 0.0
    v = values[keep]
    mean = float(v.mean())
    spread = float(((v - mean) ** 2).sum() / (n - 1)) if n > 1 else 0.0
    by_count = sums.by_count.copy()
    if drop is not None:
        by_count[:, s[drop]] -= values[drop] ** np.arange(3)[:, None] * sums.tables[drop]
    pilot = second.size - 1
    rows = np.arange(pilot + 1)
    on_pilot, at_size = by_count[:, rows, pilot], by_count[:, rows, second]  # [r, s]
    between = max(spread - on_pilot[0].sum() / n, 0.0)
    final = weight ** 2 * on_pilot + (1 - weight) ** 2 * at_size
    var = between + final[0].sum() / n
    if z:
        # sum over the problems of (value - mean)^2 (its noise on the pilot and in the end): ``spread_sd``
        noise = on_pilot + final
        centred = float((noise[2] - 2 * mean * noise[1] + mean ** 2 * noise[0]).sum())
        var += z * 2 * math.sqrt(max(centred, 0.0)) / n
    return var, between


@dataclass(frozen=True)
class _Pilots:
    """Every problem's pilot with what the prediction reads of it once: its count of right samples,
    its own estimate and its plug-in law's kernel over k-tuples."""

    metric: str
    pilots: tuple[Pilot, ...]
    k: int
    table: np.ndarray
    s: np.ndarray
    values: np.ndarray
    kernels: tuple[np.ndarray, ...]

    @classmethod
    def of(cls, metric: str, pilots: Sequence[Pilot], k: int, top: int) -> _Pilots:
        return cls(metric, tuple(pilots), k, overlaps(k, top), np.array([int(sum(c > 0.5 for c in p.correct)) for p in pilots]),
                   np.array([p.value(metric, k) for p in pilots]),
                   tuple(kernel(metric, *_law(metric, p)[:3], k) for p in pilots))

    def sums(self, a: float, b: float) -> _Sums:
        """The sums under Beta(a, b): each pilot's right-sample chance its posterior mean."""
        pilot = len(self.pilots[0].correct)
        p_right = (a + self.s) / (a + b + pilot)
        tables = np.array([within(self.metric, p, float(q), self.k, self.table, h)
                           for p, q, h in zip(self.pilots, p_right, self.kernels, strict=True)])
        return _Sums.of(tables.reshape(len(self.pilots), -1), self.values, self.s, pilot)


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
    read = _Pilots.of(metric, pilots, k, max(cap, pilot))
    counts, problems = np.bincount(read.s, minlength=pilot + 1), len(pilots)
    designs: dict[int, TwoStage] = {}
    for s1 in np.unique(read.s):
        others = counts.copy()
        others[s1] -= 1
        a, b = pilot_prior(others, pilot)
        sums = read.sums(a, b)
        for i in np.flatnonzero(read.s == s1):
            designs[int(i)] = _design(read, sums, int(i), (a, b), floor, cap, halfwidth, z)
    chosen = [designs[i] for i in range(problems)]
    return chosen, _dataset(chosen, read, counts, cap, z)


def _design(read: _Pilots, sums: _Sums, i: int, prior: tuple[float, float], floor: int, cap: int, halfwidth: float,
            z: float) -> TwoStage:
    """Problem ``i``'s design: the smallest Neyman scale at which the prediction from every other
    problem's pilot reaches ``halfwidth`` (every second stage at the cap when none does)."""
    (a, b), pilot, problems = prior, len(read.pilots[0].correct), len(read.pilots)

    def reached(second: np.ndarray) -> bool:
        var, _ = _predict(sums, read.values, read.s, i, pilot_weight(a, b, pilot, second), second, z)
        return Z95 * math.sqrt(var / problems) <= halfwidth

    second = smallest_design(neyman(a, b, pilot, floor, cap), reached, cap, pilot)
    return TwoStage(pilot, tuple(int(m) for m in second), float(pilot_weight(a, b, pilot, second)))


def _dataset(designs: list[TwoStage], read: _Pilots, counts: np.ndarray, cap: int, z: float) -> HalfWidth:
    """The prediction from every pilot: the prior fitted to all of them, each problem with its own design."""
    pilot, problems = counts.size - 1, len(designs)
    a, b = pilot_prior(counts, pilot)
    sums = read.sums(a, b)
    w = np.array([d.weight for d in designs])
    size = np.array([d.second[x] for d, x in zip(designs, read.s, strict=True)])
    own, values = np.arange(problems), read.values

    def each(z_: float) -> float:
        final = w ** 2 * sums.tables[own, pilot] + (1 - w) ** 2 * sums.tables[own, size]
        spread = float(values.var(ddof=1)) if problems > 1 else 0.0
        var = max(spread - float(sums.tables[:, pilot].mean()), 0.0) + float(final.mean())
        if z_:
            noise = sums.tables[:, pilot] + final
            var += z_ * 2 * math.sqrt(max(float(((values - values.mean()) ** 2 * noise).sum()), 0.0)) / problems
        return Z95 * math.sqrt(max(var, 0.0) / problems)

    full = np.full(pilot + 1, cap)
    at_cap, between = _predict(sums, values, read.s, None, pilot_weight(a, b, pilot, full), full, z)
    return HalfWidth(each(z), Z95 * math.sqrt(at_cap / problems), Z95 * math.sqrt(between / problems),
                     each(0.0) if z else None)
