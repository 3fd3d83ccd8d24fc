"""The handlers of ``bonbench run``, ``score``, ``merge``, ``report`` and ``list``: parsed flags in,
one library call (``bonbench.run``), tables and run directories out.

Progress goes to stderr, the metrics tables to stdout and the run directory is the last line
printed. Importing this module loads the pipeline (and, through the samplers, torch), so
``bonbench.apps.cli`` imports it only when one of these commands runs. The flags are
``bonbench.apps.cli.evaluation``'s; no evaluation logic lives here.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from bonbench.api import task as registry
from bonbench.api.metric.readings import metric_listing
from bonbench.api.search.contract import strategy_listing
from bonbench.api.verifier import verifier_names, verifier_schemes
from bonbench.apps.cli.common import Progress
from bonbench.apps.cli.evaluation import ListFlags, MergeFlags, ReportFlags, ScoreFlags, engine_args
from bonbench.apps.trainer.train_flags import list_objectives
from bonbench.core import settings
from bonbench.core.config import strategy_label
from bonbench.core.errors import BonbenchError
from bonbench.core.store import find_run_dirs, read_run_json
from bonbench.pipeline import stages
from bonbench.pipeline.ledger import compute_ledger
from bonbench.pipeline.report import print_compute, print_metrics
from bonbench.pipeline.shard import ShardStore
from bonbench.plugins.rewards.registry import describe_reward_models, describe_reward_schemes
from bonbench.plugins.samplers import cpu_preload, select
from bonbench.run import execute as run_execute
from bonbench.run import merge as run_merge
from bonbench.run.plan import plan
from bonbench.run.reopen import reopen
from bonbench.run.request import Plan, RunRequest, RunResult


def cmd_run(args: argparse.Namespace) -> int:
    req = settings.from_args(RunRequest, args, engine_args=engine_args(args))
    p = plan(req)
    if args.dry_run:
        for run in p.runs:
            shard = {"shard": run.store.spec.label} if isinstance(run.store, ShardStore) else {}
            print(json.dumps({"hash": run.run_hash, "hashed": run.cfg.hashed(), "config": run.cfg.to_json(),
                              "problems": len(run.problems), **shard, "exists": run.store.exists()}, indent=2, default=str))
            # the run directory `bonbench merge` takes
            print(run.store.run_root if isinstance(run.store, ShardStore) else run.store.root)
        return 0
    return _execute(p)


def cmd_score(args: argparse.Namespace) -> int:
    run_dir = settings.from_args(ScoreFlags, args).run_dir
    if run_dir and args.samples:
        raise BonbenchError("give either a run directory or --samples, not both")
    req = settings.from_args(RunRequest, args)
    if not run_dir:
        if not args.samples:
            raise BonbenchError("bonbench score needs a run directory or --task T --samples FILE")
        return _execute(plan(req))
    task_args = {**req.task_args, **({"reward_model": req.reward_model} if req.reward_model else {})}
    # a reopened run keeps its own sampling settings (score has no flag for them: evaluation.SAMPLING_ONLY)
    return _execute(reopen(run_dir, metrics=req.metrics, n=req.n, verifier=req.verifier, task_args=task_args,
                           limit=req.limit, data_dir=req.data_dir, n_boot=req.n_boot,
                           unsafe_no_sandbox=req.unsafe_no_sandbox, ref_model=req.ref_model, ref_run=req.ref_run,
                           ray=req.ray, ray_workers=req.ray_workers))


def cmd_merge(args: argparse.Namespace) -> int:
    settings.check_args(RunRequest, args)
    flags = settings.from_args(MergeFlags, args)
    with Progress() as progress:
        merged = run_merge.merge(flags.run_dir, partial=flags.partial, data_dir=args.data_dir, n_boot=args.n_boot,
                                 unsafe_no_sandbox=args.unsafe_no_sandbox, progress=progress)
    for c in merged.coverage:
        print(f"shard {c.spec.label}: {len(c.complete)} of {len(c.problems)} problems", file=sys.stderr)
    added = ", ".join(f"{n} {name}" for name, n in sorted(merged.added.items()) if n) or "nothing new"
    print(f"merged rows: {added}", file=sys.stderr)
    _print_result(merged.result)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    flags = settings.from_args(ReportFlags, args)
    path = flags.path
    dirs = find_run_dirs(path, scored=True)
    if not dirs:
        raise BonbenchError(f"no scored run directories under {path}; run `bonbench run` first")
    broken = 0
    for d in dirs:
        # one unreadable run (a damaged metrics.json) is one error line; the other runs are still shown
        try:
            print_metrics(read_run_json(d / "metrics.json"), path=d / "metrics.json")
            print_compute(compute_ledger(d), per_problem=flags.per_problem)
        except BonbenchError as exc:
            if args.debug or len(dirs) == 1:
                raise
            print(f"error: {exc}", file=sys.stderr)
            broken += 1
            continue
        print(d)
    return 1 if broken else 0


def cmd_list(args: argparse.Namespace) -> int:
    flags = settings.from_args(ListFlags, args)
    for line in _listing(flags.what, flags.out):
        print(line)
    return 0


def _listing(what: str, out: Path) -> list[str]:
    if what == "tasks":  # name, the family it shares verifiers and training data with, its summary
        registry.load_plugins()
        return [f"{name:<16} family {registry.task_family(name):<8} {_summary(registry.TASKS.get(name))}".rstrip()
                for name in registry.task_names()]
    if what == "verifiers":  # plain names, then the schemes (rm:, learned:, a plugin's) as their docstrings say
        return [*verifier_names(), *(doc or prefix + "..." for prefix, doc in verifier_schemes())]
    if what == "reward-models":
        return [*(f"{name:<18} {description}" for name, description in describe_reward_models()),
                *(f"{prefix}<source>?key=value  {description}" for prefix, description in describe_reward_schemes()),
                "use as --verifier rm:<spec>; spec syntax and options: docs/rewards.md"]
    if what == "backends":
        return [f"{name:<10} engine settings: {settings}" for name, settings in select.describe_backends()]
    if what == "objectives":
        return list_objectives()
    if what == "metrics":  # every registered metric kind (bonbench.metrics entry points), a plugin's too
        return metric_listing()
    if what == "strategies":  # every search strategy (bonbench.strategies entry points), a plugin's too
        return strategy_listing()
    return [_run_line(d) for d in find_run_dirs(out)]


def _run_line(run_dir: Path) -> str:
    """``list runs``: the run directory, then how it came by its samples (``core.config.strategy_label``:
    sampling, greedy, adaptive sampling, or a search's strategy with its options) and its n."""
    cfg = read_run_json(run_dir / "config.json").get("config", {})
    seeds = f" seeds={cfg['seeds']}" if cfg.get("strategy") and int(cfg.get("seeds") or 1) > 1 else ""
    temperature = cfg.get("temperature")
    t = f" T={float(temperature):g}" if temperature is not None else ""
    return f"{run_dir}  {strategy_label(cfg)} n={cfg.get('n')}{seeds}{t}"


def _summary(factory: Any) -> str:
    """The first sentence of a plugin factory's docstring ("" when it has none)."""
    paragraph = " ".join((getattr(factory, "__doc__", None) or "").strip().split("\n\n")[0].split())
    first = re.split(r"(?<!\bal)\.\s|;\s", paragraph)[0]  # "et al. 2023" is not a sentence's end
    return first.rstrip(".")


def _execute(p: Plan) -> int:
    """Run a plan with progress bars, print every table, then the run directories (last line)."""
    if (p.backend == "vllm" and p.ray is None and not p.never_sample
            and any(stages.missing_requests(r, r.cfg.prompt_style) for r in p.runs)):
        # an engine will load: restart once with tcmalloc preloaded (CPU only; docs/samplers.md). Done
        # here, not in the library: re-executing the process is the command's business, not a library's.
        cpu_preload.maybe_reexec_with_preload()
    with Progress() as progress:
        def label(run: Any) -> None:
            progress.prefix = f"T={run.cfg.temperature:g}" if p.is_sweep else ""

        result = run_execute.execute(p, progress, on_run=label)
    if p.verifier_note:
        # which verifier bon@k used, and why (run.verifier_choice); after the run, so that a failed
        # run's error stays the only line
        print(p.verifier_note, file=sys.stderr)
    _print_result(result)
    return 0


def _print_result(result: RunResult) -> None:
    """Every metrics table, then the run directories (a shard prints the run directory it belongs to)."""
    for doc in result.docs:
        print_metrics(doc)
    for run in result.runs:
        if isinstance(run.store, ShardStore):
            print(f"shard {run.store.spec.label} done; once every shard is, run `bonbench merge {run.store.run_root}`",
                  file=sys.stderr)
            print(run.store.run_root)
        else:
            print(run.store.root)
    if result.sweep_path is not None:
        print(result.sweep_path)
