"""Weighted majority vote, wmaj@k: exact where affordable, otherwise an unbiased Monte Carlo with its error.

wmaj@k (search-and-learn's weighted best-of-N, NeMo-Skills' rm_majority@k) on one k-subset S: every
sample with a non-None answer votes for its answer class with weight = its verifier score; the class
with the largest total weight in S wins (weights equal within a relative 1e-9 of the larger tie, so
that float sums taken in another order still tie; ties broken uniformly); the winner's value is the
mean ``correct`` of all its members in the problem, as in maj@k. ``None`` answers take a slot but do
not vote; a subset without votes scores 0; a class present in S with weight 0 (score-0 voters) is
present and can win a tie at 0; absent classes never win. Scores must be finite and >= 0.

``wmaj_at_k`` is the definition: the mean over every k-subset, enumerated (cost C(n, k) k).
``wmaj_curve`` is exact (Monte Carlo variance 0) wherever it can be: C(n, k) <= ``max_exact_subsets``
(or <= n: k = 1, n-1, n) by enumeration; a problem with one answer class, or with equal positive
scores on every voter (wmaj@k = maj@k, ``bonbench.metrics.maj``); no voters (0). Elsewhere it
averages over M uniformly random permutations of the problem's samples, shared by every k: the
k-prefix of a uniform permutation is a uniform k-subset, so each k's estimate is unbiased. Since
weights are non-negative, class weights only grow along a permutation, so the top weight is a
running maximum; each step is a few array operations over all problems' permutations at once.

Choosing M: a pilot of ``PILOT_DRAWS`` permutations per problem estimates the per-problem Monte Carlo
variances; M is the smallest power of two that brings the dataset-level Monte Carlo standard error
(``SampledCurve.dataset_mc_se``) below ``rel_mc`` / ``_SAFETY`` times the normal-approximation 95%
CI half-width (1.96 sd over problems / sqrt(P)) at every sampled k, capped at ``max_draws``. The
reported values average M fresh permutations drawn after the pilot, never the pilot's: M depends
only on the pilot, so the estimate stays exactly unbiased (a stopping rule that looked at the
reported draws themselves would not be). ``mc_var`` is those draws' sample variance / M.

Reproducibility: problem p's permutations come from a generator seeded with (seed, crc32 of
keys[p]), always pilot first, so a problem's values depend only on its own samples, its key, the
seed and M: scored alone or among others, with the same M, it gets the same values.

What it does not do: maj@k itself, bootstraps, metric names, I/O; answers are compared with
``==``/hash, never canonicalised here.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain, combinations, islice

import numpy as np

from bonbench.metrics.bootstrap import Z95
from bonbench.metrics.checks import as_values, check_k, expand_ks
from bonbench.metrics.maj import maj_curve
from bonbench.metrics.montecarlo import SampledCurve

TIE_RTOL = 1e-9  # class weights within this relative distance of the top weight tie
PILOT_DRAWS = 32  # permutations per problem that choose M; never part of the estimate
_SAFETY = 1.25  # aim the pilot's prediction this far below the target: the pilot's variances are estimates
_CHUNK = 1 << 15  # subsets per enumeration batch in wmaj_at_k (bounded memory for any C(n, k))


@dataclass(frozen=True)
class _Votes:
    """One problem: class id per sample (-1 abstains), score per sample (0 where abstaining) and the
    value of each class (mean ``correct`` of all its members)."""

    cls: np.ndarray
    score: np.ndarray
    value: np.ndarray

    @property
    def n(self) -> int:
        return int(self.cls.size)


def _parse(answers: Sequence[Hashable | None], correct: Sequence[float] | np.ndarray,
           scores: Sequence[float] | np.ndarray) -> _Votes:
    z = as_values(correct)
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if len(answers) != z.size or s.size != z.size:
        raise ValueError(f"answers, correct and scores differ in length ({len(answers)}, {z.size}, {s.size})")
    if not np.all(np.isfinite(s)) or np.any(s < 0):
        raise ValueError("wmaj@k needs non-negative verifier scores (finite, >= 0): use a verifier whose scores "
                         "are probabilities or rewards >= 0")
    ids: dict[Hashable, int] = {}
    cls = np.array([-1 if a is None else ids.setdefault(a, len(ids)) for a in answers], dtype=np.int64)
    voter = cls >= 0
    members = np.bincount(cls[voter], minlength=len(ids))
    value = np.bincount(cls[voter], weights=z[voter], minlength=len(ids)) / np.maximum(members, 1)
    return _Votes(cls, np.where(voter, s, 0.0), value)


def _subset_values(weight: np.ndarray, present: np.ndarray, value: np.ndarray, top: np.ndarray | None = None) -> np.ndarray:
    """Per row of class weights [R, m] (with presence): the mean value of the classes tied at the top
    weight among the present ones; 0 for a row with no present class. ``top``: the rows' top weights
    when the caller already knows them."""
    if top is None:
        top = np.where(present, weight, -1.0).max(axis=1, initial=-1.0)
    tied = present & (weight >= (top * (1.0 - TIE_RTOL))[:, None])
    n_tied = tied.sum(axis=1)
    total = np.where(tied, value, 0.0).sum(axis=1)
    return np.where(n_tied > 0, total / np.maximum(n_tied, 1), 0.0)


def _tally(v: _Votes, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Class weights and presence [R, m] of the subsets idx [R, k] (abstainers go to a dropped column)."""
    m = v.value.size
    rows = idx.shape[0]
    flat = (np.arange(rows)[:, None] * (m + 1) + np.where(v.cls[idx] < 0, m, v.cls[idx])).ravel()
    weight = np.bincount(flat, weights=v.score[idx].ravel(), minlength=rows * (m + 1)).reshape(rows, m + 1)
    count = np.bincount(flat, minlength=rows * (m + 1)).reshape(rows, m + 1)
    return weight[:, :m], count[:, :m] > 0


def _combination_chunks(n: int, k: int) -> Iterator[np.ndarray]:
    it = chain.from_iterable(combinations(range(n), k))
    left = math.comb(n, k)
    while left:
        rows = min(left, _CHUNK)
        yield np.fromiter(islice(it, rows * k), dtype=np.int64, count=rows * k).reshape(rows, k)
        left -= rows


@lru_cache(maxsize=8)
def _all_combinations(n: int, k: int) -> np.ndarray:
    """Every k-subset of range(n) as rows [C(n, k), k] (cached: problems share n)."""
    out = np.concatenate(list(_combination_chunks(n, k)))
    out.setflags(write=False)
    return out


def _enumerated(v: _Votes, chunks: Iterator[np.ndarray] | list[np.ndarray]) -> float:
    total, count = 0.0, 0
    for idx in chunks:
        total += float(_subset_values(*_tally(v, idx), v.value).sum())
        count += idx.shape[0]
    return total / count


def wmaj_at_k(answers: Sequence[Hashable | None], correct: Sequence[float], scores: Sequence[float], k: int) -> float:
    """Exact wmaj@k of one problem by enumerating all C(n, k) subsets (the definition; cost C(n, k) k,
    so use ``wmaj_curve`` for large n). ValueError for k > n, mismatched lengths, non-finite values or
    a negative score."""
    v = _parse(answers, correct, scores)
    check_k(k, v.n)
    return _enumerated(v, _combination_chunks(v.n, k))


def _seed_for(seed: int, key: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(key.encode("utf-8"))])


def _prefix_values(votes: list[_Votes], rngs: list[np.random.Generator], draws: int,
                   ks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of the mean over ``draws`` random permutations per problem (all of one n), of
    the value of each permutation's k-prefix, for every k in ``ks``: two [len(votes), len(ks)] arrays."""
    n = votes[0].n
    m = max(1, max(v.value.size for v in votes))
    # padded classes: column m takes the abstainers (never present), absent columns have value 0
    order = np.stack([r.random((draws, n)).argsort(axis=1) for r in rngs])  # [P, M, n]
    cls = np.stack([np.where(v.cls < 0, m, v.cls) for v in votes])
    seq_cls = np.take_along_axis(cls[:, None, :], order, axis=2).reshape(-1, n)
    seq_score = np.take_along_axis(np.stack([v.score for v in votes])[:, None, :], order, axis=2).reshape(-1, n)
    value = np.zeros((len(votes), m))
    for p, v in enumerate(votes):
        value[p, : v.value.size] = v.value
    value = np.repeat(value, draws, axis=0)
    rows = np.arange(seq_cls.shape[0])
    weight = np.zeros((rows.size, m + 1))
    present = np.zeros((rows.size, m + 1), dtype=bool)
    top = np.full(rows.size, -1.0)  # -1: no class present yet
    want = {int(k): j for j, k in enumerate(ks)}
    mean = np.empty((len(votes), ks.size))
    var = np.empty((len(votes), ks.size))
    for step in range(n):
        c = seq_cls[:, step]
        weight[rows, c] += seq_score[:, step]
        present[rows, c] = True
        # weights only grow, so the top weight is the running max of the updated classes (abstainers excluded)
        top = np.where(c < m, np.maximum(top, weight[rows, c]), top)
        j = want.get(step + 1)
        if j is None:
            continue
        vals = _subset_values(weight[:, :m], present[:, :m], value, top).reshape(len(votes), draws)
        mean[:, j] = vals.mean(axis=1)
        var[:, j] = vals.var(axis=1, ddof=1) / draws if draws > 1 else np.inf
    return mean, var


def _draws_needed(values: np.ndarray, mc_var: np.ndarray, cols: np.ndarray, rel_mc: float) -> float:
    """Permutations per problem that the pilot (``values``, ``mc_var`` from PILOT_DRAWS draws) predicts
    for a dataset Monte Carlo SE below rel_mc / _SAFETY times the CI half-width at every column in ``cols``."""
    se = SampledCurve(values, mc_var, PILOT_DRAWS).dataset_mc_se()[cols]
    sub = values[:, cols]
    count = (~np.isnan(sub)).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        sd = np.nanstd(sub, axis=0, ddof=1) if sub.shape[0] > 1 else np.full(cols.size, np.nan)
        half = Z95 * sd / np.sqrt(count)
    # a column whose CI has no width (one problem, or every value equal) sets no requirement
    ok = (se > 0) & (half > 0)
    if not ok.any():
        return 0.0
    return float(PILOT_DRAWS * np.max((se[ok] * _SAFETY / (rel_mc * half[ok])) ** 2))


def wmaj_curve(answers: Sequence[Sequence[Hashable | None]], correct: Sequence[Sequence[float]],
               scores: Sequence[Sequence[float]], ks: Sequence[int], *, keys: Sequence[str], seed: int = 0,
               max_exact_subsets: int = 20_000, rel_mc: float = 0.1, max_draws: int = 1024,
               draws: int | None = None) -> SampledCurve:
    """wmaj@k for every problem (rows) and every k in ``ks``: exact where it can be, else Monte Carlo.

    ``keys``: one unique id per problem (its problem id), which seeds its permutations with ``seed``.
    Exact: C(n, k) <= max(max_exact_subsets, n) (enumerated), one answer class or equal positive
    scores (maj@k), no voters (0). Elsewhere the mean over M random permutations per problem, M chosen
    by a pilot for a dataset Monte Carlo SE below ``rel_mc`` times the 95% CI half-width (at most
    ``max_draws``), or fixed by ``draws``. NaN where a problem has fewer than k samples.
    """
    P = len(correct)
    if not len(answers) == P == len(scores) == len(keys):
        raise ValueError("answers, correct, scores and keys differ in the number of problems")
    if len(set(keys)) != P:
        raise ValueError("wmaj@k needs one distinct key per problem (its id seeds the problem's draws)")
    if not rel_mc > 0 or max_draws < 2 or (draws is not None and draws < 2):
        raise ValueError("wmaj@k needs rel_mc > 0, max_draws >= 2 and draws >= 2 (or None)")
    votes = [_parse(a, c, s) for a, c, s in zip(answers, correct, scores, strict=True)]
    kk = expand_ks(ks, max((v.n for v in votes), default=0))
    values = np.full((P, kk.size), np.nan)
    mc_var = np.zeros((P, kk.size))
    as_maj: list[int] = []
    sampled: dict[int, dict[int, list[int]]] = {}  # n -> {problem: columns to sample}
    for p, v in enumerate(votes):
        cols = np.flatnonzero(kk <= v.n).tolist()
        voted = v.score[v.cls >= 0]
        if voted.size == 0:
            values[p, cols] = 0.0
        elif v.value.size == 1 or (voted[0] > 0 and np.all(voted == voted[0])):
            as_maj.append(p)  # one class, or equal positive weights: the heaviest class is the largest
        else:
            for col in cols:
                k = int(kk[col])
                subsets = math.comb(v.n, k)
                if subsets > max(max_exact_subsets, v.n):
                    sampled.setdefault(v.n, {}).setdefault(p, []).append(col)
                elif subsets <= _CHUNK:
                    values[p, col] = _enumerated(v, [_all_combinations(v.n, k)])
                else:
                    values[p, col] = _enumerated(v, _combination_chunks(v.n, k))
    if as_maj:
        values[as_maj] = maj_curve([answers[p] for p in as_maj], [correct[p] for p in as_maj], kk.tolist())
    if not sampled:
        return SampledCurve(values, mc_var, 0)
    rngs = {p: _seed_for(seed, keys[p]) for group in sampled.values() for p in group}
    groups = [(n, list(group), np.unique(np.concatenate([kk[c] for c in group.values()]))) for n, group in sampled.items()]
    if draws is None:
        pilot, pilot_var = values.copy(), mc_var.copy()
        for n, probs, ks_n in groups:
            _fill(pilot, pilot_var, sampled[n], kk, ks_n, *_prefix_values([votes[p] for p in probs],
                                                                         [rngs[p] for p in probs], PILOT_DRAWS, ks_n))
        cols = np.unique(np.concatenate([c for group in sampled.values() for c in group.values()]))
        needed = _draws_needed(pilot, pilot_var, cols, rel_mc)
        draws = int(min(max_draws, max(PILOT_DRAWS, 2 ** math.ceil(math.log2(max(needed, 1.0))))))
    else:
        # skip the pilot's share of each stream, so that a fixed M draws what an adaptive run with that M draws
        for n, probs, _ in groups:
            for p in probs:
                rngs[p].random((PILOT_DRAWS, n))
    mask = np.zeros(values.shape, dtype=bool)
    for n, probs, ks_n in groups:
        _fill(values, mc_var, sampled[n], kk, ks_n,
              *_prefix_values([votes[p] for p in probs], [rngs[p] for p in probs], draws, ks_n))
        for p in probs:
            mask[p, sampled[n][p]] = True
    return SampledCurve(values, mc_var, draws, mask)


def _fill(values: np.ndarray, mc_var: np.ndarray, cells: dict[int, list[int]], kk: np.ndarray, ks_n: np.ndarray,
          mean: np.ndarray, var: np.ndarray) -> None:
    """Write the sampled problems' estimates (rows in ``cells`` order, columns ``ks_n``) into their cells."""
    where = {int(k): j for j, k in enumerate(ks_n)}
    for row, (p, cols) in enumerate(cells.items()):
        for col in cols:
            values[p, col] = mean[row, where[int(kk[col])]]
            mc_var[p, col] = var[row, where[int(kk[col])]]
