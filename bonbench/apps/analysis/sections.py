"""Sections of ``report.html`` other than a run's own and a sweep's: several runs' k-curves on shared
axes (the base next to its checkpoints), the training curves of ``bonbench train`` checkpoint
folders, the reward-vs-KL plane with its Pareto front, and a reward-judged run's best-of-N
references.

Each returns its HTML (rendered from its template in ``templates/``) and the JSON ``report.json``
keeps for it; the figures are ``plots``', the points and rows ``frontier``'s. This module reads the
checkpoints' ``log.jsonl`` and ``train_config.json`` and nothing else; it fits nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from markupsafe import Markup

from bonbench.api.metric.readings import curve_label, curve_sort_key, footnotes
from bonbench.apps.analysis.frontier import bon_reference_rows, pareto_front
from bonbench.apps.analysis.htmlparts import Table, figure, fmt_value, metric_cell, powers_of_two, render
from bonbench.apps.analysis.plots import plot_k_curve_comparison
from bonbench.apps.analysis.plots_policy import (
    plot_bon_references,
    plot_evaluation_curves,
    plot_reward_kl,
    plot_training_curves,
)
from bonbench.core.outputs import read_json, read_jsonl_log


def run_curve_label(run: Any) -> str:
    """How a run is named in a comparison legend: model, temperature, n and its config hash."""
    return f"{run.model_slug} T={run.temperature:g} n={run.n} ({run.hash})"


def comparison_section(task: str, runs: Sequence[Any], out_dir: Path) -> tuple[Markup, dict]:
    """The k-curves of every run of ``task`` on shared axes (base and checkpoints side by side), and
    the values at k = 1, 2, 4, ... up to the largest n; nothing unless two or more models ran it."""
    if len({r.model_slug for r in runs}) < 2:
        return Markup(""), {}  # one model's runs at several temperatures are the sweep section's figure
    labels = {run_curve_label(r): r for r in runs}
    png = plot_k_curve_comparison({label: r.curves for label, r in labels.items()},
                                  out_dir / f"compare_{task.replace('/', '_')}.png",
                                  title=f"{task}: k-curves of {len(runs)} runs")
    kinds = sorted({k for r in runs for k in r.curves}, key=curve_sort_key)
    ks = powers_of_two(max(r.n for r in runs) or 1)
    rows = []
    for label, r in labels.items():
        for kind in kinds:
            c = r.curves.get(kind)
            if c is None:
                continue
            at = {int(k): (v, lo, hi) for k, v, lo, hi in zip(c.k, c.value, c.lo, c.hi, strict=True)}
            rows.append([label, curve_label(kind)]
                        + [f"{fmt_value(at[k][0], 3)} [{fmt_value(at[k][1], 3)}, {fmt_value(at[k][2], 3)}]" if k in at else "—"
                                              for k in ks])
    html = render("comparison.html.j2", task=task, n_runs=len(runs), fig=figure(png, f"k-curves of the {task} runs"),
                  values=Table(["run", "curve"] + [f"k={k}" for k in ks], rows))
    return html, {"task": task, "runs": [str(r.path) for r in runs], "figure": png.name}


def training_section(folders: Sequence[Path], out_dir: Path) -> tuple[Markup, dict]:
    """Training curves of checkpoint folders (their ``log.jsonl``), and their settings."""
    logs: dict[str, list[dict]] = {}
    rows = []
    for f in folders:
        # torn lines of a killed run are skipped; bytes that are not UTF-8 are a one-line error naming the line
        log = read_jsonl_log(f / "log.jsonl", "the checkpoint's training log is damaged; restore it or drop that folder",
                             skip_torn=True)
        logs[f.name] = log
        cfg = read_json(f / "train_config.json")
        last = log[-1] if log else {}
        rows.append((f.name, cfg.get("task"), cfg.get("objective"), json.dumps(cfg.get("objective_options") or {}),
                     len(log), fmt_value(last.get("reward")), fmt_value(last.get("kl_ref"))))
    png = plot_training_curves(logs, out_dir / "training_curves.png", title="training curves")
    evals = {f.name: read_jsonl_log(f / "evals.jsonl", "the checkpoint's evaluation log is damaged; restore it or drop "
                                    "that folder", skip_torn=True) for f in folders if (f / "evals.jsonl").is_file()}
    kept = {f.name: doc["keep_best"] for f in folders if (doc := _kept(f)) is not None}
    eval_png = (plot_evaluation_curves(evals, logs, kept, out_dir / "evaluation_curves.png",
                                       title="held-out evaluations during training") if evals else None)
    html = render("training.html.j2", fig=figure(png, "training curves"), checkpoints=Table(
        ["checkpoint", "task", "objective", "options", "steps logged", "last reward", "last KL to base"], rows),
                  eval_fig=figure(eval_png, "held-out evaluations during training") if eval_png else None)
    return html, {"checkpoints": [str(f) for f in folders], "logs": logs, "evals": evals, "kept": kept}


def _kept(folder: Path) -> dict | None:
    """The manifest of a checkpoint's kept step (``best/``, written as soon as a step is kept), if any."""
    path = folder / "best" / "bonbench_manifest.json"
    doc = read_json(path) if path.is_file() else None
    return doc if doc is not None and "keep_best" in doc else None

def bon_references_section(run: Any, idx: int, out_dir: Path) -> tuple[Markup, list[dict]]:
    """Measured winrate@k and kl_bon@k beside k/(k+1) and log k - (k-1)/k (reward-judged runs)."""
    rows = bon_reference_rows(run)
    if not rows:
        return Markup(""), []
    against = next((r.against for r in rows if r.against), "")
    kl_ref = next((str(r.kl_bon.notes.get("reference", "")) for r in rows if r.kl_bon is not None), "")
    table = Table(["N", "winrate@N [95% CI]", "N/(N+1)", "kl_bon@N [95% CI]", "log N − (N−1)/N"],
                  [(r.k, metric_cell(r.winrate), fmt_value(r.winrate_analytic), metric_cell(r.kl_bon), fmt_value(r.kl_analytic))
                   for r in rows])
    png = plot_bon_references(rows, out_dir / f"run{idx:02d}_{run.hash}_bon_references.png", title=run.label())
    html = render("bon_references.html.j2", against=against, kl_ref=kl_ref, references=table,
                  fig=figure(png, f"best-of-N references of {run.label()}"))
    info = [{"k": r.k, "winrate": None if r.winrate is None else {"value": r.winrate.value, "ci95": r.winrate.ci95},
             "winrate_analytic": r.winrate_analytic, "against": r.against,
             "kl_bon": None if r.kl_bon is None else {"value": r.kl_bon.value, "ci95": r.kl_bon.ci95},
             "kl_analytic": r.kl_analytic} for r in rows]
    return html, info


def plane_section(key: tuple[str, str], points: list[Any], idx: int, out_dir: Path, bon: Any = None) -> tuple[Markup, dict]:
    """One reward-vs-KL plane: every point with both CIs, the Pareto front marked and drawn, and the
    reference's analytic best-of-N curve when its own run has a max@k curve."""
    task, reference = key
    front = pareto_front(points)
    on_front = {id(p) for p in front}
    table = Table(["point", "run", "method", "KL [95% CI]", "reward [95% CI]", "Pareto front"],
                  [(p.label, p.run, p.method, f"{fmt_value(p.kl)} [{fmt_value(p.kl_ci[0])}, {fmt_value(p.kl_ci[1])}]",
                    f"{fmt_value(p.reward)} [{fmt_value(p.reward_ci[0])}, {fmt_value(p.reward_ci[1])}]",
                    "yes" if id(p) in on_front else "") for p in points])
    png = plot_reward_kl(points, front, out_dir / f"plane{idx:02d}_{task}.png", title=f"{task}: reward vs KL",
                         reference=reference, bon=bon)
    html = render("plane.html.j2", task=task, reference=reference, points=table, footnotes=footnotes(["kl"]), bon=bon,
                  bon_n=None if bon is None else int(bon.n[-1]), fig=figure(png, f"reward vs KL on {task}"))
    info = {"task": task, "reference": reference, "points": [asdict(p) for p in points],
            "pareto_front": [p.label for p in front],
            "bon_curve": None if bon is None else {"run": bon.run, "n": bon.n.tolist(), "kl": bon.kl.tolist(),
                                                   "reward": bon.reward.tolist(), "lo": bon.lo.tolist(), "hi": bon.hi.tolist()}}
    return html, info
