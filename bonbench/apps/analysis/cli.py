"""Subcommands ``leaderboard``, ``gate`` and ``plot``: flags in, one analysis call, exit code out.

``register(subparsers)`` adds them to the main ``bonbench`` parser; each sets ``handler`` to a
``_cmd_*(args) -> int``. Heavy imports (scipy, matplotlib) happen inside the handlers so that
``bonbench --help`` and the other subcommands stay fast. No analysis logic lives here.

Exit codes: ``leaderboard`` and ``plot`` follow the CLI (0 ok, 1 user error, 2 bad usage).
``gate`` uses 0 = no regression, 1 = regression, 2 = input/usage error (the ``diff``/``grep``
convention), so a CI job can tell a real regression from a misconfigured gate.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any

from bonbench.core import flags, outputs
from bonbench.core.errors import BonbenchError

GATE_PASS, GATE_REGRESSION, GATE_ERROR = 0, 1, 2


def _results_default() -> str:
    return os.environ.get("BONBENCH_OUT", "results")


def register(subparsers: Any) -> None:
    """Add ``leaderboard``, ``gate`` and ``plot`` to the ``bonbench`` subcommand parser."""
    lb = subparsers.add_parser("leaderboard", help="checkpoints x (task, metric) table, optionally vs a base model")
    lb.add_argument("results_dir", nargs="?", default=_results_default(), help="results root (default: results/)")
    lb.add_argument("--base", help="model id or slug to compare every checkpoint against (paired bootstrap)")
    lb.add_argument("--base-run", action="append", default=[], metavar="RUN_DIR",
                    help="the base's run for its task (repeatable, one per task; default: its run with the checkpoints' settings, n and problems)")
    lb.add_argument("--task", action="append", help="only this task; repeatable")
    lb.add_argument("--metric", action="append", help="only this metric (e.g. pass@1); repeatable")
    lb.add_argument("--out", help="folder where leaderboard.md/.html/.json go (default: RESULTS_DIR); replaced only once "
                    "all three are written")
    lb.add_argument("--n-boot", type=int, default=2000, help="paired bootstrap resamples per cell")
    lb.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    lb.add_argument("--debug", action="store_true", help="show tracebacks")
    lb.set_defaults(handler=_cmd_leaderboard)

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
    gate.set_defaults(handler=_cmd_gate)

    plot = subparsers.add_parser("plot", help="k-curves, scaling fits, training curves and report.html for runs, sweeps or checkpoints")
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
    plot.set_defaults(handler=_cmd_plot)


def _metric_names(values: list[str] | None) -> list[str] | None:
    """Expand ``--metric`` values the way ``bonbench run`` reads them (``pass@1,4`` = pass@1 and pass@4).

    Names without ``@`` that are not ``mean`` pass through unchanged: tasks can add their own metrics.
    A per-group name (``pass@1[level=college math]``) is taken whole, since its group may hold commas.
    """
    if not values:
        return None
    from bonbench.metrics.estimators import parse_metrics, split_metric_name

    names: list[str] = []
    for value in values:
        if split_metric_name(value.strip())[1] is not None:
            names.append(value.strip())
            continue
        try:
            names += [spec.name for spec in parse_metrics([value])]
        except BonbenchError:
            tokens = [v.strip() for v in value.split(",") if v.strip()]
            # comparison metrics have a k too (kl_bon@4, winrate@16); a typo of pass@k still fails
            if any("@" in t and not re.fullmatch(r"(kl_bon|winrate)@[1-9][0-9]*", t) for t in tokens):
                raise
            names += tokens
    return list(dict.fromkeys(names))


def _cmd_leaderboard(args: argparse.Namespace) -> int:
    from bonbench.apps.analysis.leaderboard import build_leaderboard, write_leaderboard

    out = Path(args.out or args.results_dir)
    outputs.check_writable_dir(out)  # before the bootstrap: a read-only --out fails now
    board = build_leaderboard(Path(args.results_dir), base=args.base, tasks=args.task, metrics=_metric_names(args.metric),
                              n_boot=args.n_boot, seed=args.seed, base_runs=[Path(p) for p in args.base_run])
    # written into a staging folder, then renamed into --out: a full disk leaves the previous leaderboard whole
    with outputs.staged_dir(out) as stage:
        staged = write_leaderboard(board, stage)
    md, html = (out / p.name for p in staged)
    print(md.read_text(encoding="utf-8"))
    print(md)
    print(html)
    return 0


def _cmd_gate(args: argparse.Namespace) -> int:
    from bonbench.apps.analysis.gate import format_report, load_baseline, load_gate_run, run_gate, save_baseline, write_report_json

    try:
        if not 0 < args.alpha < 0.5:
            raise BonbenchError(f"--alpha must be in (0, 0.5) (got {args.alpha})")
        if args.tolerance < 0:
            raise BonbenchError(f"--tolerance is an absolute drop and must be >= 0 (got {args.tolerance})")
        if args.save_baseline:
            if args.baseline:
                raise BonbenchError("--save-baseline writes a baseline from --run; drop --baseline (or use --out)")
            path = save_baseline(Path(args.run), Path(args.out) if args.out else None, metrics=_metric_names(args.metric))
            print(f"baseline written: {path} (commit it under results/baselines/)")
            return GATE_PASS
        if not args.baseline:
            raise BonbenchError("gate needs --baseline FILE (create one with --save-baseline --run RUN_DIR)")
        baseline = load_baseline(Path(args.baseline))
        report = run_gate(baseline, load_gate_run(Path(args.run), baseline.task), metrics=_metric_names(args.metric),
                          alpha=args.alpha, tolerance=args.tolerance)
        if args.json_out:
            write_report_json(report, Path(args.json_out))
    except BonbenchError as exc:
        if args.debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return GATE_ERROR
    print(format_report(report))
    return GATE_REGRESSION if report.failed else GATE_PASS


def _cmd_plot(args: argparse.Namespace) -> int:
    from bonbench.apps.analysis.html import write_report

    runs = [Path(p) for p in args.paths]  # run dirs, sweeps, results trees and checkpoint folders
    first = Path(args.paths[0])
    out = Path(args.out) if args.out else (first if first.is_dir() else first.parent) / "report"
    # --out is a folder: an existing file there is refused (never replaced by a folder); an existing
    # report folder is refreshed, its files replaced one atomic rename each once all are written
    outputs.check_writable_dir(out)
    families = [f.strip() for f in args.fit_families.split(",") if f.strip()]
    with outputs.staged_dir(out) as stage:
        path = write_report(runs, stage, kind=args.kind, coscaling_tol=args.coscaling_tol, verifier=args.verifier,
                            families=families, holdout_fraction=args.holdout_fraction)
    print(out / path.name)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run one analysis subcommand without the rest of the CLI (``python -m bonbench.apps.analysis.cli``)."""
    parser = argparse.ArgumentParser(prog="bonbench")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        flags.check(args)
        return int(args.handler(args))
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
