"""``report.html`` for one or more runs, and for temperature sweeps among them.

``write_report(run_dirs, out_dir)`` writes into ``out_dir``:

* ``report.html`` — self-contained (PNGs embedded as base64): per run its settings, metrics with
  95% CIs, coverage-law fits of each k-curve with an extrapolation check, the choice between the
  pure law and the law with a linear trend (``laws``), and the k-curve figure; per sweep (runs of
  one task and model at two or more temperatures) the per-temperature fits and family choice, the
  law's parameters as functions of T, the optimal temperature per N (measured, fitted, continuous)
  with the fitted T*(N) curve (``temperature``), and the co-scaling heat map of per-problem
  (T*, N*) (docs/scaling.md; the section is ``sweep``'s);
* per reward-judged task and KL reference, the reward-vs-KL plane (policies and their best-of-k
  selections, with the Pareto front), and per reward-judged run its measured winrate@k and
  kl_bon@k beside N/(N+1) and log N - (N-1)/N (``frontier``'s numbers, ``sections``' HTML);
* per ``bonbench train`` checkpoint folder given, its training curves (``log.jsonl``: reward, KL,
  entropy, gradient norm and variance, speed), and per task with two or more runs their k-curves on
  shared axes (both from ``sections``);
* the same PNGs as files, and ``report.json`` with every fit and table in machine-readable form.

What it does not do: fit (``fits``, ``laws``, ``temperature``), draw (``plots``) or format the shared
pieces (``htmlparts``); this module arranges the sections (their markup is ``templates/report.html.j2``
and ``run.html.j2``) and writes the two files. It only reads run directories and checkpoint folders.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from markupsafe import Markup

from bonbench.api.metric.grammar import check_curve_key, curve_spec, metric_sort_key
from bonbench.api.metric.kind import metric_kind
from bonbench.api.metric.readings import curve_fits_law, footnotes, mc_note, metric_info
from bonbench.apps.analysis.compute_axis import compute_section
from bonbench.apps.analysis.fitreport import selection_rows, selection_table
from bonbench.apps.analysis.fits import FitError, extrapolation_check, fit_power_law
from bonbench.apps.analysis.frontier import bon_curves, plane_points
from bonbench.apps.analysis.htmlparts import Table, figure, fmt_value, jsonable, page, render
from bonbench.apps.analysis.laws import DEFAULT_FAMILIES, FAMILIES, select_family
from bonbench.apps.analysis.plots import plot_k_curves
from bonbench.apps.analysis.rundir import expand_run_dirs, load_run
from bonbench.apps.analysis.sections import bon_references_section, comparison_section, plane_section, training_section
from bonbench.apps.analysis.sweep import sweep_section
from bonbench.core import outputs
from bonbench.core.errors import BonbenchError


def _run_section(run: Any, idx: int, out_dir: Path, fit_fraction: float, n_points: int, families: Sequence[str],
                 holdout_fraction: float) -> tuple[Markup, dict]:
    """One run's section (``templates/run.html.j2``) and its report.json entry."""
    cfg = run.config
    settings = [("task", run.task), ("model", run.model), ("backend", cfg.get("backend", "")),
                ("temperature", cfg.get("temperature")), ("top_p", cfg.get("top_p")), ("n", cfg.get("n")),
                ("seed", cfg.get("seed")), ("config hash", run.hash), ("run dir", str(run.path)),
                ("bonbench", run.bonbench_version), ("dataset", run.dataset_fingerprint)]
    context: dict[str, Any] = {
        "label": run.label(), "settings": Table(["setting", "value"], settings), "footnotes": footnotes(run.metrics),
        "metrics": _metrics_table(run), "fits": None}
    fits: dict[str, Any] = {}  # kind -> the chosen family's fit (None: none fits)
    fit_rows: list[tuple[Any, ...]] = []
    sel_rows, info = [], {"run_dir": str(run.path), "hash": run.hash, "fits": {}}
    for kind, c in run.curves.items():
        if not curve_fits_law(kind):
            continue  # pass^k, G-Pass@k, bom@k: not coverage-like curves (MetricKind.scaling_law)
        try:
            sel = select_family(c.k, c.value, families, holdout_fraction=holdout_fraction, n_points=n_points)
            sel_rows += selection_rows(kind, sel)
            fits[kind] = sel.best  # the figure draws the chosen family
        except FitError as exc:
            sel, fits[kind] = None, None
            sel_rows += selection_rows(kind, None, str(exc))
        try:
            fit = fit_power_law(c.k, c.value, n_points=n_points)
        except FitError as exc:
            fit_rows.append((kind, "—", "—", "—", "—", "—", str(exc)[:60], "", ""))
            if sel is not None:
                info["fits"][kind] = {"selection": sel.to_json()}
            continue
        entry: dict[str, Any] = {"fit": asdict(fit)}
        if sel is not None:
            entry["selection"] = sel.to_json()
        try:
            ex = extrapolation_check(c.k, c.value, fit_fraction=fit_fraction, n_points=n_points)
            ex_cells = (f"k ≤ {ex.k_cut:g}: a={ex.fit.a:.3f}, b={ex.fit.b:.3f}", fmt_value(ex.mean_abs_error),
                        fmt_value(ex.max_abs_error), f"{ex.error_at_max_k:+.4f}" if math.isfinite(ex.error_at_max_k) else "—")
            entry["extrapolation"] = {"k_cut": ex.k_cut, "a": ex.fit.a, "b": ex.fit.b, "mean_abs_error": ex.mean_abs_error,
                                      "max_abs_error": ex.max_abs_error, "error_at_max_k": ex.error_at_max_k}
        except FitError as exc:
            ex_cells = ("not enough small-k points", "—", "—", "—")
            entry["extrapolation"] = {"error": str(exc)}
        fit_rows.append((kind, fmt_value(fit.a), fmt_value(fit.b), fmt_value(fit.r2), fit.n_points,
                         f"{fit.k_min:g}–{fit.k_max:g}", *ex_cells))
        info["fits"][kind] = entry
    if run.curves:
        png = plot_k_curves(run.curves, out_dir / f"run{idx:02d}_{run.hash}_curves.png", title=run.label(), fits=fits)
        context.update(selection=selection_table(sel_rows, "curve", holdout_fraction),
                       curves=figure(png, f"k-curves of {run.label()}"),
                       fits=Table(["curve", "a", "b", "R²", "points", "k range", f"fit on small k (≤ {fit_fraction:g}·n)",
                                   "mean |err| held-out", "max |err| held-out", "err at k=n"], fit_rows))
    context["bon_references"], bon_info = bon_references_section(run, idx, out_dir)
    if bon_info:
        info["bon_references"] = bon_info
    return render("run.html.j2", **context), info


def _metrics_table(run: Any) -> Table:
    """A run's metrics with their 95% CIs, and a "MC SE" column (Monte Carlo standard error and
    draws) when some value is a Monte Carlo estimate."""
    ordered = sorted(run.metrics.items(), key=lambda kv: metric_sort_key(kv[0]))
    sampled = {name: mc for name, m in ordered if (mc := mc_note(m.notes)) is not None}
    if not sampled:
        return Table(["metric", "value", "95% CI", "problems"],
                     [(name, fmt_value(m.value), _ci_text(run, name), m.n_problems) for name, m in ordered])
    return Table(["metric", "value", "95% CI", "MC SE", "problems"],
                 [(name, fmt_value(m.value), _ci_text(run, name),
                   f"{fmt_value(sampled[name][0])} ({sampled[name][1]} draws)" if name in sampled else "", m.n_problems)
                  for name, m in ordered])


def _ci_text(run: Any, name: str) -> str:
    """The metric's 95% CI, or a dash where it has none: withheld, or closed-form (``metricinfo``)."""
    m = run.metrics[name]
    if metric_info(name, m.notes, run.per_problem.get(name)).closed_form or not all(map(math.isfinite, m.ci95)):
        return "— (closed form)" if metric_info(name, m.notes, run.per_problem.get(name)).closed_form else "—"
    return f"[{fmt_value(m.ci95[0])}, {fmt_value(m.ci95[1])}]"



def has_training_log(path: Path) -> bool:
    """A ``bonbench train`` folder (finished or not) whose training curves the report plots: it has
    the per-step log and the train config. Any other folder is read as runs (a model folder without a
    log is not a run, and says so; ``baseline.is_model_folder`` is the gate's wider rule)."""
    return (path / "log.jsonl").is_file() and (path / "train_config.json").is_file()


def write_report(run_dirs: Sequence[Path], out_dir: Path, *, kind: str = "pass", coscaling_tol: float = 0.01,
                 fit_fraction: float = 0.25, n_points: int = 40, families: Sequence[str] | None = None,
                 holdout_fraction: float = 0.5, verifier: str | None = None) -> Path:
    """Write report.html (+ PNGs, report.json) for ``run_dirs`` (run dirs, sweep dirs or results trees).

    Runs of one (task, model) at two or more temperatures also get a sweep section built from their
    ``kind`` curves (a curves.json key of a metric kind with a curve: ``"pass"``, ``"bon"``, ...; for a
    kind that reads verifier scores, the curve of ``verifier``, by default the one each run's metrics
    were computed with). Every curve is fitted with each of ``families``
    (default ``laws.DEFAULT_FAMILIES``) and the family is chosen by the held-out error beyond
    ``holdout_fraction``·k_max. Returns the path of report.html.
    """
    spec = curve_spec(check_curve_key(kind))
    assert spec is not None, "check_curve_key refuses a key without a curve"
    if verifier is not None and "scores" not in metric_kind(spec.kind).reads:
        raise BonbenchError(f"--verifier chooses the curve of a kind that reads verifier scores, and {kind} reads none; "
                            "add --kind bon (or another such kind)")
    families = tuple(families or DEFAULT_FAMILIES)
    unknown = [f for f in families if f not in FAMILIES]
    if unknown or len(set(families)) != len(families):
        raise BonbenchError(f"--fit-families takes distinct names from {', '.join(FAMILIES)} (got {', '.join(families)})")
    if not 0 < holdout_fraction < 1:
        raise BonbenchError(f"--holdout-fraction must be in (0, 1) (got {holdout_fraction})")
    checkpoints = [Path(d) for d in run_dirs if has_training_log(Path(d))]
    others = [d for d in run_dirs if not has_training_log(Path(d))]
    runs = [load_run(d) for d in expand_run_dirs(others)] if others else []
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    body: list[Markup] = []
    doc: dict[str, Any] = {"runs": [], "sweeps": []}
    if checkpoints:
        html_part, info = training_section(checkpoints, out_dir)
        body.append(html_part)
        doc["training"] = info
    groups: dict[tuple[str, str], list[Any]] = {}
    for r in runs:
        groups.setdefault((r.task, r.model_slug), []).append(r)
    sweep_keys = [k for k, rs in groups.items() if len({r.temperature for r in rs}) >= 2]
    for i, key in enumerate(sweep_keys):
        html_part, info = sweep_section(key, groups[key], i, out_dir, kind, coscaling_tol, n_points, families,
                                         holdout_fraction, verifier)
        body.append(html_part)
        doc["sweeps"].append(info)
    doc["planes"] = []
    curves = bon_curves(runs)
    for i, (key, points) in enumerate(plane_points(runs).items()):
        html_part, info = plane_section(key, points, i, out_dir, curves.get(key))
        body.append(html_part)
        doc["planes"].append(info)
    doc["comparisons"] = []
    for task in dict.fromkeys(r.task for r in runs):
        html_part, info = comparison_section(task, [r for r in runs if r.task == task and r.curves], out_dir)
        if html_part:
            body.append(html_part)
            doc["comparisons"].append(info)
    doc["compute"] = []
    for i, task in enumerate(dict.fromkeys(r.task for r in runs)):  # every strategy of a task on one token axis
        section, info = compute_section(task, [r for r in runs if r.task == task], i, out_dir)
        if section is not None:
            body.append(section)
            doc["compute"].append(info)
    for i, run in enumerate(runs):
        html_part, info = _run_section(run, i, out_dir, fit_fraction, n_points, families, holdout_fraction)
        body.append(html_part)
        doc["runs"].append(info)
    path = out_dir / "report.html"
    outputs.write_text(path, page("bonbench report", render("report.html.j2", n_runs=len(runs),
                                                           n_checkpoints=len(checkpoints), sections=body)))
    outputs.write_text(out_dir / "report.json", json.dumps(jsonable(doc), indent=2) + "\n")
    return path
