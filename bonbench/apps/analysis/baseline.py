"""Gate baseline files: write one from a finished run, read one back, and refuse what is not a run.

``save_baseline`` stores one run's gated metrics (value, CI, problem count, direction), their
per-problem values, the run's problem ids, config, grading and provenance, to be committed under
``results/baselines/``. Which metrics: those named, else those the run was asked for
(config.json's ``metrics``) and their per-group values, in both cases only metrics with a better
side that are not closed-form (``bonbench.api.metric.readings.metric_info``): ``kl_bon@k`` beside ``max@k`` is neither
requested nor a model measurement, and is left out. ``default_metrics`` (what the gate checks
without ``--metric``) are the dataset-level ones: gating every group by default would multiply
the tests and with them the false alarms. ``load_baseline`` reads files of this schema, including those written
before ``problem_ids``/``grading``/``direction`` were stored (the problem ids are then the
per-problem values' ids, the direction the metric's known one).

Every file problem is one ``BonbenchError`` line naming the fix: a checkpoint folder passed where a
run directory belongs, a baseline that is not UTF-8 or not JSON, an output folder that is read-only
or full. Comparing a run with a baseline is ``gate``'s job, not this module's.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bonbench.api.metric.readings import metric_info
from bonbench.apps.analysis.rundir import Metric, RunData, load_run
from bonbench.core import outputs
from bonbench.core.errors import BonbenchError
from bonbench.metrics.info import MetricInfo
from bonbench.metrics.names import split_metric_name

BASELINE_SCHEMA = 1


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
    dataset_fingerprint: str = ""
    # the problems the source run scored (files before this field: the per-problem values' ids)
    problem_ids: tuple[str, ...] = ()
    grading: Mapping[str, Any] = field(default_factory=dict)
    directions: Mapping[str, str | None] = field(default_factory=dict)
    # gated when no --metric is given (files before this field: every metric)
    default_metrics: tuple[str, ...] = ()


def is_model_folder(path: Path) -> bool:
    """A model folder (a ``bonbench train`` checkpoint, finished or not, or any saved transformers
    model), not a run directory: what the gate and the leaderboard refuse as ``--run`` with the
    command that evaluates it. (``html.has_training_log`` is the narrower rule of the folders whose
    training curves a report plots.)"""
    path = Path(path)
    if any((path / f).is_file() for f in ("bonbench_manifest.json", "train_config.json", "log.jsonl")):
        return True
    cfg = path / "config.json"
    if not cfg.is_file() or (path / "metrics.json").is_file():
        return False
    try:
        doc = json.loads(cfg.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    # a transformers model config, not a bonbench run's config.json (which has "hash" and "config")
    return isinstance(doc, dict) and "hash" not in doc and ("model_type" in doc or "architectures" in doc)


def load_gate_run(path: Path | str, task: str | None = None) -> RunData:
    """``rundir.load_run`` with a one-line refusal of a model folder passed as ``--run``."""
    path = Path(path)
    if is_model_folder(path):
        raise BonbenchError(
            f"{path} is a model checkpoint, not a run directory: evaluate it first with `bonbench run --task "
            f"{task or 'TASK'} --model {path} --metric ...` (the baseline's settings) and pass the run directory it "
            "prints (results/runs/<task>/<model>/<hash>) to --run")
    return load_run(path)


def read_json_file(path: Path, what: str, fix: str) -> Any:
    """JSON from ``path``, or one line naming the file, the problem (missing, not UTF-8, not JSON) and ``fix``."""
    if not Path(path).exists():
        raise BonbenchError(f"{what} {path} not found; {fix}")
    return outputs.read_json(path, fix=fix)


def default_baseline_path(run: RunData) -> Path:
    root = Path(os.environ.get("BONBENCH_OUT", "results"))
    return root / "baselines" / f"{run.task}--{run.model_slug}.json"


def run_problem_ids(run: RunData) -> tuple[str, ...]:
    """The problem ids a run scored: every id with a per-problem value (sorted)."""
    return tuple(sorted({pid for vals in run.per_problem.values() for pid in vals}))


def run_metric_info(run: RunData, name: str) -> MetricInfo:
    m = run.metrics[name]
    return metric_info(name, m.notes, run.per_problem.get(name))


def _saved_metric_names(run: RunData, metrics: Sequence[str] | None) -> list[str]:
    """The metrics ``--save-baseline`` stores: those named (each must be gateable), else the run's
    requested ones that are gateable."""
    if metrics:
        names = list(dict.fromkeys(metrics))
        missing = [m for m in names if m not in run.metrics]
        if missing:
            raise BonbenchError(f"{run.path} has no metric {', '.join(missing)} (has: {', '.join(run.metrics)}); "
                                "rescore with --metric or drop it")
        for name in names:
            info = run_metric_info(run, name)
            if info.closed_form:
                raise BonbenchError(f"{name} is a closed-form function of n and k here (the same value on every problem, "
                                    "no sampling noise), not a measurement of the model; drop --metric " + name)
            if not info.can_gate:
                raise BonbenchError(f"{name}: its metric kind is not gated (`bonbench list metrics`); drop --metric {name}")
            if info.direction is None:
                raise BonbenchError(f"{name} has no better side (a count or report); gate metrics such as pass@k, "
                                    "bon@k, mean or kl instead")
        return names
    requested = [m for m in run.config.get("metrics") or [] if m in run.metrics] or list(run.metrics)
    # with each requested metric its per-group values (pass@1[level=3]), so that `gate --metric` can
    # name one; the gate's default set is the requested ones only (``default_metrics``)
    groups = [m for m in run.metrics if split_metric_name(m)[1] is not None and split_metric_name(m)[0] in requested]
    names = [m for m in dict.fromkeys(requested + groups) if run_metric_info(run, m).gateable]
    if not names:
        raise BonbenchError(f"{run.path} has no metric to gate (has: {', '.join(run.metrics) or 'none'}); "
                            "score it with --metric pass@1 (or mean on a reward task) first")
    return names


def save_baseline(run_dir: Path, out: Path | None = None, metrics: Sequence[str] | None = None) -> Path:
    """Write the baseline file for ``run_dir`` (``metrics``, or the run's requested gateable ones) and
    return its path."""
    run = load_gate_run(run_dir)
    if not run.metrics:
        raise BonbenchError(f"{run.path} has no metrics; score the run first")
    names = _saved_metric_names(run, metrics)
    doc = {
        "bonbench_baseline": BASELINE_SCHEMA,
        "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "source_run": str(run.path),
        "task": run.task,
        "model": run.model,
        "hash": run.hash,
        "bonbench_version": run.bonbench_version,
        "dataset_fingerprint": run.dataset_fingerprint,
        "config": dict(run.config),
        "provenance": dict(run.provenance),
        "grading": dict(run.meta.get("grading") or {}),
        "problem_ids": list(run_problem_ids(run)),
        # what `gate` checks without --metric: the dataset-level metrics, not every group's
        "default_metrics": [m for m in names if split_metric_name(m)[1] is None] or names,
        "metrics": {m: {"value": run.metrics[m].value, "ci95": list(run.metrics[m].ci95),
                        "n_problems": run.metrics[m].n_problems, "direction": run_metric_info(run, m).direction}
                    for m in names},
        "per_problem": {m: dict(run.per_problem[m]) for m in names if m in run.per_problem},
    }
    path = Path(out) if out is not None else default_baseline_path(run)
    outputs.write_json(path, doc)  # atomic: a read-only folder or a full disk is one line, the old file stays
    return path


def load_baseline(path: Path) -> Baseline:
    """Read a baseline file written by ``save_baseline`` (any version of schema 1)."""
    path = Path(path)
    if path.is_dir():
        raise BonbenchError(f"baseline {path} is a folder; pass the baseline JSON file "
                            "(e.g. results/baselines/<task>--<model>.json)")
    fix = "regenerate it with `bonbench gate --save-baseline --run RUN_DIR`"
    doc = read_json_file(path, "baseline",
                         fix if path.exists() else "create it with `bonbench gate --save-baseline --run RUN_DIR`")
    if not isinstance(doc, dict) or doc.get("bonbench_baseline") != BASELINE_SCHEMA or not isinstance(doc.get("metrics"), dict):
        raise BonbenchError(f"{path} is not a bonbench baseline (schema {BASELINE_SCHEMA}); {fix}")
    metrics, directions = {}, {}
    try:
        for name, m in doc["metrics"].items():
            lo, hi = (math.nan if x is None else float(x) for x in (m.get("ci95") or [None, None]))
            value = math.nan if m.get("value") is None else float(m["value"])  # null: withheld by the task
            metrics[name] = Metric(value, (lo, hi), int(m.get("n_problems", 0)))
            directions[name] = m["direction"] if "direction" in m else metric_info(name).direction
        per_problem = {name: {str(k): float(v) for k, v in vals.items() if v is not None}
                       for name, vals in (doc.get("per_problem") or {}).items()}
    except (AttributeError, TypeError, ValueError) as exc:
        raise BonbenchError(f"{path} has a malformed metric entry ({exc}); {fix}") from None
    ids = doc.get("problem_ids") or sorted({pid for vals in per_problem.values() for pid in vals})
    return Baseline(path=path, task=str(doc.get("task", "")), model=str(doc.get("model", "")), metrics=metrics,
                    per_problem=per_problem, config=doc.get("config") or {}, provenance=doc.get("provenance") or {},
                    dataset_fingerprint=str(doc.get("dataset_fingerprint") or ""), problem_ids=tuple(str(i) for i in ids),
                    grading=doc.get("grading") or {}, directions=directions,
                    default_metrics=tuple(m for m in doc.get("default_metrics") or metrics if m in metrics))
