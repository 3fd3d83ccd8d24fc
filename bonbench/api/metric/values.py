"""Metric values from problem outcomes through the metric registry: dataset means with 95%
bootstrap CIs and per-problem values (``compute_metrics``), and every k of a curve
(``compute_curves``). The pipeline, the analysis commands and users call these two.

Each metric is its kind's record (``bonbench.api.metric``): its curve function (every requested k
of one kind and parameter in one call) or, for a kind without one, its per-problem function. A
curve that returns a ``SampledCurve`` with sampled values makes a Monte Carlo value: it carries its
Monte Carlo standard error (``SampledCurve.dataset_mc_se``) and draws beside the bootstrap CI.
An adaptive run's values are each problem's two-stage estimate (``two_stage``; docs/adaptive.md).
Input the user can fix is one ``BonbenchError`` line naming the fix: no problems, a problem without
samples, k above a problem's n, a metric whose input (verifier scores, log-probabilities) is
missing, and a ``ValueError`` a metric's function raises (prefixed with the metric's name).

What it does not do: parse flags, apply a task's rules (``bonbench.run.rules``), read or write files.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from bonbench.api.metric.grammar import MetricSpec, curve_spec, parse_metrics
from bonbench.api.metric.inputs import curve_keys, run_inputs
from bonbench.api.metric.kind import MetricKind, metric_kind
from bonbench.core.errors import BonbenchError
from bonbench.core.records import MetricValue
from bonbench.metrics.adaptive import TwoStage
from bonbench.metrics.bootstrap import bootstrap_ci
from bonbench.metrics.checks import is_binary
from bonbench.metrics.estimators import ProblemOutcome
from bonbench.metrics.montecarlo import SampledCurve

# [P, K] values; [K] Monte Carlo SE (NaN at an exact k; None when every k is exact); the draws
PerK = tuple[np.ndarray, np.ndarray | None, int]


@dataclass(frozen=True)
class CurveMatrix:
    """One curve's per-problem values at every k of ``ks`` (``curve_matrices``), before its bootstrap."""

    ks: tuple[int, ...]
    values: np.ndarray  # [P, K]
    mc_se: np.ndarray | None  # [K]: NaN at an exact k; None when every k is exact
    draws: int

    def exact_at(self, k: int | None) -> np.ndarray | None:
        """The [P] values at ``k`` when every one of them is exact, else None (not a k of the curve,
        or a Monte Carlo estimate there, whose draws depend on the other ks asked with it)."""
        if k is None or k not in self.ks:
            return None
        j = self.ks.index(k)
        return self.values[:, j] if self.mc_se is None or np.isnan(self.mc_se[j]) else None


def check_outcomes(outcomes: Sequence[ProblemOutcome]) -> None:
    """A one-line error unless every problem has samples and its vectors agree in length."""
    if not outcomes:
        raise BonbenchError("no problems to score; check the task selection (--limit, split)")
    for o in outcomes:
        n = len(o.correct)
        if n == 0:
            raise BonbenchError(f"problem {o.problem_id!r} has no samples; run `bonbench run` again with the same flags "
                                "(it samples only what is missing)")
        if len(o.answers) != n or (o.scores is not None and len(o.scores) != n):
            raise BonbenchError(f"problem {o.problem_id!r} has {n} grades but {len(o.answers)} answers / "
                                f"{'no' if o.scores is None else len(o.scores)} scores; rerun grading and scoring")
        if o.logprobs is not None and len(o.logprobs) != n:
            raise BonbenchError(f"problem {o.problem_id!r} has {n} grades but {len(o.logprobs)} log-probabilities; rerun it")


def _check_inputs(spec: MetricSpec, record: MetricKind, outcomes: Sequence[ProblemOutcome]) -> None:
    """The inputs ``spec`` reads that outcomes carry per problem are there for every problem."""
    for field_, what, fix in (("scores", "verifier scores", "pass --verifier (e.g. --verifier logprob or oracle)"),
                              ("logprobs", "log-probabilities", "sample with --backend vllm or hf, which record them")):
        if field_ in record.reads:
            lacking = [o.problem_id for o in outcomes if getattr(o, field_) is None]
            if lacking:
                raise BonbenchError(f"{spec.name} reads {what}, but {len(lacking)} of {len(outcomes)} problems have none "
                                    f"(e.g. {lacking[0]!r}); {fix}, or drop {spec.name}")


def _values(record: MetricKind, spec_name: str, outcomes: Sequence[ProblemOutcome], ks: Sequence[int | None],
            param: float | None, seed: int) -> PerK:
    """One kind and parameter at every k of ``ks``: the per-problem matrix, its Monte Carlo SE (None
    when exact) and the draws; a ``ValueError`` of the metric's function is one line naming it."""
    effective = param if param is not None or record.param is None else record.param.default
    try:
        if record.curve is not None:
            got = record.curve(outcomes, [int(k) for k in ks if k is not None], effective, seed)
        else:
            assert record.per_problem is not None, f"metric kind {record.kind!r} computes nothing"
            per = record.per_problem
            got = np.array([[per(o, k, effective) if k is None or k <= len(o.correct) else np.nan for k in ks]
                            for o in outcomes], dtype=float).reshape(len(outcomes), len(ks))
    except ValueError as exc:
        raise BonbenchError(f"{spec_name}: {exc}") from None
    mat = got.values if isinstance(got, SampledCurve) else np.asarray(got, dtype=float)
    if mat.shape != (len(outcomes), len(ks)):
        raise BonbenchError(f"metric kind {record.kind!r} returned values of shape {mat.shape}, not "
                            f"{(len(outcomes), len(ks))}; fix or reinstall the plugin that provides it")
    if isinstance(got, SampledCurve) and not got.exact:
        # a k is Monte Carlo when some problem's value there was sampled (its draws may all agree: SE 0)
        return mat, np.where(got.sampled_at(), got.dataset_mc_se(), np.nan), got.draws
    return mat, None, 0


def _part(o: ProblemOutcome, lo: int, hi: int | None) -> ProblemOutcome:
    """Samples ``lo..hi-1`` of a problem's outcome (one stage of a two-stage design)."""
    return replace(o, correct=o.correct[lo:hi], answers=o.answers[lo:hi],
                   scores=None if o.scores is None else o.scores[lo:hi],
                   logprobs=None if o.logprobs is None else o.logprobs[lo:hi])


def two_stage_k(two_stage: Sequence[TwoStage]) -> int:
    """The largest k every problem's design supports (``TwoStage.check_k``): k samples in each part
    that carries weight."""
    return min(min(d.pilot if d.weight > 0 else 1 << 30, min(d.second) if d.weight < 1 else 1 << 30) for d in two_stage)


def _per_k(record: MetricKind, spec_name: str, outcomes: Sequence[ProblemOutcome], ks: Sequence[int | None],
           param: float | None, seed: int, two_stage: Sequence[TwoStage] | None) -> PerK:
    """``_values``, or under a two-stage design (an adaptive run) each problem's ``TwoStage.estimate``
    of the values on its pilot and on its second stage. The parts' Monte Carlo SEs combine as
    sqrt(se_pilot^2 + se_second^2): a bound, each weight being in [0, 1] and the parts' draws independent."""
    if two_stage is None:
        return _values(record, spec_name, outcomes, ks, param, seed)
    pilot = _values(record, spec_name, [_part(o, 0, d.pilot) for o, d in zip(outcomes, two_stage, strict=True)],
                    ks, param, seed)
    second = _values(record, spec_name, [_part(o, d.pilot, None) for o, d in zip(outcomes, two_stage, strict=True)],
                     ks, param, seed)
    mat = np.array([[d.estimate(float(a), float(b)) for a, b in zip(row_a, row_b, strict=True)]
                    for d, row_a, row_b in zip(two_stage, pilot[0], second[0], strict=True)], dtype=float)
    if pilot[1] is None and second[1] is None:
        return mat.reshape(len(outcomes), len(ks)), None, 0
    parts = np.array([np.full(len(ks), np.nan) if se is None else se for se in (pilot[1], second[1])])
    se = np.where(np.isnan(parts).all(axis=0), np.nan, np.sqrt(np.nansum(parts ** 2, axis=0)))
    return mat.reshape(len(outcomes), len(ks)), se, max(pilot[2], second[2])


def compute_metrics(outcomes: Sequence[ProblemOutcome], specs: Sequence[MetricSpec | str], n_boot: int = 1000,
                    seed: int = 0, two_stage: Sequence[TwoStage] | None = None,
                    curves: Mapping[str, CurveMatrix] | None = None
                    ) -> tuple[dict[str, MetricValue], dict[str, dict[str, float]]]:
    """Dataset means with 95% bootstrap CIs, and ``per_problem[metric][problem_id]`` values.

    ``specs`` are ``MetricSpec``s or names; ``seed`` seeds the bootstrap and any Monte Carlo draws.
    ``two_stage`` (an adaptive run: ``outcomes[i]``'s design) makes each problem's value the design's
    unbiased estimate from its two parts (``_per_k``; docs/adaptive.md). ``curves``: the same
    outcomes' ``curve_matrices`` (same ``seed`` and ``two_stage``), whose exact values at a k are
    taken rather than computed again (an exact value at k depends on k alone: ``MetricKind``'s
    contract); a Monte Carlo value is computed for the ks asked, as without them.
    Raises BonbenchError when an input a metric reads is missing or a k exceeds some problem's n
    (or, with ``two_stage``, what the designs support).
    """
    spec_list: list[MetricSpec] = []
    for item in specs:
        for s in parse_metrics([item]) if isinstance(item, str) else [item]:
            if s not in spec_list:
                spec_list.append(s)
    if not spec_list:
        raise BonbenchError("no metric given; see `bonbench list metrics`")
    check_outcomes(outcomes)
    n_min = min(len(o.correct) for o in outcomes)
    short = min(outcomes, key=lambda o: len(o.correct))
    if two_stage is not None and max((s.k or 1) for s in spec_list) > two_stage_k(two_stage):
        top = max(spec_list, key=lambda s: s.k or 1)
        raise BonbenchError(f"{top.name} needs k = {top.k} samples in each stage of this adaptive run, whose designs "
                            f"support k <= {two_stage_k(two_stage)}; drop {top.name}, or run again with a larger pilot")
    for s in spec_list:
        record = metric_kind(s.kind)
        if not record.computed:
            raise BonbenchError(f"{s.name} is not computed from a run's grades: {record.how}")
        _check_inputs(s, record, outcomes)
        if s.k is not None and s.k > n_min:
            raise BonbenchError(f"{s.name} needs k = {s.k} samples per problem but problem "
                                f"{short.problem_id!r} has n = {n_min}; rerun with --n {s.k} or more")
    ids = [o.problem_id for o in outcomes]
    values: dict[str, MetricValue] = {}
    per_problem: dict[str, dict[str, float]] = {}
    by_kind: dict[tuple[str, float | None], list[MetricSpec]] = defaultdict(list)
    for s in spec_list:
        by_kind[(s.kind, s.param)].append(s)
    computed: dict[tuple[str, float | None], CurveMatrix] = {}
    for key, matrix in (curves or {}).items():
        if (spec := curve_spec(key)) is not None:
            computed[(spec.kind, spec.param)] = matrix
    for (kind, param), group in by_kind.items():
        curve = computed.get((kind, param))
        known = [c for s in group if curve is not None and (c := curve.exact_at(s.k)) is not None]
        if len(known) == len(group):
            mat, mc_se, draws = np.column_stack(known).reshape(len(outcomes), len(group)), None, 0
        else:
            mat, mc_se, draws = _per_k(metric_kind(kind), group[0].name, outcomes, [s.k for s in group], param, seed,
                                       two_stage)
        lo, hi = bootstrap_ci(mat, n_boot=n_boot, seed=seed)
        for j, s in enumerate(group):
            se = None if mc_se is None or np.isnan(mc_se[j]) else float(mc_se[j])
            values[s.name] = MetricValue(name=s.name, value=float(mat[:, j].mean()), ci95=(float(lo[j]), float(hi[j])),
                                         n_problems=len(outcomes), n_samples=n_min,
                                         mc_se=se, mc_draws=draws if se is not None else None)
            per_problem[s.name] = {pid: float(v) for pid, v in zip(ids, mat[:, j], strict=True)}
    return {s.name: values[s.name] for s in spec_list}, {s.name: per_problem[s.name] for s in spec_list}


def curve_values(outcomes: Sequence[ProblemOutcome], key: str, ks: Sequence[int], seed: int = 0) -> np.ndarray:
    """[P, len(ks)] per-problem values of curve ``key`` (``pass``, ``gpass:0.75``), NaN where a problem
    has fewer than k samples; for analyses that rebuild a curve from a run's rows."""
    spec = curve_spec(key)
    if spec is None:
        raise BonbenchError(f"no metric kind has a curve {key!r}; see `bonbench list metrics`")
    record = metric_kind(spec.kind)
    _check_inputs(MetricSpec(spec.kind, 1, spec.param), record, outcomes)
    return _values(record, key, outcomes, list(ks), spec.param, seed)[0]


def default_curve_keys(outcomes: Sequence[ProblemOutcome]) -> list[str]:
    """The default curves of what ``outcomes`` hold, for callers without a task: grades when every
    value is 0 or 1 (else rewards), answers when some sample has one, scores and log-probabilities
    when every problem has them (``bonbench.api.metric.inputs.curve_keys``)."""
    from_grades = all(is_binary(np.asarray(o.correct, dtype=float)) for o in outcomes)
    inputs = run_inputs("correctness" if from_grades else "reward",
                        answers=any(a is not None for o in outcomes for a in o.answers),
                        scores=all(o.scores is not None for o in outcomes),
                        logprobs=all(o.logprobs is not None for o in outcomes))
    return curve_keys((), inputs)


def compute_curves(outcomes: Sequence[ProblemOutcome], keys: Sequence[str] | None = None, n_boot: int = 1000,
                   seed: int = 0, two_stage: Sequence[TwoStage] | None = None) -> dict[str, dict[str, Any]]:
    """Every k = 1..n_min of each curve: ``{"k", "value", "lo", "hi"}`` lists (JSON-ready), plus
    ``"mc_se"`` (null at a k whose values are all exact) and ``"mc_draws"`` where values are Monte
    Carlo estimates: ``curves_json`` of ``curve_matrices``.

    ``keys`` are curves.json keys (a kind with a curve, with its parameter: ``pass``, ``gpass:0.75``;
    default ``default_curve_keys``). n_min is the smallest per-problem n, so every point averages the
    same problems. With ``two_stage`` (``compute_metrics``) every point is the designs' estimate and
    the curve stops at the largest k the designs support (``two_stage_k``).
    """
    return curves_json(curve_matrices(outcomes, keys, seed, two_stage), n_boot=n_boot, seed=seed)


def curve_matrices(outcomes: Sequence[ProblemOutcome], keys: Sequence[str] | None = None, seed: int = 0,
                   two_stage: Sequence[TwoStage] | None = None) -> dict[str, CurveMatrix]:
    """Each curve's per-problem values at every k = 1..n_min (``compute_curves``, before the bootstrap),
    which ``compute_metrics`` can take its exact values from."""
    check_outcomes(outcomes)
    n_min = min(len(o.correct) for o in outcomes) if two_stage is None else two_stage_k(two_stage)
    ks: list[int | None] = list(range(1, n_min + 1))
    matrices: dict[str, CurveMatrix] = {}
    for key in default_curve_keys(outcomes) if keys is None else keys:
        spec = curve_spec(key)
        if spec is None:
            raise BonbenchError(f"no metric kind has a curve {key!r}; see `bonbench list metrics`")
        record = metric_kind(spec.kind)
        _check_inputs(MetricSpec(spec.kind, 1, spec.param), record, outcomes)
        mat, mc_se, draws = _per_k(record, key, outcomes, ks, spec.param, seed, two_stage)
        matrices[key] = CurveMatrix(tuple(range(1, n_min + 1)), mat, mc_se, draws)
    return matrices


def curves_json(matrices: Mapping[str, CurveMatrix], n_boot: int = 1000, seed: int = 0) -> dict[str, dict[str, Any]]:
    """curves.json's entries of ``curve_matrices``: each k's mean with its bootstrap CI (``compute_curves``)."""
    curves: dict[str, dict[str, Any]] = {}
    for key, m in matrices.items():
        lo, hi = bootstrap_ci(m.values, n_boot=n_boot, seed=seed)
        curves[key] = {"k": list(m.ks), "value": [float(v) for v in m.values.mean(axis=0)],
                       "lo": [float(v) for v in lo], "hi": [float(v) for v in hi]}
        if m.mc_se is not None:  # null at an exact k
            curves[key].update(mc_se=[None if np.isnan(v) else float(v) for v in m.mc_se], mc_draws=m.draws)
    return curves
