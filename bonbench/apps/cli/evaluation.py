"""The flags of ``bonbench run``, ``score``, ``merge``, ``report`` and ``list``.

``run`` and ``score`` take ``RunRequest``'s fields as flags (``bonbench.core.settings``: type, default,
help and range are the field's), ``run`` adds the backend settings of ``EngineFlags``. The
handlers are ``bonbench.apps.cli.evaluation_handlers``, imported only when one of these commands
runs (they load the pipeline and its libraries); this module imports nothing heavy and runs nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import Any

from bonbench.apps.cli.common import add_debug, results_root
from bonbench.core import flags, settings
from bonbench.core.settings import setting
from bonbench.run.request import RunRequest

HANDLERS = "bonbench.apps.cli.evaluation_handlers"
# RunRequest's settings that only sampling has: `score` leaves them out
SAMPLING_ONLY = ("backend", "temperatures", "top_ps", "max_tokens", "seed", "prompt_style", "dtype", "shard")


@dataclass(frozen=True)
class EngineFlags:
    """Backend settings of ``bonbench run``; the ones given become ``RunRequest.engine_args``, each
    checked against the chosen backend's typed options of the same name (``samplers.select``)."""

    max_model_len: int | None = setting(None, range=flags.AT_LEAST_1, help="engine context length")
    tensor_parallel_size: int | None = setting(None, range=flags.AT_LEAST_1, help="vllm: GPUs per engine (default 1)")
    gpu_memory_utilization: float | None = setting(
        None, range=flags.SHARE, help="vllm: share of GPU memory for the engine (default 0.9)")
    batch_size: int | None = setting(None, range=flags.AT_LEAST_1, help="hf backend: sequences decoded together (default 64)")
    endpoints: tuple[str, ...] = setting(
        (), flag="--endpoint", help="openai backend: an OpenAI-compatible server's URL (e.g. http://127.0.0.1:8000 "
                                    "after `vllm serve`); repeatable, the servers share the work")
    concurrency: int | None = setting(None, range=flags.AT_LEAST_1,
                                      help="openai backend: requests in flight per endpoint (default 8)")
    api_key: str | None = setting(None, help="openai backend: API key (default: $OPENAI_API_KEY, else EMPTY)")
    request_timeout: float | None = setting(
        None, range=flags.POSITIVE, help="openai backend: seconds one request may take in all, answer included, "
                                         "before it is retried (default 120)")


def engine_args(args: argparse.Namespace) -> dict[str, Any]:
    """The engine settings given on the command line (unset ones are the backend's defaults)."""
    given = settings.from_args(EngineFlags, args)
    return {f.name: getattr(given, f.name) for f in dataclasses.fields(given) if getattr(given, f.name) not in (None, ())}


def register(sub: Any) -> None:
    """Add ``run``, ``score``, ``merge``, ``report`` and ``list`` to the subcommand parser."""
    run = sub.add_parser("run", help="sample, grade, verify, score and report")
    settings.add_flags(run, RunRequest)
    settings.add_flags(run, EngineFlags)
    run.add_argument("--dry-run", action="store_true", help="print the resolved config, hash and run dir, then stop "
                     "(writes nothing)")
    add_debug(run)
    run.set_defaults(handler=f"{HANDLERS}:cmd_run")

    score = sub.add_parser("score", help="grade and score existing samples (a run dir, or --samples FILE with --task)")
    score.add_argument("run_dir", nargs="?", help="run directory to re-score")
    settings.add_flags(score, RunRequest, skip=SAMPLING_ONLY, defaults={"model": None}, help={
        "samples": "samples produced elsewhere: bonbench, human-eval, evalplus, bigcode-evaluation-harness or "
                   "lm-evaluation-harness files (see docs/imported-samples.md)",
        "model": "the name these samples are recorded and ranked under (default: the file's name)"})
    add_debug(score)
    score.set_defaults(handler=f"{HANDLERS}:cmd_score")

    merge = sub.add_parser("merge", help="combine the shards of a run (--shard i/n) and score it as one run")
    merge.add_argument("run_dir", help="the run directory the shards printed")
    merge.add_argument("--partial", action="store_true", help="score the problems the shards have finished instead of "
                       "refusing while a shard is missing (metrics.json says shards.partial)")
    settings.add_flags(merge, RunRequest, only=("data_dir", "n_boot", "unsafe_no_sandbox"), help={
        "n_boot": "bootstrap resamples for CIs (as `run`'s)",
        "unsafe_no_sandbox": "code tasks: grade without bubblewrap (as `run`'s)"})
    add_debug(merge)
    merge.set_defaults(handler=f"{HANDLERS}:cmd_merge")

    report = sub.add_parser("report", help="print the metrics tables of run directories")
    report.add_argument("path", nargs="?", default=results_root(), help="a run directory or a results tree "
                        "(default: results/)")
    add_debug(report)
    report.set_defaults(handler=f"{HANDLERS}:cmd_report")

    lst = sub.add_parser("list", help="list tasks, verifiers, metrics or runs")
    lst.add_argument("what", choices=["tasks", "verifiers", "reward-models", "backends", "metrics", "objectives", "runs"],
                     nargs="?", default="tasks")
    lst.add_argument("--out", default=results_root(), help="results root whose runs `list runs` shows (default: results/)")
    add_debug(lst)
    lst.set_defaults(handler=f"{HANDLERS}:cmd_list")
