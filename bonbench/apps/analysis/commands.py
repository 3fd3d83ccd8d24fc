"""The handlers of ``bonbench leaderboard``, ``gate`` and ``plot``: parsed flags in, one analysis
call, the outputs' paths (or the gate's verdict) out.

Importing this module loads the analysis modules (scipy, matplotlib), so the CLI imports it only
when one of these commands runs (``bonbench.apps.analysis.analysis_flags`` names each handler). The flags are
``bonbench.apps.analysis.analysis_flags``'s; no analysis logic lives here.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from bonbench.apps.analysis.analysis_flags import GATE_ERROR, GATE_PASS, GATE_REGRESSION
from bonbench.apps.analysis.baseline import load_baseline, load_gate_run, save_baseline
from bonbench.apps.analysis.gate import format_report, run_gate, write_report_json
from bonbench.apps.analysis.html import write_report
from bonbench.apps.analysis.leaderboard import build_leaderboard, write_leaderboard
from bonbench.core import outputs
from bonbench.core.errors import BonbenchError
from bonbench.metrics.names import parse_metrics, split_metric_name


def _metric_names(values: list[str] | None) -> list[str] | None:
    """Expand ``--metric`` values the way ``bonbench run`` reads them (``pass@1,4`` = pass@1 and pass@4).

    Names without ``@`` that are not ``mean`` pass through unchanged: tasks can add their own metrics.
    A per-group name (``pass@1[level=college math]``) is taken whole, since its group may hold commas.
    """
    if not values:
        return None
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


def cmd_leaderboard(args: argparse.Namespace) -> int:
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


def cmd_gate(args: argparse.Namespace) -> int:
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


def cmd_plot(args: argparse.Namespace) -> int:
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
