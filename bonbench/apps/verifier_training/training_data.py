"""The training rows of a learned verifier: graded samples of ``bonbench run`` directories joined
by key, and the check that none of their problems is an evaluation problem.

Every run directory is reopened through ``bonbench.run.resolve.load_task`` (the task rebuilt from
config.json, its grader configured as ``bonbench run`` configures it); its samples and the grades of
the task's current grader are joined by (problem_id, sample_idx). This module reads runs and task
data; it computes no features and writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bonbench.api.task import task_family
from bonbench.core.errors import BonbenchError
from bonbench.core.models import resolve_model
from bonbench.core.records import Grade, Problem, Sample
from bonbench.core.store import RunStore
from bonbench.pipeline.prepared import grading_id
from bonbench.plugins.verifiers.manifest import model_type
from bonbench.run.resolve import load_task

# The evaluation sets of each task family (``Task.family``): (task, task args). Training problems must
# be none of these. Keyed by the family names verifier manifests record ("math", "code").
EVAL_SETS: dict[str, tuple[tuple[str, dict[str, str]], ...]] = {
    "math": (("math", {"split": "test"}), ("math500", {})),
    "code": (("mbpp", {"split": "test"}), ("mbpp", {"split": "test", "variant": "sanitized"}), ("humaneval", {})),
}


@dataclass(frozen=True)
class LabelledSample:
    """One training row: a graded sample of a run, keyed by (run hash, problem_id, sample_idx)."""

    run: str
    problem: Problem
    sample: Sample
    label: int

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.run, self.sample.problem_id, self.sample.sample_idx)


@dataclass(frozen=True)
class TrainingData:
    rows: tuple[LabelledSample, ...]
    family: str
    tasks: tuple[str, ...]
    policy: Mapping[str, Any]  # name, fingerprint, model_type of the model that drew the samples
    runs: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)

    def fingerprint(self) -> str:
        h = hashlib.sha256()
        for r in sorted(self.rows, key=lambda r: r.key):
            h.update(json.dumps([*r.key, r.label, hashlib.sha256(r.sample.completion.encode()).hexdigest()]).encode())
        return "sha256:" + h.hexdigest()[:16]


def normalised_text_hash(text: str) -> str:
    """Problem identity across datasets whose ids differ: lowercased, whitespace collapsed."""
    return hashlib.sha256(re.sub(r"\s+", " ", text).strip().lower().encode()).hexdigest()


def policy_family(cfg: Mapping[str, Any]) -> str | None:
    """The model type (``gemma3``, ...) of the model a run sampled from; None for a served or imported model."""
    try:
        return model_type(resolve_model(cfg["model"]).path)
    except BonbenchError:
        return None  # a served or imported model: no config.json to read the family from


@dataclass(frozen=True)
class _RunRows:
    """One run directory's labelled rows, its task and family, its config and its manifest record."""

    rows: list[LabelledSample]
    task: str
    family: str
    cfg: Mapping[str, Any]
    record: Mapping[str, Any]


def _run_rows(d: Path, *, data_dir: str | None, family: str | None) -> _RunRows:
    """The labelled rows of run directory ``d``; a run of another family than ``family`` (a task
    name, read as its family) is refused."""
    store = RunStore(Path(d))
    if not store.exists():
        raise BonbenchError(f"--samples-from {str(d)!r} is not a run directory (no config.json); pass the directory "
                            "`bonbench run` printed")
    doc = store.read_config()
    cfg = doc["config"]
    task = load_task(cfg["task"], cfg.get("task_args", {}), data_dir=data_dir, out=store.results_root)
    if task.judged_by != "correctness":
        raise BonbenchError(f"run {d} is of task {task.name!r}, judged by a reward model: a learned verifier learns "
                            "correctness; use a task with a grader (math, mbpp, ...)")
    if family is not None and task.family != task_family(family):
        raise BonbenchError(f"run {d} is of task {task.name!r} (family {task.family}), not {family!r}; drop it or change --task")
    problems = {p.id: p for p in task.problems}
    samples = store.samples.read()
    if not samples:
        raise BonbenchError(f"run {d} has no samples; run `bonbench run` with its settings first")
    unknown = sorted({pid for pid, _ in samples} - set(problems))
    if unknown:
        raise BonbenchError(f"run {d} has samples of {len(unknown)} problems its task args do not select (e.g. "
                            f"{unknown[0]!r}); train from runs made with one set of -T filters")
    gid = grading_id(task)
    grades: dict[tuple[str, int], Grade] = store.grades(task.grader.name).read(
        lambda g: g.graded_under(task.grader.version, gid))
    ungraded = [k for k in samples if k not in grades]
    if ungraded:
        raise BonbenchError(f"run {d} has {len(ungraded)} samples without grades (e.g. {ungraded[0]}); grade them "
                            f"with `bonbench score {d}`")
    rows = [LabelledSample(doc["hash"], problems[key[0]], samples[key], 1 if grades[key].correct else 0)
            for key in sorted(samples)]
    record = {"run_dir": str(Path(d).resolve()), "hash": doc["hash"], "task": task.name,
              "task_args": cfg.get("task_args", {}), "n_samples": len(samples)}
    return _RunRows(rows, task.name, task.family, cfg, record)


def assemble(run_dirs: Sequence[Path], *, data_dir: str | None = None, family: str | None = None) -> TrainingData:
    """Graded samples of ``run_dirs`` joined by key; a sample without a grade, a reward-judged task,
    runs of different task families or of different policies are refused with a one-line error."""
    if not run_dirs:
        raise BonbenchError("give at least one --samples-from RUN_DIR (a run directory `bonbench run` printed)")
    rows: list[LabelledSample] = []
    tasks, families, policies, runs = set(), set(), {}, []
    for d in run_dirs:
        run = _run_rows(Path(d), data_dir=data_dir, family=family)
        rows += run.rows
        tasks.add(run.task)
        families.add(run.family)
        policies[run.cfg["model_fingerprint"]] = run.cfg
        runs.append(run.record)
    if len(families) > 1:
        raise BonbenchError(f"the runs are of tasks of different families ({', '.join(sorted(tasks))}); "
                            "train one verifier per family")
    if len(policies) > 1:
        names = sorted({c["model"] for c in policies.values()})
        raise BonbenchError(f"the runs were sampled by {len(policies)} different models ({', '.join(names)}); a verifier "
                            "learns one policy's samples: pass runs of one model")
    cfg = next(iter(policies.values()))
    policy = {"name": cfg["model"], "fingerprint": cfg["model_fingerprint"], "model_type": policy_family(cfg)}
    return TrainingData(rows=tuple(rows), family=families.pop(), tasks=tuple(sorted(tasks)), policy=policy, runs=tuple(runs))


def check_no_eval_problems(data: TrainingData, *, data_dir: str | None = None,
                           drop: bool = False) -> tuple[TrainingData, dict[str, Any]]:
    """Refuse training rows whose problem is in one of the family's evaluation sets, by id or by
    normalised text; with ``drop``, leave those problems out instead (MBPP's train split repeats a
    few test-split task texts). Returns the data to train on and what was checked (for the manifest)."""
    sets = EVAL_SETS.get(data.family, ())
    if not sets:
        raise BonbenchError(f"bonbench has no evaluation sets listed for task family {data.family!r}, so it cannot check "
                            "that evaluation problems are excluded; use math or mbpp runs")
    train_ids = {r.problem.id for r in data.rows}
    train_text = {normalised_text_hash(r.problem.input): r.problem.id for r in data.rows}
    checked, dropped = [], set()
    for name, args in sets:
        task = load_task(name, args, data_dir=data_dir, out=Path("results"))
        by_id = sorted(train_ids & {p.id for p in task.problems})
        by_text = sorted(train_text[h] for h in {normalised_text_hash(p.input) for p in task.problems} & set(train_text))
        bad = by_id or by_text
        if bad and not drop:
            how = "id" if by_id else "problem text"
            label = " ".join([name] + [f"{k}={v}" for k, v in args.items()])
            raise BonbenchError(f"{len(bad)} training problems are evaluation problems of {label} "
                                f"(same {how}, e.g. {bad[0]!r}); sample "
                                "the training runs from the train split (-T split=train), or pass --drop-eval-overlap "
                                "to leave them out")
        dropped |= set(by_id) | set(by_text)
        checked.append({"task": name, "task_args": args, "n_problems": len(task.problems), "fingerprint": task.fingerprint})
    kept = tuple(r for r in data.rows if r.problem.id not in dropped)
    if not kept:
        raise BonbenchError("every training problem is an evaluation problem; sample the train split (-T split=train)")
    report = {"by": ["problem_id", "normalised_text_sha256"], "sets": checked, "n_train_problems": len(train_ids - dropped),
              "dropped": sorted(dropped)}
    return replace(data, rows=kept), report
