"""CI regression gate: is a run worse than a committed baseline by more than sampling noise explains?

First the gate checks that the two are comparable, and refuses in one line naming what differs
when they are not: another task or task version, another dataset (fingerprint), another grader
version or grading settings, or problem sets of which neither contains the other (another split,
level or subject; a different ``--limit`` or a partial run is fine: the test pairs the shared
problems). Differences in sampling settings, n or verifier are what a gate is for (did this change
make it worse?) and are printed as notes.

Every gated metric has a better side (its kind's record, ``bonbench.api.metric.readings.metric_info``):
higher for pass@k, bon@k, maj@k, max@k, mean and win rates, lower for ``kl``. Closed-form metrics (``kl_bon@k`` to the run's own
policy) and metrics without a better side are refused. For each gated metric the gate tests H0
"the run is not worse than the baseline" against "the run is worse", one-sided at level ``alpha``:

* **paired t-test** on per-problem differences ``d_i = current_i - baseline_i`` over the shared
  problems: the per-problem values are the unbiased estimates metrics.json stores, so the d_i are
  independent across problems with mean equal to the true change; ``t = mean(d) / (sd(d) / sqrt(m))``
  with ``m - 1`` degrees of freedom. Chosen over the bootstrap because it is deterministic (same
  files, same verdict) and its false-alarm rate stays at ``alpha`` for small problem sets, where
  percentile bootstraps run slightly hot.
* **z-test from the reported 95% CIs** (``se = (hi - lo) / 3.92``) when either side has no
  per-problem values for the metric.

A metric **regresses** iff ``p < alpha`` **and** the point estimate moved to the worse side by more
than the absolute ``tolerance``. The tolerance never makes the test stricter: it only excuses
significant drops that are too small to matter. The CI shown is the two-sided ``1 - 2 alpha``
interval of ``current - baseline``.

Baseline files are ``baseline``'s. This module neither runs the pipeline nor decides exit codes;
``analysis_flags`` maps the report to 0 (pass) / 1 (regression) / 2 (input error).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from bonbench.api.metric.inputs import reads_scores_name
from bonbench.api.metric.readings import mc_note
from bonbench.apps.analysis.baseline import Baseline, run_metric_info, run_problem_ids
from bonbench.apps.analysis.rundir import Metric, RunData
from bonbench.core import outputs
from bonbench.core.errors import BonbenchError
from bonbench.metrics.bootstrap import Z95
from bonbench.metrics.info import HIGHER, LOWER
from bonbench.plugins.verifiers.manifest import display_name


@dataclass(frozen=True)
class TestResult:
    """One one-sided comparison: ``diff = current - baseline`` with its ``1 - 2 alpha`` interval."""

    test: str
    baseline: float
    current: float
    diff: float
    lo: float
    hi: float
    p: float
    n_baseline: int
    n_current: int
    n_paired: int


@dataclass(frozen=True)
class GateRow:
    metric: str
    result: TestResult  # in the metric's units: diff = current - baseline
    verdict: str  # "REGRESSION", "ok", "ok (drop <= tolerance)", "improved"
    direction: str = HIGHER  # the better side: "higher" or "lower"

    @property
    def failed(self) -> bool:
        return self.verdict == "REGRESSION"


@dataclass(frozen=True)
class GateReport:
    rows: tuple[GateRow, ...]
    alpha: float
    tolerance: float
    baseline_path: Path
    run_path: Path
    notes: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        return any(r.failed for r in self.rows)


# ---- tests ----------------------------------------------------------------------------------------

def _interval(diff: float, se: float, q: float) -> tuple[float, float]:
    return diff - q * se, diff + q * se


def paired_test(baseline: np.ndarray, current: np.ndarray, alpha: float = 0.05) -> TestResult:
    """One-sided paired t-test of ``mean(current - baseline) < 0`` over aligned per-problem values."""
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(current, dtype=float)
    if b.shape != c.shape or b.ndim != 1:
        raise ValueError(f"paired values must be aligned 1-D arrays, got {b.shape} and {c.shape}")
    d = c - b
    m = len(d)
    if m < 2:
        raise BonbenchError(f"a paired test needs at least 2 shared problems, got {m}")
    diff = float(d.mean())
    sd = float(d.std(ddof=1))
    if sd == 0.0:
        # Every problem moved by exactly the same amount: no noise, the sign decides.
        p = 0.0 if diff < 0 else 1.0
        lo = hi = diff
    else:
        se = sd / math.sqrt(m)
        # stats.t.cdf/ppf directly: building a frozen distribution costs more than the test itself
        p = float(stats.t.cdf(diff / se, m - 1))
        lo, hi = _interval(diff, se, float(stats.t.ppf(1 - alpha, m - 1)))
    return TestResult("paired t", float(b.mean()), float(c.mean()), diff, lo, hi, p, m, m, m)


def summary_test(baseline: Metric, current: Metric, alpha: float = 0.05) -> TestResult:
    """One-sided z-test from two reported values and their 95% CIs (no per-problem values)."""
    ses = []
    for m, side in ((baseline, "baseline"), (current, "run")):
        lo, hi = m.ci95
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise BonbenchError(f"the {side} metric has neither per-problem values nor a CI; rescore it")
        ses.append((hi - lo) / (2 * Z95))
    diff = current.value - baseline.value
    se = math.hypot(*ses)
    if se == 0.0:
        p, lo, hi = (0.0 if diff < 0 else 1.0), diff, diff
    else:
        p = float(stats.norm.cdf(diff / se))
        lo, hi = _interval(diff, se, float(stats.norm.ppf(1 - alpha)))
    return TestResult("z (from CIs)", baseline.value, current.value, diff, lo, hi, p,
                      baseline.n_problems, current.n_problems, 0)


def compare_metric(base_metric: Metric, base_pp: Mapping[str, float] | None, cur_metric: Metric,
                   cur_pp: Mapping[str, float] | None, alpha: float = 0.05) -> TestResult:
    """Paired t-test over the shared problems when both sides have per-problem values, else the
    z-test from the two CIs. Values are on the "higher is better" scale (``run_gate`` flips the
    others). Fewer than 2 shared problems is an error: the runs did not score the same problems."""
    if base_pp and cur_pp:
        shared = sorted(set(base_pp) & set(cur_pp))
        if len(shared) < 2:
            raise BonbenchError(f"the run and the baseline share {len(shared)} problem(s) ({len(base_pp)} in the baseline, "
                                f"{len(cur_pp)} in the run); gate a run of the baseline's problems")
        r = paired_test(np.array([base_pp[i] for i in shared]), np.array([cur_pp[i] for i in shared]), alpha)
        return TestResult(r.test, r.baseline, r.current, r.diff, r.lo, r.hi, r.p, len(base_pp), len(cur_pp), r.n_paired)
    return summary_test(base_metric, cur_metric, alpha)


def verdict(result: TestResult, alpha: float, tolerance: float) -> str:
    """REGRESSION iff p < alpha and the drop exceeds ``tolerance``; "improved" if the interval is above 0.
    ``result`` is on the "higher is better" scale."""
    if result.p < alpha:
        return "REGRESSION" if result.diff < -tolerance else "ok (drop <= tolerance)"
    if result.lo > 0:
        return "improved"
    return "ok"


def _flip(result: TestResult) -> TestResult:
    """A result computed on negated values, back in the metric's own units."""
    return TestResult(result.test, -result.baseline, -result.current, -result.diff, -result.hi, -result.lo, result.p,
                      result.n_baseline, result.n_current, result.n_paired)


def compare_directed(name: str, direction: str, baseline: Baseline, run: RunData, alpha: float,
                     tolerance: float) -> GateRow:
    """One metric through ``compare_metric`` on its "better" scale; the row is in the metric's units."""
    s = -1.0 if direction == LOWER else 1.0

    def scaled(m: Metric) -> Metric:
        lo, hi = sorted((s * m.ci95[0], s * m.ci95[1])) if all(map(math.isfinite, m.ci95)) else m.ci95
        return Metric(s * m.value, (lo, hi), m.n_problems)

    def pp(vals: Mapping[str, float] | None) -> dict[str, float] | None:
        return None if vals is None else {k: s * v for k, v in vals.items()}

    better = compare_metric(scaled(baseline.metrics[name]), pp(baseline.per_problem.get(name)), scaled(run.metrics[name]),
                            pp(run.per_problem.get(name)), alpha)
    return GateRow(name, better if s > 0 else _flip(better), verdict(better, alpha, tolerance), direction)


# ---- the gate -------------------------------------------------------------------------------------

# sampling settings a gate is meant to test changes of: a difference is a note, not a refusal
_SETTINGS_NOTED = ("temperature", "top_p", "max_tokens", "prompt_style", "prompt_id", "task_hash_args")


def incomparable(baseline: Baseline, run: RunData) -> list[str]:
    """What makes ``run`` not comparable with ``baseline`` (empty when it is): see the module docstring."""
    out: list[str] = []
    if baseline.task and baseline.task != run.task:
        out.append(f"task {baseline.task!r} (baseline) vs {run.task!r} (run)")
    bv, rv = baseline.config.get("task_version"), run.config.get("task_version")
    if bv is not None and rv is not None and bv != rv:
        out.append(f"task version {bv} vs {rv}")
    if baseline.dataset_fingerprint and run.dataset_fingerprint and baseline.dataset_fingerprint != run.dataset_fingerprint:
        out.append(f"dataset fingerprint {baseline.dataset_fingerprint} vs {run.dataset_fingerprint}")
    bg, rg = baseline.grading, run.meta.get("grading") or {}
    for key in ("grader", "grader_version", "grading_id"):
        if bg.get(key) is not None and rg.get(key) is not None and bg[key] != rg[key]:
            out.append(f"{key.replace('_', ' ')} {bg[key]!r} vs {rg[key]!r}")
    b_ids, r_ids = set(baseline.problem_ids), set(run_problem_ids(run))
    if b_ids and r_ids and not (b_ids <= r_ids or r_ids <= b_ids):
        shared = len(b_ids & r_ids)
        example = sorted(r_ids - b_ids)[0]
        out.append(f"problems: {len(b_ids)} (baseline) vs {len(r_ids)} (run), {shared} shared, e.g. {example!r} only in the run")
    if out:
        bt, rt = baseline.config.get("task_args") or {}, run.config.get("task_args") or {}
        if bt != rt:
            out.append(f"task args {bt} vs {rt}")
    return out


def _gated_metrics(baseline: Baseline, run: RunData, metrics: Sequence[str] | None,
                   skipped: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(name, direction) of every metric to gate; one-line errors for missing, closed-form or undirected
    ones; closed-form or ungated metrics an older baseline holds are appended to ``skipped`` with why."""
    names = list(dict.fromkeys(metrics)) if metrics else list(baseline.default_metrics or baseline.metrics)
    out = []
    for name in names:
        if name not in baseline.metrics:
            raise BonbenchError(f"metric {name} is not in baseline {baseline.path} (has: {', '.join(baseline.metrics)}); "
                                "drop --metric or re-save the baseline")
        if name not in run.metrics:
            raise BonbenchError(f"metric {name} is not in run {run.path} (has: {', '.join(run.metrics) or 'none'}); "
                                f"rescore the run with --metric {name}")
        info = run_metric_info(run, name)
        direction = baseline.directions.get(name) or info.direction
        if info.closed_form:
            if metrics:
                raise BonbenchError(f"{name} is a closed-form function of n and k in {run.path} (no sampling noise, not "
                                    f"a measurement of the model) and is not gated; drop --metric {name}")
            # an older baseline saved it; there is nothing to test
            skipped.append((name, "is closed-form in the run (a function of n and k, no sampling noise)"))
            continue
        if not info.can_gate:
            if metrics:
                raise BonbenchError(f"{name}: its metric kind is not gated (`bonbench list metrics`); drop --metric {name}")
            skipped.append((name, "is of a metric kind that is not gated"))
            continue
        if direction not in (HIGHER, LOWER):
            raise BonbenchError(f"{name} has no better side (a count or report) and cannot be gated; drop --metric {name}")
        out.append((name, str(direction)))
    if not out:
        raise BonbenchError(f"no gateable metric in baseline {baseline.path}; re-save it with --metric pass@1 (or mean)")
    return out


def _notes(baseline: Baseline, run: RunData, names: Sequence[str]) -> list[str]:
    notes = []
    for key in _SETTINGS_NOTED:
        if key in baseline.config and baseline.config.get(key) != run.config.get(key):
            notes.append(f"settings differ: {key} = {baseline.config.get(key)!r} (baseline) vs "
                         f"{run.config.get(key)!r} (run); the comparison mixes a setting change with the model change")
    before, now = (display_name(str(cfg.get("verifier") or "none")) for cfg in (baseline.config, run.config))
    selected = [name for name in names if reads_scores_name(name)]
    if before != now and selected:
        notes.append(f"verifier differs ({before} (baseline) vs {now} (run)): {', '.join(selected)} compare(s) two "
                     "selectors, not two models; re-save the baseline (--save-baseline) when the verifier changes on purpose")
    for name in names:
        mc = mc_note(run.metrics[name].notes) if name in run.metrics else None
        if mc is not None:
            notes.append(f"{name} is a Monte Carlo estimate (MC SE {mc[0]:.4f}, {mc[1]} draws per problem): the test's "
                         "interval includes that noise")
    if baseline.config.get("n") not in (None, run.config.get("n")):
        notes.append(f"n differs ({baseline.config.get('n')} vs {run.config.get('n')}): same estimand, different noise")
    return notes


def run_gate(baseline: Baseline, run: RunData, metrics: Sequence[str] | None = None, alpha: float = 0.05,
             tolerance: float = 0.0) -> GateReport:
    """Compare ``run`` with ``baseline`` on ``metrics`` (default: every gateable baseline metric)."""
    if not 0 < alpha < 0.5:
        raise BonbenchError(f"alpha must be in (0, 0.5), got {alpha}")
    if tolerance < 0:
        raise BonbenchError(f"tolerance must be >= 0, got {tolerance}")
    differences = incomparable(baseline, run)
    if differences:
        raise BonbenchError(f"run {run.path} is not comparable with baseline {baseline.path}: {'; '.join(differences)}; "
                            "gate a run of the baseline's task, data and problems (same -T args and --limit), or save a "
                            "baseline from a comparable run with `bonbench gate --save-baseline --run RUN_DIR`")
    skipped: list[tuple[str, str]] = []
    gated = _gated_metrics(baseline, run, metrics, skipped)
    notes = _notes(baseline, run, [n for n, _ in gated])
    notes += [f"{name} {why}: not gated" for name, why in skipped]
    rows = []
    for name, direction in gated:
        row = compare_directed(name, direction, baseline, run, alpha, tolerance)
        r = row.result
        if r.n_paired and r.n_paired < max(r.n_baseline, r.n_current):
            notes.append(f"{name}: paired on the {r.n_paired} shared problems (baseline {r.n_baseline}, run {r.n_current})")
        rows.append(row)
    return GateReport(rows=tuple(rows), alpha=alpha, tolerance=tolerance, baseline_path=baseline.path,
                      run_path=run.path, notes=tuple(notes))


def _fmt(x: float) -> str:
    return "nan" if not math.isfinite(x) else f"{x:.4f}"


def format_report(report: GateReport) -> str:
    """A plain-text table of every gated metric and the verdict, for CI logs."""
    level = f"{100 * (1 - 2 * report.alpha):g}% CI"
    header = ["metric", "better", "test", "n", "baseline", "current", "diff", level, "p (one-sided)", "verdict"]
    table = [header]
    for row in report.rows:
        r = row.result
        n = f"{r.n_paired} paired" if r.n_paired else f"{r.n_baseline}/{r.n_current}"
        table.append([row.metric, row.direction, r.test, n, _fmt(r.baseline), _fmt(r.current), f"{r.diff:+.4f}",
                      f"[{r.lo:+.4f}, {r.hi:+.4f}]", f"{r.p:.4g}", row.verdict])
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    tol = f"{report.tolerance:g}" if report.tolerance else "0"
    lines = [f"gate: run {report.run_path}", f"      baseline {report.baseline_path}",
             f"rule: REGRESSION if one-sided p < {report.alpha:g} and the run is worse by more than {tol} "
             "(diff = current - baseline; 'better' says which side is better)", ""]
    for i, line in enumerate(table):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    for note in report.notes:
        lines.append(f"note: {note}")
    failed = [r.metric for r in report.rows if r.failed]
    lines.append("")
    lines.append(f"gate: FAIL ({len(failed)} regression(s): {', '.join(failed)})" if failed
                 else f"gate: PASS ({len(report.rows)} metric(s) checked)")
    return "\n".join(lines)


def report_json(report: GateReport) -> str:
    """The report as JSON (for tools that post it to a pull request)."""
    return json.dumps({
        "failed": report.failed, "alpha": report.alpha, "tolerance": report.tolerance,
        "baseline": str(report.baseline_path), "run": str(report.run_path), "notes": list(report.notes),
        "rows": [{"metric": r.metric, "direction": r.direction, "verdict": r.verdict, **{k: getattr(r.result, k) for k in
                  ("test", "baseline", "current", "diff", "lo", "hi", "p", "n_baseline", "n_current", "n_paired")}}
                 for r in report.rows],
    }, indent=2)


def write_report_json(report: GateReport, path: Path) -> None:
    """``report_json`` into ``path`` (atomic; a read-only or full folder is one line)."""
    outputs.write_text(path, report_json(report) + "\n")
