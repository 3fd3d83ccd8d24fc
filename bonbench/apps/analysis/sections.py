"""Two sections of ``report.html``: several runs' k-curves on shared axes (the base next to its
checkpoints), and the training curves of ``bonbench train`` checkpoint folders.

Each returns its HTML and the JSON ``report.json`` keeps for it; the figures are ``plots``'. This
module reads the checkpoints' ``log.jsonl`` and ``train_config.json`` and nothing else.
"""

from __future__ import annotations

import html as html_lib
import json
from pathlib import Path
from typing import Any, Sequence

from bonbench.apps.analysis.html import fmt_value, img_tag, powers_of_two, table_html


def run_curve_label(run: Any) -> str:
    """How a run is named in a comparison legend: model, temperature, n and its config hash."""
    return f"{run.model_slug} T={run.temperature:g} n={run.n} ({run.hash})"


def comparison_section(task: str, runs: Sequence[Any], out_dir: Path) -> tuple[str, dict]:
    """The k-curves of every run of ``task`` on shared axes (base and checkpoints side by side), and
    the values at k = 1, 2, 4, ... up to the largest n; nothing unless two or more models ran it."""
    from bonbench.apps.analysis.plots import plot_k_curve_comparison

    if len({r.model_slug for r in runs}) < 2:
        return "", {}  # one model's runs at several temperatures are the sweep section's figure
    labels = {run_curve_label(r): r for r in runs}
    png = plot_k_curve_comparison({label: r.curves for label, r in labels.items()},
                                  out_dir / f"compare_{task.replace('/', '_')}.png", title=f"{task}: k-curves of {len(runs)} runs")
    kinds = [k for k in ("pass", "bon", "maj", "max") if any(k in r.curves for r in runs)]
    ks = powers_of_two(max(r.n for r in runs) or 1)
    rows = []
    for label, r in labels.items():
        for kind in kinds:
            c = r.curves.get(kind)
            if c is None:
                continue
            at = {int(k): (v, lo, hi) for k, v, lo, hi in zip(c.k, c.value, c.lo, c.hi)}
            rows.append([label, f"{kind}@k"] + [f"{fmt_value(at[k][0], 3)} [{fmt_value(at[k][1], 3)}, {fmt_value(at[k][2], 3)}]" if k in at else "—"
                                              for k in ks])
    parts = [f"<section><h2>Comparison: {html_lib.escape(task)}, {len(runs)} runs on shared axes</h2>",
             "<p class=\"note\">Every run of this task that has k-curves, one colour each, with 95% bootstrap bands over "
             "problems. Runs on different problems or settings are not paired here; the leaderboard pairs them.</p>",
             img_tag(png, f"k-curves of the {task} runs"), table_html(["run", "curve"] + [f"k={k}" for k in ks], rows), "</section>"]
    return "\n".join(parts), {"task": task, "runs": [str(r.path) for r in runs], "figure": png.name}


def training_section(folders: Sequence[Path], out_dir: Path) -> tuple[str, dict]:
    """Training curves of checkpoint folders (their ``log.jsonl``), and their settings."""
    from bonbench.apps.analysis.plots import plot_training_curves
    from bonbench.core.outputs import read_json, read_jsonl

    logs: dict[str, list[dict]] = {}
    rows = []
    for f in folders:
        # torn lines of a killed run are skipped; bytes that are not UTF-8 are a one-line error naming the line
        log = read_jsonl(f / "log.jsonl", "the checkpoint's training log is damaged; restore it or drop that folder",
                         skip_torn=True)
        logs[f.name] = log
        cfg = read_json(f / "train_config.json")
        last = log[-1] if log else {}
        rows.append((f.name, cfg.get("task"), cfg.get("objective"), json.dumps(cfg.get("objective_options") or {}),
                     len(log), fmt_value(last.get("reward")), fmt_value(last.get("kl_ref"))))
    parts = ["<section><h2>Training</h2>",
             table_html(["checkpoint", "task", "objective", "options", "steps logged", "last reward", "last KL to base"], rows)]
    png = plot_training_curves(logs, out_dir / "training_curves.png", title="training curves")
    parts.append(img_tag(png, "training curves"))
    parts.append("</section>")
    return "\n".join(parts), {"checkpoints": [str(f) for f in folders], "logs": logs}
