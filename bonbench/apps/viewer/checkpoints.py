"""The ``bonbench train`` checkpoints a viewer shows: their training log by step, and the runs that
evaluated them.

``find_checkpoints`` finds every checkpoint folder under the folders given (a folder with
``train_config.json`` and ``log.jsonl``, finished or still training: the rule
``bonbench.apps.analysis.html.has_training_log`` states for reports). A ``CheckpointView`` reads
its files only through the same door as a run (``RunView.file``: nothing linked outside the
folders given). ``log_plots`` draws every number the log holds against the step (reward, KL to the
base, entropy, loss, gradient norms, speed: whatever the objective logged, as TensorBoard shows
every scalar); a torn last line of a run still training is skipped. ``evaluated_by`` links the
runs whose model is the checkpoint: its folder, or the training hash its manifest records
(config.json's ``model_training``, for a checkpoint that moved since). ``evals`` reads
``evals.jsonl`` (the evaluations ``bonbench train --eval-task`` made during training: each step's run
directory under ``CHECKPOINT/evals/``, metrics with CIs, paired differences to step 0), and
``eval_plots`` draws each metric by step with its band; ``kept`` and ``stopped`` read the manifest's
``keep_best`` (the step whose weights were kept) and ``stopped`` (a guard ended training), absent in
older checkpoints.

What it does not do: render (``pages``) or read a run's rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bonbench.api.metric.grammar import metric_sort_key
from bonbench.apps.viewer.curves import Plot, Series, frame
from bonbench.apps.viewer.runs import RunView, ids_for
from bonbench.core.errors import BonbenchError
from bonbench.core.outputs import read_jsonl_log

COLOR = "#1f77b4"
KEPT = "#2ca02c"  # the kept step's line
EVALS = "evals.jsonl"  # the evaluations during training (bonbench.apps.trainer.evaluate)
SKIP = frozenset({"step", "time", "elapsed", "timestamp", "epoch"})  # the axis and the clock, not quantities


class CheckpointView(RunView):
    """One checkpoint folder: its train config, manifest and training log (a run directory's door to files)."""

    def train_config(self) -> dict[str, Any]:
        return self.json_file("train_config.json")

    def manifest(self) -> dict[str, Any]:
        return self.json_file("bonbench_manifest.json")

    def log(self) -> list[dict[str, Any]]:
        """The rows of log.jsonl (a torn last line, or a line that is not JSON, skipped)."""
        path = self.file("log.jsonl")
        if path is None:
            return []
        try:
            rows = read_jsonl_log(path, "restore the training log or drop that folder", skip_torn=True)
        except BonbenchError:
            return []
        return [r for r in rows if isinstance(r, dict)]

    def evals(self) -> list[dict[str, Any]]:
        """The rows of evals.jsonl (``bonbench train --eval-task``: one per evaluated step, its run
        directory, metrics and paired differences to step 0), by step; a torn or non-JSON line skipped."""
        path = self.file(EVALS)
        if path is None:
            return []
        try:
            rows = read_jsonl_log(path, "restore evals.jsonl or drop that folder", skip_torn=True)
        except BonbenchError:
            return []
        good = [r for r in rows if isinstance(r, dict) and _number(r.get("step")) and isinstance(r.get("metrics"), Mapping)]
        return sorted(good, key=lambda r: float(r["step"]))

    def kept(self) -> Mapping[str, Any]:
        """The manifest's ``keep_best`` (``{"metric", "step", "rule"}``: the step whose weights were kept),
        or {} (a checkpoint trained without --keep-best, or before it existed)."""
        kept = self.manifest().get("keep_best")
        return kept if isinstance(kept, Mapping) and _number(kept.get("step")) else {}

    def stopped(self) -> Mapping[str, Any]:
        """The manifest's ``stopped`` (``{"rule", "step", "reason"}``: a --stop-if guard ended training), or {}."""
        stopped = self.manifest().get("stopped")
        return stopped if isinstance(stopped, Mapping) else {}


def find_checkpoints(folders: Sequence[Path], taken: Sequence[str] = ()) -> list[CheckpointView]:
    """Every checkpoint folder under ``folders`` (each one itself, or a tree), in order, duplicates
    dropped; ids unlike ``taken`` (the runs')."""
    found: list[tuple[Path, Path]] = []
    seen: set[Path] = set()
    for folder in map(Path, folders):
        if not folder.is_dir():
            continue
        candidates = [folder] if (folder / "train_config.json").is_file() else sorted(
            p.parent for p in folder.rglob("train_config.json"))
        for path in candidates:
            real = path.resolve()
            if (path / "log.jsonl").is_file() and real not in seen and real.is_relative_to(folder.resolve()):
                seen.add(real)
                found.append((path, folder))
    ids = ids_for([p for p, _ in found], taken)
    return [CheckpointView(i, p, f) for i, (p, f) in zip(ids, found, strict=True)]


def log_plots(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, Plot]]:
    """One plot per number the log holds, by step, in the order the log first names them."""
    keys: dict[str, None] = {}
    for row in rows:
        keys.update({k: None for k, v in row.items() if k not in SKIP and isinstance(v, (int, float))
                     and not isinstance(v, bool)})
    out = []
    for key in keys:
        points = [(float(r["step"]), float(r[key])) for r in rows if isinstance(r.get("step"), (int, float))
                  and isinstance(r.get(key), (int, float)) and math.isfinite(float(r[key]))]
        plot = frame([Series(key, COLOR, points)], log_x=False, x_label="step", unit_y=False)
        if plot is not None:
            out.append((key, plot))
    return out


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(float(x))


def eval_plots(rows: Sequence[Mapping[str, Any]], kept_step: float | None = None) -> list[tuple[str, Plot]]:
    """One plot per dataset metric of evals.jsonl, its value by step with the 95% CI band; the kept
    step (``keep_best``) drawn as a vertical line."""
    names: dict[str, None] = {}
    for row in rows:
        names.update({n: None for n, m in row["metrics"].items() if isinstance(m, Mapping) and "[" not in n})
    out = []
    for name in sorted(names, key=metric_sort_key):
        points, band = [], []
        for row in rows:
            m = row["metrics"].get(name)
            if not isinstance(m, Mapping) or not _number(m.get("value")):
                continue
            step = float(row["step"])
            points.append((step, float(m["value"])))
            ci = m.get("ci95")
            if isinstance(ci, list) and len(ci) == 2 and all(_number(v) for v in ci):
                band.append((step, float(ci[0]), float(ci[1])))
        series = [Series(name, COLOR, points, band)]
        if kept_step is not None and points:
            ys = [y for _, y in points] + [v for _, lo, hi in band for v in (lo, hi)]
            series.append(Series(f"kept: step {kept_step:g}", KEPT, [(kept_step, min(ys)), (kept_step, max(ys))]))
        plot = frame(series, log_x=False, x_label="step", unit_y=True)
        if plot is not None:
            out.append((name, plot))
    return out


def evaluated_by(checkpoint: CheckpointView, runs: Sequence[RunView]) -> list[RunView]:
    """The runs whose model is this checkpoint (its folder, or its training hash)."""
    real = checkpoint.path.resolve()
    trained = checkpoint.manifest().get("training_hash")
    out = []
    for run in runs:
        model = str(run.config().get("model") or "")
        same_folder = bool(model) and Path(model).expanduser().resolve() == real
        summary = run.config_file().get("model_training") or {}
        same_hash = bool(trained) and isinstance(summary, Mapping) and summary.get("training_hash") == trained
        if same_folder or same_hash:
            out.append(run)
    return out
