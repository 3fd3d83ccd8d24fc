"""The flags of ``leaderboard``, ``gate``, ``plot`` and ``recipe`` (the fields of ``LeaderboardRequest``,
``GateRequest``, ``PlotRequest`` and ``RecipeRequest``), and ``main`` for running one of them alone.

``register(subparsers)`` adds them to the main ``bonbench`` parser with ``bonbench.core.settings``
(each field one flag: its type, default, help and range written once, here); each names its
handler in ``bonbench.apps.analysis.commands`` (``"module:function"``), imported only when the
command runs: the analysis modules load scipy and matplotlib, and ``bonbench --help`` and the other
subcommands must not. No analysis logic lives here.

Exit codes: ``leaderboard``, ``plot`` and ``recipe`` follow the CLI (0 ok, 1 user error, 2 bad usage).
``gate`` uses 0 = no regression, 1 = regression, 2 = input/usage error (the ``diff``/``grep``
convention), so a CI job can tell a real regression from a misconfigured gate.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bonbench.api.metric.grammar import check_curve_key
from bonbench.core import flags, outputs, settings, settings_file
from bonbench.core.errors import BonbenchError
from bonbench.core.registry import load_target
from bonbench.core.settings import setting

GATE_PASS, GATE_REGRESSION, GATE_ERROR = 0, 1, 2
HANDLERS = "bonbench.apps.analysis.commands"


@dataclass(frozen=True)
class LeaderboardRequest:
    """The flags of ``bonbench leaderboard`` as values."""

    results_dir: Path = setting(Path("results"), positional=True, env="BONBENCH_OUT",
                                help="results root (default: results/)")
    base: str | None = setting(None, help="model id or slug to compare every checkpoint against (paired bootstrap)")
    base_runs: tuple[Path, ...] = setting(
        (), flag="--base-run", metavar="RUN_DIR",
        help="the base's run for its task (repeatable, one per task; default: its run with the checkpoints' settings, "
             "n and problems)")
    tasks: tuple[str, ...] = setting((), flag="--task", help="only this task; repeatable")
    metrics: tuple[str, ...] = setting((), flag="--metric", help="only this metric (e.g. pass@1); repeatable")
    out: Path | None = setting(None, help="folder where leaderboard.md/.html/.json go (default: RESULTS_DIR); replaced "
                                          "only once all three are written")
    n_boot: int = setting(2000, range=flags.AT_LEAST_1, help="paired bootstrap resamples per cell")
    seed: int = setting(0, range=flags.AT_LEAST_0, help="bootstrap seed")


@dataclass(frozen=True)
class GateRequest:
    """The flags of ``bonbench gate`` as values."""

    run: Path = setting(help="run directory to check (or to save with --save-baseline)")
    baseline: Path | None = setting(
        None, help="baseline JSON (from --save-baseline), e.g. results/baselines/math--gemma-3-270m.json")
    save_baseline: bool = setting(False, help="write a baseline file from --run instead of gating")
    out: Path | None = setting(None, help="with --save-baseline: output file (default: "
                                          "results/baselines/<task>--<model>.json)")
    metrics: tuple[str, ...] = setting(
        (), flag="--metric", help="metric to gate; repeatable (default: every baseline metric)")
    alpha: float = setting(0.05, range=(0, 0.5, False, False), help="one-sided significance level (default 0.05)")
    tolerance: float = setting(0.0, range=flags.AT_LEAST_0, help="absolute drop tolerated even if significant (fail "
                                                                 "only if drop > tolerance); default 0")
    json_out: Path | None = setting(None, flag="--json", metavar="JSON_OUT",
                                    help="also write the gate report as JSON to this file")


@dataclass(frozen=True)
class PlotRequest:
    """The flags of ``bonbench plot`` as values."""

    paths: tuple[Path, ...] = setting(
        positional=True, help="run directories, sweep directories (sweep.json), a results tree, or checkpoint folders "
                              "(results/checkpoints/NAME: training curves)")
    out: Path | None = setting(None, help="output folder (default: <first path>/report); a report already there is "
                                          "refreshed (its files replaced only once every new one is written), a file "
                                          "there is refused")
    kind: str = setting(
        "pass", parse=check_curve_key,
        help="curve used for the temperature analysis and co-scaling: a metric kind with a curve (pass, bon, maj, ...; "
             "`bonbench list metrics`; default pass)")
    coscaling_tol: float = setting(0.01, range=flags.POSITIVE,
                                   help="absolute tolerance defining N* in the co-scaling figure (docs/scaling.md)")
    verifier: str | None = setting(
        None, metavar="VNAME", help="with --kind bon (or another kind that reads scores): the verifier whose curves "
                                    "to use (a scores/VNAME.jsonl of every run; default: the one each run's metrics "
                                    "were computed with)")
    fit_families: tuple[str, ...] = setting(
        ("exp_power", "exp_power_linear"), comma=True,
        help="comma-separated scaling-law families fitted to every curve, simplest first; the one with the lower "
             "held-out error is chosen (exp_power, exp_power_linear, power_linear; docs/scaling.md)")
    holdout_fraction: float = setting(
        0.5, range=flags.OPEN_0_1,
        help="families are fitted on k <= FRACTION * k_max and judged on the larger k (default 0.5)")


@dataclass(frozen=True)
class RecipeRequest:
    """The flags of ``bonbench recipe`` as values."""

    results: tuple[Path, ...] = setting(
        positional=True, help="run directories, sweep directories or results trees holding the scored runs to choose from")
    budgets: tuple[float, ...] = setting(
        flag="--budget", comma=True, metavar="BUDGET[,BUDGET...]",
        help="cost per problem to spend (tokens, or FLOPs with --cost flops); comma-separated, e.g. 2000,8000")
    task: str | None = setting(None, help="the task whose runs to use (required when RESULTS holds several tasks)")
    cost: Literal["tokens", "flops"] = setting(
        "tokens", help="tokens (prompt read once + generated + the verifier's, as measured) or flops "
                       "(2 x parameters x those tokens; needs --params)")
    params: tuple[str, ...] = setting(
        (), flag="--params", metavar="NAME=COUNT",
        help="parameter count of a model or verifier for --cost flops (e.g. gemma-3-270m=2.68e8); repeatable")
    by: str | None = setting(None, metavar="difficulty",
                             help="also choose per difficulty bin (5 bins of the base run's pass@1, as Snell et al.)")
    base_run: Path | None = setting(
        None, metavar="RUN_DIR", help="with --by difficulty: the run whose pass@1 bins the problems "
                                      "(default: the run with the largest n, then the lowest temperature)")
    bom_share: float = setting(0.5, range=(0, 1, True, True), help="the vote share of the bom@N strategies (default 0.5)")
    rules: tuple[str, ...] = setting(
        ("maj", "bon"), comma=True, metavar="RULE[,RULE...]",
        help="the selection rules to consider besides one sample: maj, bon, wmaj, bom (default maj,bon: wmaj and bom "
             "cost about 2 ms a problem each to compute; docs/recipe.md)")
    out: Path | None = setting(None, help="folder for recipe.json and recipe-frontier.png (default: <first RESULTS>/recipe)")
    json: bool = setting(False, help="print the JSON document instead of the table")
    n_boot: int = setting(1000, range=flags.AT_LEAST_1, help="bootstrap resamples per CI and paired difference")
    seed: int = setting(0, range=flags.AT_LEAST_0, help="bootstrap seed")
    workers: int | None = setting(
        None, range=flags.AT_LEAST_1, help="processes that compute the runs' tables not kept yet "
                                           "(default: one per CPU, at most 8; 1: this process alone)")


def register(subparsers: Any) -> None:
    """Add ``leaderboard``, ``gate``, ``plot`` and ``recipe`` to the ``bonbench`` subcommand parser."""
    lb = subparsers.add_parser("leaderboard", help="checkpoints x (task, metric) table, optionally vs a base model")
    settings.add_flags(lb, LeaderboardRequest)
    lb.set_defaults(handler=f"{HANDLERS}:cmd_leaderboard")

    gate = subparsers.add_parser(
        "gate", help="exit 1 if a run is significantly worse than a committed baseline (0 pass, 2 input error)")
    settings.add_flags(gate, GateRequest)
    gate.set_defaults(handler=f"{HANDLERS}:cmd_gate")

    plot = subparsers.add_parser("plot", help="k-curves, scaling fits, training curves and report.html for runs, sweeps or "
                                              "checkpoints")
    settings.add_flags(plot, PlotRequest)
    plot.set_defaults(handler=f"{HANDLERS}:cmd_plot")

    recipe = subparsers.add_parser("recipe", help="the best model, temperature, length, N and rule for each compute "
                                                  "budget per problem, from stored runs")
    settings.add_flags(recipe, RecipeRequest)
    recipe.set_defaults(handler=f"{HANDLERS}:cmd_recipe")


def main(argv: list[str] | None = None) -> int:
    """Run one analysis subcommand without the rest of the CLI
    (``python -m bonbench.apps.analysis.analysis_flags``)."""
    parser = argparse.ArgumentParser(prog="bonbench")
    register(parser.add_subparsers(dest="command", required=True))
    settings_file.add_debug_flags(parser)
    settings_file.add_config_flags(parser)
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        settings_file.apply(parser, argv)
    except BonbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2  # a usage error (gate's 2 too)
    args = parser.parse_args(argv)
    try:
        return int(load_target(args.handler)(args))
    except BonbenchError as exc:
        if args.debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return GATE_ERROR if args.command == "gate" else 1
    except OSError as exc:
        message = outputs.os_error_message(exc.filename, exc) if exc.filename else None
        if message is None or args.debug:
            raise
        print(f"error: {message}", file=sys.stderr)
        return GATE_ERROR if args.command == "gate" else 1


if __name__ == "__main__":
    sys.exit(main())
