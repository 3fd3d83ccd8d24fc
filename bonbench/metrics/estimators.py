"""Unbiased pass@k, bon@k and maj@k for every k <= n, dataset means with bootstrap CIs, metric specs.

Every estimator averages an inference procedure (pass / verifier best-of / majority vote) over all
k-subsets of a problem's n samples, exactly, without enumerating subsets (math-reference §1):

* ``pass_at_k``: Chen et al. 2021 (arXiv 2107.03374) product form. For real rewards it is max@k,
  the expected best reward of k samples (the oracle-verifier bon@k).
* ``bon_at_k``: expected ``correct`` of the top-scored sample of a random k-subset, score ties broken
  uniformly (rank weights C(i-1, k-1)/C(n, k), averaged over each tie block).
* ``maj_at_k``: exact probability that the plurality answer of a random k-subset is correct, ties
  uniform, ``None`` answers abstaining, a subset without votes scoring 0; every k from one
  generating-function pass over the target cluster's count a (math-reference §1.3, "every k at
  once"), with the 1/(T+1) tie weight integrated exactly (bivariate polynomials packed y = x^D, no
  quadrature), clusters too small to reach a folded into a binomial row, levels a that share their
  constrained clusters summed as one tensor when small, the other levels' polynomial products
  batched across problems, and results cached by the problem's signature (cluster sizes,
  abstainers). About 0.5 ms of CPU per problem at n = 256 (benchmarks/bench_estimators.py).

Per-problem functions raise ``ValueError`` for k < 1, k > n or mismatched lengths; the ``*_curve``
functions return NaN where a problem has fewer than k samples (never 1.0). ``compute_metrics`` and
``compute_curves`` are the pipeline's entry points and raise ``BonbenchError`` for user-fixable input.

Numerics: all counts are sums of products of non-negative numbers (no cancellation, no FFT), so
every coefficient keeps float64 relative precision. maj@k counts reach C(n, n/2), which float64 holds
up to n = 1024; above that the counts are kept in the platform's extended ``longdouble`` when it has
the range (x86-64 Linux), otherwise maj@k raises ``ValueError``. pass@k and bon@k have no n limit.

Layout: the maj@k generating-function machinery is ``bonbench.metrics.maj`` and the shared
argument checks ``bonbench.metrics.checks``; this module re-exports ``maj_at_k``,
``maj_curve``, ``FLOAT64_MAX_N`` and the maj internals the benchmarks import, so
``from bonbench.metrics.estimators import ...`` is the one entry point.

Not here: grading, answer canonicalisation (answers are compared with ``==``/hash), Monte Carlo
estimates, scaling-law fits, I/O.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from typing import Hashable, Sequence

import numpy as np

from bonbench.core.errors import BonbenchError
from bonbench.metrics.checks import _as_values, _check_k, _is_binary, _ks
# re-exported: callers import every estimator (and the maj internals benchmarks/bench_estimators.py
# times) from this module
from bonbench.metrics.maj import FLOAT64_MAX_N, _WINS_CACHE, _maj_terms, maj_at_k, maj_curve  # noqa: F401
from bonbench.core.records import MetricValue

# max@k: the expected maximum of k real-valued rewards (the pass@k estimator on rewards; on 0/1
# grades it equals pass@k). Listed after the binary kinds so that displays keep their order.
KINDS = ("pass", "bon", "maj", "mean", "max")


# ----------------------------------------------------------------------------------------------
# pass@k


# tables are n x n floats (8 MB at n = 1024): keep a few distinct n, not every one ever seen
@lru_cache(maxsize=16)
def _pass_table(n: int) -> np.ndarray:
    """Q[c, k-1] = C(n-c, k)/C(n, k) = prod_{i=n-c+1}^{n} (1 - k/i), c = 0..n, k = 1..n."""
    k = np.arange(1, n + 1, dtype=np.float64)
    i = np.arange(n, 0, -1, dtype=np.float64)[:, None]  # i = n, n-1, ..., 1
    # factors with i < k are never reached with a non-zero prefix (the i = k factor is 0 first);
    # clipping them keeps the table free of -0.0 and sign noise
    factors = np.clip(1.0 - k[None, :] / i, 0.0, None)
    table = np.ones((n + 1, n))
    np.cumprod(factors, axis=0, out=table[1:])
    table.setflags(write=False)
    return table


def pass_at_k(correct: Sequence[bool] | Sequence[float], k: int) -> float:
    """Unbiased pass@k of one problem (Chen et al. 2021): 1 - C(n-c, k)/C(n, k), product form.

    ``correct`` holds one 0/1 (or bool) per sample. Real-valued rewards give max@k, the expected
    maximum reward of k samples, which equals pass@k on 0/1 input. Raises ValueError if k > n.
    """
    z = _as_values(correct)
    _check_k(k, z.size)
    if not _is_binary(z):
        return bon_at_k(z, z, k)
    n, c = z.size, int(z.sum())
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1, dtype=np.float64)))


def _as_matrix(rows: Sequence[Sequence[float]]) -> np.ndarray | None:
    """[P, n] float matrix when every problem has the same n (one conversion, no per-row work)."""
    try:
        mat = np.asarray(rows, dtype=np.float64)
    except ValueError:  # ragged: problems differ in n
        return None
    return mat if mat.ndim == 2 else None


def _groups_by_n(rows: Sequence[Sequence[float]], what: str = "correct") -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """{n: (problem indices, [len, n] values)} with finite values checked."""
    mat = _as_matrix(rows)
    if mat is not None:
        if not np.all(np.isfinite(mat)):
            raise ValueError(f"{what} values must be finite")
        return {mat.shape[1]: (np.arange(mat.shape[0]), mat)}
    vals = [_as_values(r, what) for r in rows]
    by_n: dict[int, list[int]] = defaultdict(list)
    for p, v in enumerate(vals):
        by_n[v.size].append(p)
    return {n: (np.array(idx), np.stack([vals[p] for p in idx]).reshape(len(idx), n)) for n, idx in by_n.items()}


def pass_curve(correct_per_problem: Sequence[Sequence[float]], ks: Sequence[int] | None = None) -> np.ndarray:
    """pass@k for every problem (rows) and every k in ``ks`` (default 1..max n); NaN where n < k.

    Closed form, vectorised: one table of C(n-c, k)/C(n, k) per distinct n, indexed by c.
    Problems with real-valued rewards get max@k (see ``pass_at_k``).
    """
    groups = _groups_by_n(correct_per_problem)
    kk = _ks(ks, max(groups, default=0))
    out = np.full((len(correct_per_problem), kk.size), np.nan)
    for n, (idx, mat) in groups.items():
        if n == 0:
            continue
        cols = np.flatnonzero(kk <= n)
        binary = np.all((mat == 0.0) | (mat == 1.0), axis=1)
        c = mat[binary].sum(axis=1).astype(np.int64)
        out[np.ix_(idx[binary], cols)] = 1.0 - _pass_table(n)[c][:, kk[cols] - 1]
        if not binary.all():
            real = mat[~binary]
            out[np.ix_(idx[~binary], cols)] = _bon_rows(real, real, kk[cols])
    return out


# ----------------------------------------------------------------------------------------------
# bon@k


@lru_cache(maxsize=16)
def _rank_weights(n: int) -> np.ndarray:
    """W[i-1, k-1] = C(i-1, k-1)/C(n, k): probability that the i-th smallest of n is the top of a
    random k-subset. Recurrence w_n = k/n, w_{i-1} = w_i (i-k)/(i-1) (no big binomials)."""
    k = np.arange(1, n + 1, dtype=np.float64)
    w = np.empty((n, n))
    w[n - 1] = k / n
    if n > 1:
        i = np.arange(n, 1, -1, dtype=np.float64)[:, None]  # i = n..2 gives row i-2 from row i-1
        ratios = np.clip((i - k[None, :]) / (i - 1.0), 0.0, None)
        w[n - 2 :: -1] = (k / n)[None, :] * np.cumprod(ratios, axis=0)
    w.setflags(write=False)
    return w


def _sorted_block_means(scores: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sort each row by score; return (order, block ids, z replaced by its tie-block mean), all [P, n].

    Replacing z by the mean of its tie block and then using the untied rank weights is exact: the
    rank weights summed over a block equal the block's share of subsets (hockey-stick identity).
    """
    P, n = scores.shape
    order = np.argsort(scores, axis=1, kind="stable")
    s = np.take_along_axis(scores, order, axis=1)
    zs = np.take_along_axis(z, order, axis=1)
    new_block = np.ones((P, n), dtype=np.int64)
    new_block[:, 1:] = s[:, 1:] != s[:, :-1]
    block = np.cumsum(new_block, axis=1) - 1 + (np.arange(P) * n)[:, None]
    sums = np.bincount(block.ravel(), weights=zs.ravel(), minlength=P * n)
    counts = np.bincount(block.ravel(), minlength=P * n)
    means = sums[block] / counts[block]
    return order, block, means


def _check_scores(scores: Sequence[float] | np.ndarray, n: int) -> np.ndarray:
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if s.size != n:
        raise ValueError(f"scores and correct differ in length ({s.size} vs {n})")
    if np.isnan(s).any():
        raise ValueError("verifier scores must not be NaN (ties and order would be undefined)")
    return s


def bon_weights(scores: Sequence[float], k: int) -> np.ndarray:
    """Per-sample probability of being picked as the best of a random k-subset, in input order.

    Ties in score share the average weight of their tie block (uniform random tie-break).
    """
    s = _check_scores(scores, len(scores))
    _check_k(k, s.size)
    # hand each sample the weight of its rank, then let the block averaging spread ties evenly
    w_in = np.empty(s.size)
    w_in[np.argsort(s, kind="stable")] = _rank_weights(s.size)[:, k - 1]
    order, _, w_mean = _sorted_block_means(s[None, :], w_in[None, :])
    out = np.empty(s.size)
    out[order[0]] = w_mean[0]
    return out


def bon_at_k(scores: Sequence[float], correct: Sequence[float], k: int) -> float:
    """Expected ``correct`` of the top-scored sample of a uniformly random k-subset (ties uniform).

    ``correct`` may be 0/1 or a real reward. With scores == correct (an oracle) this is pass@k; with
    k = 1 the mean of ``correct``; with k = n the mean over the top-score tie block.
    """
    z = _as_values(correct)
    s = _check_scores(scores, z.size)
    _check_k(k, z.size)
    return float(_bon_rows(s[None, :], z[None, :], np.array([k]))[0, 0])


def _bon_rows(scores: np.ndarray, z: np.ndarray, ks: np.ndarray) -> np.ndarray:
    """bon@k of each row of [P, n] scores / correct, for every k in ``ks`` (all <= n)."""
    _, _, zbar = _sorted_block_means(scores, z)
    return zbar @ _rank_weights(z.shape[1])[:, ks - 1]


def bon_curve(scores_per_problem: Sequence[Sequence[float]], correct_per_problem: Sequence[Sequence[float]],
              ks: Sequence[int] | None = None) -> np.ndarray:
    """bon@k for every problem (rows) and every k in ``ks`` (default 1..max n); NaN where n < k.

    Vectorised per distinct n: sort, tie-block means, one matmul with the rank-weight matrix.
    """
    if len(scores_per_problem) != len(correct_per_problem):
        raise ValueError("scores_per_problem and correct_per_problem differ in length")
    groups = _groups_by_n(correct_per_problem)
    s_mat = _as_matrix(scores_per_problem)
    kk = _ks(ks, max(groups, default=0))
    out = np.full((len(correct_per_problem), kk.size), np.nan)
    for n, (idx, z) in groups.items():
        if s_mat is not None and s_mat.shape == (len(correct_per_problem), n):
            s = s_mat[idx]
        else:
            s = np.stack([_check_scores(scores_per_problem[p], n) for p in idx]).reshape(len(idx), n)
        if s.shape != z.shape:
            raise ValueError(f"scores and correct differ in length ({s.shape[1]} vs {n})")
        if np.isnan(s).any():
            raise ValueError("verifier scores must not be NaN (ties and order would be undefined)")
        if n == 0:
            continue
        cols = np.flatnonzero(kk <= n)
        out[np.ix_(idx, cols)] = _bon_rows(s, z, kk[cols])
    return out


def mean_correct(correct_per_problem: Sequence[Sequence[float]]) -> np.ndarray:
    """Mean ``correct`` per problem (= pass@1 = maj-free accuracy); NaN for a problem with no samples."""
    return np.array([float(np.mean(_as_values(c))) if len(c) else np.nan for c in correct_per_problem])


# ----------------------------------------------------------------------------------------------
# bootstrap


def _boot_means(values: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """[n_boot, K] bootstrap means of the rows of a NaN-free [m, K] array: one multinomial count
    matrix, one matmul. A fresh generator per call makes a column's CI independent of its
    neighbours (the same column bootstraps identically alone or in a matrix)."""
    m = values.shape[0]
    # multinomial counts via resampled indices + bincount: same distribution as rng.multinomial,
    # several times faster for thousands of problems
    idx = np.random.default_rng(seed).integers(0, m, size=(n_boot, m))
    idx += (np.arange(n_boot) * m)[:, None]
    counts = np.bincount(idx.ravel(), minlength=n_boot * m).reshape(n_boot, m).astype(np.float64)
    return (counts @ values) / m  # float counts: a BLAS matmul


def bootstrap_ci(values: np.ndarray, n_boot: int = 1000, seed: int = 0,
                 alpha: float = 0.05) -> tuple[float, float] | tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap CI of the mean over problems (rows).

    1-D [P] gives ``(lo, hi)`` floats; 2-D [P, K] gives two length-K arrays. NaN rows are dropped per
    column; columns sharing a NaN pattern (usually all of them) share one resampling matrix. A column
    with no finite value gets NaN bounds.
    """
    if n_boot < 1 or not 0.0 < alpha < 1.0:
        raise ValueError("need n_boot >= 1 and 0 < alpha < 1")
    v = np.asarray(values, dtype=np.float64)
    if v.ndim not in (1, 2):
        raise ValueError(f"values must be 1-D [P] or 2-D [P, K], got shape {v.shape}")
    mat = v[:, None] if v.ndim == 1 else v
    K = mat.shape[1]
    lo, hi = np.full(K, np.nan), np.full(K, np.nan)
    valid = ~np.isnan(mat)
    if mat.shape[0] == 0:
        return (math.nan, math.nan) if v.ndim == 1 else (lo, hi)
    # one resampling matrix per distinct NaN pattern (one per distinct n in a curve), never per column
    _, group = np.unique(np.packbits(valid, axis=0).T, axis=0, return_inverse=True)
    for g in range(int(group.max()) + 1):
        cols = np.flatnonzero(group.reshape(-1) == g)
        rows = valid[:, cols[0]]
        if not rows.any():
            continue
        means = _boot_means(mat[np.ix_(rows, cols)], n_boot, seed)
        lo[cols], hi[cols] = np.quantile(means, [alpha / 2, 1 - alpha / 2], axis=0)
    if v.ndim == 1:
        return float(lo[0]), float(hi[0])
    return lo, hi


def paired_bootstrap_diff(a: np.ndarray, b: np.ndarray, n_boot: int = 1000,
                          seed: int = 0) -> tuple[float, float, float, float]:
    """Paired bootstrap of mean(a - b) over problems: ``(diff, lo, hi, p_one_sided)``.

    ``a`` and ``b`` are per-problem values in the same problem order; pairs with a NaN on either side
    are dropped. ``(lo, hi)`` is the 95% percentile interval; ``p_one_sided`` is the bootstrap share of
    resampled mean differences <= 0, i.e. small when ``a`` is confidently better than ``b``.
    """
    x, y = np.asarray(a, dtype=np.float64).reshape(-1), np.asarray(b, dtype=np.float64).reshape(-1)
    if x.size != y.size:
        raise ValueError(f"paired values differ in length ({x.size} vs {y.size})")
    d = (x - y)[~(np.isnan(x) | np.isnan(y))]
    if d.size == 0:
        return math.nan, math.nan, math.nan, math.nan
    means = _boot_means(d[:, None], n_boot, seed)[:, 0]
    lo, hi = np.quantile(means, [0.025, 0.975])
    return float(d.mean()), float(lo), float(hi), float(np.mean(means <= 0.0))


# ----------------------------------------------------------------------------------------------
# metric specs and the pipeline entry points


@dataclass(frozen=True)
class MetricSpec:
    """One requested metric: ``kind`` in pass/bon/maj/mean, ``k`` (None for mean)."""

    kind: str
    k: int | None = None

    def __post_init__(self) -> None:
        assert self.kind in KINDS, f"unknown metric kind {self.kind!r}"
        assert (self.kind == "mean") == (self.k is None), "mean takes no k; pass/bon/maj/max need one"
        assert self.k is None or self.k >= 1, f"k must be >= 1, got {self.k}"

    @property
    def name(self) -> str:
        return self.kind if self.k is None else f"{self.kind}@{self.k}"


_SPEC = re.compile(r"^(pass|bon|maj|max)@([1-9][0-9]*)$")


def _bad_spec(tok: str) -> BonbenchError:
    return BonbenchError(f"unknown metric {tok!r}; use pass@k, bon@k, maj@k, max@k or mean (k >= 1)")


def parse_metrics(specs: Sequence[str]) -> list[MetricSpec]:
    """Parse ``--metric`` values: 'pass@1,4,16' (a kind then extra ks), 'bon@32', 'maj@8', 'mean'.

    Any number of strings, each a comma list; a bare integer repeats the previous kind. Duplicates are
    dropped, first-seen order kept. Bad input raises BonbenchError naming the accepted forms.
    """
    if isinstance(specs, str):
        specs = [specs]
    out: list[MetricSpec] = []
    for text in specs:
        kind: str | None = None
        for raw in text.split(","):
            tok = raw.strip().lower()
            if tok == "mean":
                spec, kind = MetricSpec("mean"), None
            elif tok.isdigit() and kind is not None and int(tok) >= 1:
                spec = MetricSpec(kind, int(tok))
            elif m := _SPEC.match(tok):
                kind = m.group(1)
                spec = MetricSpec(kind, int(m.group(2)))
            else:
                raise _bad_spec(f"{kind}@{raw.strip()}" if kind is not None and "@" not in tok else raw.strip())
            if spec not in out:
                out.append(spec)
    if not out:
        raise BonbenchError("no metric given; use pass@k, bon@k, maj@k, max@k or mean (k >= 1)")
    return out


@dataclass(frozen=True)
class ProblemOutcome:
    """One problem's samples, in sample order: grader ``correct`` (0/1 or a reward), canonical
    ``answers`` (None abstains) and verifier ``scores`` (None when no verifier ran)."""

    problem_id: str
    correct: tuple[float, ...]
    answers: tuple[Hashable | None, ...]
    scores: tuple[float, ...] | None = None


def _check_outcomes(outcomes: Sequence[ProblemOutcome]) -> None:
    if not outcomes:
        raise BonbenchError("no problems to score; check the task selection (--limit, split)")
    for o in outcomes:
        n = len(o.correct)
        if n == 0:
            raise BonbenchError(f"problem {o.problem_id!r} has no samples; rerun sampling (bonbench sample)")
        if len(o.answers) != n or (o.scores is not None and len(o.scores) != n):
            raise BonbenchError(f"problem {o.problem_id!r} has {n} grades but {len(o.answers)} answers / "
                                f"{'no' if o.scores is None else len(o.scores)} scores; rerun grading and scoring")


def _per_problem(outcomes: Sequence[ProblemOutcome], kind: str, ks: Sequence[int]) -> np.ndarray:
    """[P, len(ks)] per-problem values of one kind; NaN where n < k."""
    correct = [o.correct for o in outcomes]
    if kind in ("pass", "max"):
        return pass_curve(correct, ks)
    if kind == "bon":
        return bon_curve([o.scores for o in outcomes], correct, ks)
    if kind == "maj":
        return maj_curve([o.answers for o in outcomes], correct, ks)
    raise AssertionError(f"no curve for metric kind {kind!r}")


def compute_metrics(outcomes: Sequence[ProblemOutcome], specs: Sequence[MetricSpec | str], n_boot: int = 1000,
                    seed: int = 0) -> tuple[dict[str, MetricValue], dict[str, dict[str, float]]]:
    """Dataset means with 95% bootstrap CIs, and ``per_problem[metric][problem_id]`` values.

    Raises BonbenchError when a bon@k has no verifier scores or a k exceeds some problem's n.
    """
    spec_list: list[MetricSpec] = []
    for item in specs:
        for s in parse_metrics([item]) if isinstance(item, str) else [item]:
            if s not in spec_list:
                spec_list.append(s)
    if not spec_list:
        raise BonbenchError("no metric given; use pass@k, bon@k, maj@k, max@k or mean (k >= 1)")
    _check_outcomes(outcomes)
    n_min = min(len(o.correct) for o in outcomes)
    short = min(outcomes, key=lambda o: len(o.correct))
    for s in spec_list:
        if s.kind == "bon" and any(o.scores is None for o in outcomes):
            raise BonbenchError(f"bon@k needs verifier scores for every problem ({s.name}); "
                                "pass --verifier (e.g. --verifier logprob) or drop bon@k")
        if s.k is not None and s.k > n_min:
            raise BonbenchError(f"{s.name} needs k = {s.k} samples per problem but problem "
                                f"{short.problem_id!r} has n = {n_min}; rerun with --n {s.k} or more")
    ids = [o.problem_id for o in outcomes]
    values: dict[str, MetricValue] = {}
    per_problem: dict[str, dict[str, float]] = {}
    by_kind: dict[str, list[MetricSpec]] = defaultdict(list)
    for s in spec_list:
        by_kind[s.kind].append(s)
    for kind, group in by_kind.items():
        if kind == "mean":
            mat = mean_correct([o.correct for o in outcomes])[:, None]
        else:
            mat = _per_problem(outcomes, kind, [s.k for s in group])
        lo, hi = bootstrap_ci(mat, n_boot=n_boot, seed=seed)
        for j, s in enumerate(group):
            values[s.name] = MetricValue(name=s.name, value=float(mat[:, j].mean()),
                                         ci95=(float(lo[j]), float(hi[j])), n_problems=len(outcomes),
                                         n_samples=n_min)
            per_problem[s.name] = {pid: float(v) for pid, v in zip(ids, mat[:, j])}
    return {s.name: values[s.name] for s in spec_list}, {s.name: per_problem[s.name] for s in spec_list}


def compute_curves(outcomes: Sequence[ProblemOutcome], kinds: Sequence[str] = ("pass", "bon", "maj"),
                   n_boot: int = 1000, seed: int = 0) -> dict[str, dict[str, list]]:
    """Every k = 1..n_min for each kind: ``{"k", "value", "lo", "hi"}`` lists (JSON-ready).

    n_min is the smallest per-problem n, so every point averages the same problems. 'bon' is skipped
    when any problem lacks verifier scores.
    """
    _check_outcomes(outcomes)
    n_min = min(len(o.correct) for o in outcomes)
    ks = list(range(1, n_min + 1))
    curves: dict[str, dict[str, list]] = {}
    for kind in kinds:
        if kind not in ("pass", "bon", "maj", "max"):
            raise BonbenchError(f"unknown curve kind {kind!r}; use pass, bon, maj or max")
        if kind == "bon" and any(o.scores is None for o in outcomes):
            continue
        mat = _per_problem(outcomes, kind, ks)
        lo, hi = bootstrap_ci(mat, n_boot=n_boot, seed=seed)
        curves[kind] = {"k": ks, "value": [float(v) for v in mat.mean(axis=0)],
                        "lo": [float(v) for v in lo], "hi": [float(v) for v in hi]}
    return curves


# ----------------------------------------------------------------------------------------------
# metric names: per-group names and the one display order (report table, leaderboard, report.html)


def group_metric_name(metric: str, breakdown: str, group: str) -> str:
    """The name of ``metric`` computed on one group of a task's breakdown: ``pass@1[variant=static]``.

    ``breakdown`` must not contain ``=``, ``[`` or ``]`` (so that :func:`split_metric_name` can
    invert it); ``group`` may be any text, spaces included (``pass@1[level=college math]``).
    """
    if not breakdown or any(ch in breakdown for ch in "=[]"):
        raise ValueError(f"breakdown name {breakdown!r} must be non-empty and free of '=', '[' and ']'")
    return f"{metric}[{breakdown}={group}]"


def split_metric_name(name: str) -> tuple[str, str | None, str | None]:
    """``(metric, breakdown, group)`` of a metric name; ``(name, None, None)`` for a dataset metric.

    Inverse of :func:`group_metric_name`. A name written before breakdowns had names
    (``pass@4[Oct-2023]``) gives breakdown ``""``.
    """
    base, sep, rest = name.partition("[")
    if not sep or not rest.endswith("]"):
        return name, None, None
    breakdown, eq, group = rest[:-1].partition("=")
    return (base, breakdown, group) if eq else (base, "", breakdown)


def metric_sort_key(name: str) -> tuple[int, str, int, bool, str, str, str]:
    """Display order of metric names: pass, bon, maj, mean, then task metrics (by name); by k within
    a kind; each metric right before its per-group values (by breakdown, then group)."""
    base, breakdown, group = split_metric_name(name)
    kind, _, k = base.partition("@")
    rank = KINDS.index(kind) if kind in KINDS and (kind == "mean") == (not k) else len(KINDS)
    # other metrics (static_accuracy, kl, winrate@k, kl_bon@k) by name, then by k: kl_bon@4 before kl_bon@16
    task_metric = kind if rank == len(KINDS) else ""
    return (rank, task_metric, int(k) if k.isdigit() else 0, breakdown is not None, breakdown or "", group or "", name)
