"""A prepared run: its resolved config, task, selected problems and run directory
(``PreparedRun``), the ids that key its stored rows (grading settings, verifier, problem set), and
config.json.

``prepare`` resolves a run without loading a model or writing anything; ``open_run`` writes (or
refreshes) config.json, ``write_sweep`` a sweep's ``sweep.json``. The stages that fill the directory
are ``bonbench.pipeline.stages``; the metrics ``bonbench.pipeline.scoring``.

This module samples, grades and scores nothing and writes no rows; it builds no task and picks no
verifier (``bonbench.run`` does, and passes them in), and it computes no metric.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bonbench import __version__
from bonbench.api.task import Task
from bonbench.api.verifier import Verifier
from bonbench.core.config import HASH_SCHEME, RunConfig, config_hash, model_slug
from bonbench.core.errors import BonbenchError
from bonbench.core.models import training_summary
from bonbench.core.provenance import git_sha, versions
from bonbench.core.records import Problem
from bonbench.core.store import RunStore, atomic_write_json


@dataclass(frozen=True)
class PreparedRun:
    cfg: RunConfig
    task: Task
    problems: tuple[Problem, ...]
    store: RunStore
    run_hash: str


def select_problems(task: Task, limit: int | None) -> tuple[Problem, ...]:
    """The first ``limit`` problems in dataset order (all when None)."""
    if limit is not None and limit < 1:
        raise BonbenchError(f"--limit must be >= 1 (got {limit})")
    problems = task.problems if limit is None else task.problems[:limit]
    if not problems:
        raise BonbenchError(f"task {task.name!r} selected no problems; relax the -T filters")
    return tuple(problems)


def prepare(task: Task, cfg: RunConfig, out: Path) -> PreparedRun:
    """Resolve the run directory for ``cfg`` (no model loaded, nothing written).

    Raises when the directory already belongs to another run id. ``open_run`` writes config.json;
    a dry run stops before it, so it leaves an existing run exactly as it was.
    """
    cfg = replace(cfg, task_version=task.version, task_hash_args=dict(task.hash_args), prompt_id=task.prompt_id)
    run_hash = config_hash(cfg)
    store = RunStore(RunStore.path_for(out, task.name, model_slug(cfg.model), run_hash))
    problems = select_problems(task, cfg.limit)
    if store.exists():
        old = store.read_config()
        if old.get("hash") != run_hash:
            raise BonbenchError(f"{store.config_path} belongs to run {old.get('hash')!r}, not {run_hash!r}; "
                                "remove that directory")
    return PreparedRun(cfg=cfg, task=task, problems=problems, store=store, run_hash=run_hash)


def open_run(run: PreparedRun, extra: dict[str, Any] | None = None) -> None:
    """Write (or refresh) the run's ``config.json``; keeps ``created`` and the verifiers already used.

    ``extra`` adds top-level facts (e.g. ``imported``: where a samples file came from).
    """
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    old = run.store.read_config() if run.store.exists() else {}
    doc: dict[str, Any] = {
        "hash": run.run_hash,
        "hash_scheme": HASH_SCHEME,
        "hashed": run.cfg.hashed(),
        "config": run.cfg.to_json(),
        "task": run.task.name,
        "bonbench_version": __version__,
        "dataset_fingerprint": run.task.fingerprint,
        "versions": versions(),
        "git_sha": git_sha(),
        "created": old.get("created", now),
        "updated": now,
        "verifiers": list(old.get("verifiers", [])),
    }
    for key in ("imported",):
        if key in old:
            doc[key] = old[key]
    # a bonbench checkpoint's objective and settings, so reports can group checkpoints by method
    # without the checkpoint folder (not hashed: the model fingerprint already covers its weights)
    training = training_summary(run.cfg.model)
    if training is not None:
        doc["model_training"] = training
    doc.update(extra or {})
    run.store.write_config(doc)


def record_verifier(run: PreparedRun, name: str) -> None:
    """Add ``name`` to config.json's ``verifiers`` (every verifier this run has been scored with)."""
    if not run.store.exists():
        open_run(run)
    doc = run.store.read_config()
    used = list(doc.get("verifiers", []))
    if name not in used:
        doc["verifiers"] = used + [name]
        run.store.write_config(doc)


def grading_id(task: Task) -> str:
    """The id of the task's grading settings (``Task.grade_args``); "" when it has none.

    Not a hash of the problems: the dataset fingerprint covers those. JSON with sorted keys, so
    the id does not depend on argument order; values are the factory's (already parsed) ones.
    """
    if not task.grade_args:
        return ""
    blob = json.dumps(dict(task.grade_args), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def grading(task: Task) -> dict[str, Any]:
    """What metrics.json records under ``grading``: grader, its version, the settings and their id."""
    return {"grader": task.grader.name, "grader_version": task.grader.version,
            "grade_args": dict(task.grade_args), "grading_id": grading_id(task)}


def scorer_id(run: PreparedRun, verifier: Verifier) -> tuple[int, str]:
    """(version, fingerprint) that key a verifier's stored scores in this run.

    A verifier that scores from the grades (``uses_grades``, e.g. ``oracle``) folds the grader, its
    version and the grading settings into the fingerprint, so that a regrade re-scores it too.
    """
    version = int(getattr(verifier, "version", 1))
    fingerprint = str(getattr(verifier, "fingerprint", ""))
    if getattr(verifier, "uses_grades", False):
        g = grading(run.task)
        fingerprint = f"{fingerprint}|{g['grader']}:{g['grader_version']}:{g['grading_id']}"
    return version, fingerprint


def problem_set_id(problems: Iterable[Problem]) -> str:
    """The id of a problem selection (metrics.json's ``problem_set``; a shard's ``selection``)."""
    return hashlib.sha256("\n".join(p.id for p in problems).encode()).hexdigest()[:12]


def write_sweep(runs: Sequence[PreparedRun], out: Path) -> Path:
    """Record a sweep (one run per sampling setting, same task/model/n) in ``sweep.json``."""
    first = runs[0]
    key = hashlib.sha256("\n".join(r.run_hash for r in runs).encode()).hexdigest()[:12]
    path = Path(out) / "sweeps" / first.task.name / model_slug(first.cfg.model) / key / "sweep.json"
    atomic_write_json(path, {
        "task": first.task.name,
        "model": first.cfg.model,
        "n": first.cfg.n,
        "runs": [{"temperature": r.cfg.temperature, "top_p": r.cfg.top_p, "hash": r.run_hash,
                  "run_dir": str(r.store.root.resolve())} for r in runs],
    })
    return path
