"""CI regression gate: is a run worse than a committed baseline by more than sampling noise explains?

For every gated metric (higher is better) the gate tests H0 "the run is not worse than the
baseline" against "the run is worse", one-sided at level ``alpha``:

* **paired t-test** on per-problem differences ``d_i = current_i - baseline_i`` when the two runs
  share problems (the shared ids cover at least half of each run's problems): the per-problem
  values are the unbiased estimates metrics.json stores, so the d_i are independent across
  problems with mean equal to the true change; ``t = mean(d) / (sd(d) / sqrt(m))`` with ``m - 1``
  degrees of freedom. Chosen over the bootstrap because it is deterministic (same files, same
  verdict) and its false-alarm rate stays at ``alpha`` for small problem sets, where percentile
  bootstraps run slightly hot. Only the shared problems enter the test and the means shown.
* **Welch two-sample t-test** on the per-problem values otherwise (different problem sets).
* **z-test from the reported 95% CIs** (``se = (hi - lo) / 3.92``) when either side has no
  per-problem values for the metric.

A metric **regresses** iff ``p < alpha`` **and** ``current - baseline < -tolerance`` (the point
estimate of the drop exceeds the absolute tolerance). The tolerance never makes the test stricter:
it only excuses significant drops that are too small to matter. The CI shown is the two-sided
``1 - 2 alpha`` interval of the difference, whose upper end is below 0 exactly when ``p < alpha``.

The baseline file (``save_baseline``) holds metrics, per-problem values, config and provenance of
one run, to be committed under ``results/baselines/``. This module neither runs the pipeline nor
decides exit codes; ``analysis.cli`` maps the report to 0 (pass) / 1 (regression) / 2 (input error).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import stats

from bonbench.errors import BonbenchError
from bonbench.store import atomic_write_json, read_json
from bonbench.analysis.rundir import Metric, RunData, load_run

BASELINE_SCHEMA = 1
# Pair only when the shared problems are at least this share of each run's problems; below it,
# pairing would throw away most of the data and an unpaired test on everything is more powerful.
MIN_PAIRED_SHARE = 0.5
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Baseline:
    """A committed reference: one run's metrics and per-problem values, with where they came from."""

    path: Path
    task: str
    model: str
    metrics: Mapping[str, Metric]
    per_problem: Mapping[str, Mapping[str, float]]
    config: Mapping[str, Any] = field(default_factory=dict)
    provenance: Mapping[str, Any] = field(default_factory=dict)


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
    result: TestResult
    verdict: str  # "REGRESSION", "ok", "ok (drop <= tolerance)", "improved"

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


def welch_test(baseline: np.ndarray, current: np.ndarray, alpha: float = 0.05) -> TestResult:
    """One-sided Welch t-test of ``mean(current) < mean(baseline)`` for unpaired per-problem values."""
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(current, dtype=float)
    if len(b) < 2 or len(c) < 2:
        raise BonbenchError(f"an unpaired test needs at least 2 problems per side, got {len(b)} and {len(c)}")
    vb, vc = b.var(ddof=1) / len(b), c.var(ddof=1) / len(c)
    diff = float(c.mean() - b.mean())
    se = math.sqrt(vb + vc)
    if se == 0.0:
        p, lo, hi = (0.0 if diff < 0 else 1.0), diff, diff
    else:
        # Welch-Satterthwaite degrees of freedom
        dof = (vb + vc) ** 2 / ((vb ** 2 / (len(b) - 1) if vb else 0.0) + (vc ** 2 / (len(c) - 1) if vc else 0.0))
        p = float(stats.t.cdf(diff / se, dof))
        lo, hi = _interval(diff, se, float(stats.t.ppf(1 - alpha, dof)))
    return TestResult("welch t", float(b.mean()), float(c.mean()), diff, lo, hi, p, len(b), len(c), 0)


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
    """Pick the test by the rule in the module docstring and run it."""
    if base_pp and cur_pp:
        shared = sorted(set(base_pp) & set(cur_pp))
        if len(shared) >= 2 and len(shared) >= MIN_PAIRED_SHARE * max(len(base_pp), len(cur_pp)):
            r = paired_test(np.array([base_pp[i] for i in shared]), np.array([cur_pp[i] for i in shared]), alpha)
            return TestResult(r.test, r.baseline, r.current, r.diff, r.lo, r.hi, r.p, len(base_pp), len(cur_pp), r.n_paired)
        return welch_test(np.array(list(base_pp.values())), np.array(list(cur_pp.values())), alpha)
    return summary_test(base_metric, cur_metric, alpha)


def verdict(result: TestResult, alpha: float, tolerance: float) -> str:
    """REGRESSION iff p < alpha and the drop exceeds ``tolerance``; "improved" if the interval is above 0."""
    if result.p < alpha:
        return "REGRESSION" if result.diff < -tolerance else "ok (drop <= tolerance)"
    if result.lo > 0:
        return "improved"
    return "ok"


# ---- baseline files -------------------------------------------------------------------------------

def default_baseline_path(run: RunData) -> Path:
    root = Path(os.environ.get("BONBENCH_OUT", "results"))
    return root / "baselines" / f"{run.task}--{run.model_slug}.json"


def save_baseline(run_dir: Path, out: Path | None = None, metrics: Sequence[str] | None = None) -> Path:
    """Write the baseline file for ``run_dir`` (all metrics, or ``metrics``) and return its path."""
    run = load_run(run_dir)
    names = list(metrics) if metrics else list(run.metrics)
    missing = [m for m in names if m not in run.metrics]
    if missing:
        raise BonbenchError(f"{run.path} has no metric {', '.join(missing)} (has: {', '.join(run.metrics)}); "
                            "rescore with --metric or drop it")
    if not names:
        raise BonbenchError(f"{run.path} has no metrics; score the run first")
    doc = {
        "bonbench_baseline": BASELINE_SCHEMA,
        "created": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "source_run": str(run.path),
        "task": run.task,
        "model": run.model,
        "hash": run.hash,
        "bonbench_version": run.bonbench_version,
        "dataset_fingerprint": run.dataset_fingerprint,
        "config": dict(run.config),
        "provenance": dict(run.provenance),
        "metrics": {m: {"value": run.metrics[m].value, "ci95": list(run.metrics[m].ci95),
                        "n_problems": run.metrics[m].n_problems} for m in names},
        "per_problem": {m: dict(run.per_problem[m]) for m in names if m in run.per_problem},
    }
    path = Path(out) if out is not None else default_baseline_path(run)
    atomic_write_json(path, doc)
    return path


def load_baseline(path: Path) -> Baseline:
    """Read a baseline file written by ``save_baseline``."""
    path = Path(path)
    if not path.is_file():
        raise BonbenchError(f"baseline {path} not found; create it with `bonbench gate --save-baseline --run RUN_DIR`")
    doc = read_json(path)
    if not isinstance(doc, dict) or doc.get("bonbench_baseline") != BASELINE_SCHEMA or "metrics" not in doc:
        raise BonbenchError(f"{path} is not a bonbench baseline (schema {BASELINE_SCHEMA}); "
                            "regenerate it with `bonbench gate --save-baseline`")
    metrics = {}
    for name, m in doc["metrics"].items():
        lo, hi = (math.nan if x is None else float(x) for x in (m.get("ci95") or [None, None]))
        value = math.nan if m.get("value") is None else float(m["value"])  # null: withheld by the task
        metrics[name] = Metric(value, (lo, hi), int(m.get("n_problems", 0)))
    per_problem = {name: {str(k): float(v) for k, v in vals.items() if v is not None}
                   for name, vals in doc.get("per_problem", {}).items()}
    return Baseline(path=path, task=str(doc.get("task", "")), model=str(doc.get("model", "")), metrics=metrics,
                    per_problem=per_problem, config=doc.get("config", {}), provenance=doc.get("provenance", {}))


# ---- the gate -------------------------------------------------------------------------------------

_SETTINGS_CHECKED = ("temperature", "top_p", "max_tokens", "prompt_style", "prompt_id", "task_version", "task_hash_args")


def run_gate(baseline: Baseline, run: RunData, metrics: Sequence[str] | None = None, alpha: float = 0.05,
             tolerance: float = 0.0) -> GateReport:
    """Compare ``run`` with ``baseline`` on ``metrics`` (default: every baseline metric)."""
    if not 0 < alpha < 0.5:
        raise BonbenchError(f"alpha must be in (0, 0.5), got {alpha}")
    if tolerance < 0:
        raise BonbenchError(f"tolerance must be >= 0, got {tolerance}")
    if baseline.task and baseline.task != run.task:
        raise BonbenchError(f"baseline {baseline.path} is for task {baseline.task!r} but the run is {run.task!r}; "
                            "pass the matching baseline")
    names = list(metrics) if metrics else list(baseline.metrics)
    for name in names:
        if name not in baseline.metrics:
            raise BonbenchError(f"metric {name} is not in baseline {baseline.path} (has: {', '.join(baseline.metrics)}); "
                                "drop --metric or re-save the baseline")
        if name not in run.metrics:
            raise BonbenchError(f"metric {name} is not in run {run.path} (has: {', '.join(run.metrics) or 'none'}); "
                                f"rescore the run with --metric {name}")
    notes = []
    for key in _SETTINGS_CHECKED:
        if key in baseline.config and baseline.config.get(key) != run.config.get(key):
            notes.append(f"settings differ: {key} = {baseline.config.get(key)!r} (baseline) vs "
                         f"{run.config.get(key)!r} (run); the comparison mixes a setting change with the model change")
    from bonbench.verifier_folder import display_name

    before, now = (display_name(str(cfg.get("verifier") or "none")) for cfg in (baseline.config, run.config))
    if before != now and any(name.startswith("bon@") for name in names):
        notes.append(f"verifier differs ({before} (baseline) vs {now} (run)): bon@k compares two selectors, not two "
                     "models; re-save the baseline (--save-baseline) when the verifier changes on purpose")
    if baseline.config.get("n") not in (None, run.config.get("n")):
        notes.append(f"n differs ({baseline.config.get('n')} vs {run.config.get('n')}): same estimand, different noise")
    rows = []
    for name in names:
        result = compare_metric(baseline.metrics[name], baseline.per_problem.get(name), run.metrics[name],
                                run.per_problem.get(name), alpha)
        if result.n_paired and result.n_paired < max(result.n_baseline, result.n_current):
            notes.append(f"{name}: paired on the {result.n_paired} shared problems "
                         f"(baseline {result.n_baseline}, run {result.n_current})")
        rows.append(GateRow(name, result, verdict(result, alpha, tolerance)))
    return GateReport(rows=tuple(rows), alpha=alpha, tolerance=tolerance, baseline_path=baseline.path,
                      run_path=run.path, notes=tuple(notes))


def _fmt(x: float) -> str:
    return "nan" if not math.isfinite(x) else f"{x:.4f}"


def format_report(report: GateReport) -> str:
    """A plain-text table of every gated metric and the verdict, for CI logs."""
    level = f"{100 * (1 - 2 * report.alpha):g}% CI"
    header = ["metric", "test", "n", "baseline", "current", "diff", level, "p (one-sided)", "verdict"]
    table = [header]
    for row in report.rows:
        r = row.result
        n = f"{r.n_paired} paired" if r.n_paired else f"{r.n_baseline}/{r.n_current}"
        table.append([row.metric, r.test, n, _fmt(r.baseline), _fmt(r.current), f"{r.diff:+.4f}",
                      f"[{r.lo:+.4f}, {r.hi:+.4f}]", f"{r.p:.4g}", row.verdict])
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = [f"gate: run {report.run_path}", f"      baseline {report.baseline_path}",
             f"rule: REGRESSION if one-sided p < {report.alpha:g} and diff < {-report.tolerance if report.tolerance else 0:g} "
             "(diff = current - baseline; higher is better)", ""]
    for i, line in enumerate(table):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())
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
        "rows": [{"metric": r.metric, "verdict": r.verdict, **{k: getattr(r.result, k) for k in
                  ("test", "baseline", "current", "diff", "lo", "hi", "p", "n_baseline", "n_current", "n_paired")}}
                 for r in report.rows],
    }, indent=2)
