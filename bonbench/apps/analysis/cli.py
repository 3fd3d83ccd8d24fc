"""The flags of ``leaderboard``, ``gate`` and ``plot``, and ``main`` for running one of them alone.

``register(subparsers)`` adds them to the main ``bonbench`` parser; each names its handler in
``bonbench.apps.analysis.commands`` (``"module:function"``), imported only when the command runs:
the analysis modules load scipy and matplotlib, and ``bonbench --help`` and the other subcommands
must not. No analysis logic lives here.

Exit codes: ``leaderboard`` and ``plot`` follow the CLI (0 ok, 1 user error, 2 bad usage).
``gate`` uses 0 = no regression, 1 = regression, 2 = input/usage error (the ``diff``/``grep``
convention), so a CI job can tell a real regression from a misconfigured gate.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from bonbench.core import flags, outputs
from bonbench.core.errors import BonbenchError
from bonbench.core.registry import load_target

GATE_PASS, GATE_REGRESSION, GATE_ERROR = 0, 1, 2
HANDLERS = "bonbench.apps.analysis.commands"


def _results_default() -> str:
    return os.environ.get("BONBENCH_OUT", "results")


def register(subparsers: Any) -> None:
    """Add ``leaderboard``, ``gate`` and ``plot`` to the ``bonbench`` subcommand parser."""
    lb = subparsers.add_parser("leaderboard", help="checkpoints x (task, metric) table, optionally vs a base model")
    lb.add_argument("results_dir", nargs="?", default=_results_default(), help="results root (default: results/)")
    lb.add_argument("--base", help="model id or slug to compare every checkpoint against (paired bootstrap)")
    lb.add_argument("--base-run", action="append", default=[], metavar="RUN_DIR",
                    help="the base's run for its task (repeatable, one per task; default: its run with the "
                         "checkpoints' settings, n and problems)")
    lb.add_argument("--task", action="append", help="only this task; repeatable")
    lb.add_argument("--metric", action="append", help="only this metric (e.g. pass@1); repeatable")
    lb.add_argument("--out", help="folder where leaderboard.md/.html/.json go (default: RESULTS_DIR); replaced only once "
                    "all three are written")
    lb.add_argument("--n-boot", type=int, default=2000, help="paired bootstrap resamples per cell")
    lb.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    lb.add_argument("--debug", action="store_true", help="show tracebacks")
    lb.set_defaults(handler=f"{HANDLERS}:cmd_leaderboard")

    gate = subparsers.add_parser(
        "gate", help="exit 1 if a run is significantly worse than a committed baseline (0 pass, 2 input error)")
    gate.add_argument("--run", required=True, help="run directory to check (or to save with --save-baseline)")
    gate.add_argument("--baseline", help="baseline JSON (from --save-baseline), e.g. results/baselines/math--gemma-3-270m.json")
    gate.add_argument("--save-baseline", action="store_true", help="write a baseline file from --run instead of gating")
    gate.add_argument("--out", help="with --save-baseline: output file (default: results/baselines/<task>--<model>.json)")
    gate.add_argument("--metric", action="append", help="metric to gate; repeatable (default: every baseline metric)")
    gate.add_argument("--alpha", type=float, default=0.05, help="one-sided significance level (default 0.05)")
    gate.add_argument("--tolerance", type=float, default=0.0,
                      help="absolute drop tolerated even if significant (fail only if drop > tolerance); default 0")
    gate.add_argument("--json", dest="json_out", help="also write the gate report as JSON to this file")
    gate.add_argument("--debug", action="store_true", help="show tracebacks")
    gate.set_defaults(handler=f"{HANDLERS}:cmd_gate")

    plot = subparsers.add_parser("plot", help="k-curves, scaling fits, training curves and report.html for runs, sweeps "
                                              "or checkpoints")
    plot.add_argument("paths", nargs="+", help="run directories, sweep directories (sweep.json), a results tree, or "
                      "checkpoint folders (results/checkpoints/NAME: training curves)")
    plot.add_argument("--out", help="output folder (default: <first path>/report); a report already there is refreshed "
                      "(its files replaced only once every new one is written), a file there is refused")
    plot.add_argument("--kind", choices=["pass", "bon"], default="pass",
                      help="curve used for the temperature analysis and co-scaling (default pass)")
    plot.add_argument("--coscaling-tol", type=float, default=0.01,
                      help="absolute tolerance defining N* in the co-scaling figure (docs/scaling.md)")
    plot.add_argument("--verifier", metavar="VNAME",
                      help="with --kind bon: the verifier whose bon@N curves to use (a scores/VNAME.jsonl of every run; "
                      "default: the one each run's metrics were computed with)")
    plot.add_argument("--fit-families", default="exp_power,exp_power_linear",
                      help="comma-separated scaling-law families fitted to every curve, simplest first; the one with "
                      "the lower held-out error is chosen (exp_power, exp_power_linear, power_linear; docs/scaling.md)")
    plot.add_argument("--holdout-fraction", type=float, default=0.5,
                      help="families are fitted on k <= FRACTION * k_max and judged on the larger k (default 0.5)")
    plot.add_argument("--debug", action="store_true", help="show tracebacks")
    plot.set_defaults(handler=f"{HANDLERS}:cmd_plot")


def main(argv: list[str] | None = None) -> int:
    """Run one analysis subcommand without the rest of the CLI (``python -m bonbench.apps.analysis.cli``)."""
    parser = argparse.ArgumentParser(prog="bonbench")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        flags.check(args)
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
