"""The handlers of ``bonbench leaderboard``, ``gate``, ``plot`` and ``recipe``: parsed flags in, one analysis
call, the outputs' paths (or the gate's verdict) out.

Importing this module loads the analysis modules (scipy, matplotlib), so the CLI imports it only
when one of these commands runs (``bonbench.apps.analysis.analysis_flags`` names each handler). The flags
are ``bonbench.apps.analysis.analysis_flags``'s settings dataclasses, read here with ``settings.from_args``;
no analysis logic lives here.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from bonbench.api.metric.grammar import metric_names
from bonbench.apps.analysis.analysis_flags import (
    GATE_ERROR,
    GATE_PASS,
    GATE_REGRESSION,
    GateRequest,
    LeaderboardRequest,
    PlotRequest,
    RecipeRequest,
)
from bonbench.apps.analysis.baseline import load_baseline, load_gate_run, save_baseline
from bonbench.apps.analysis.gate import format_report, run_gate, write_report_json
from bonbench.apps.analysis.html import write_report
from bonbench.apps.analysis.leaderboard import build_leaderboard
from bonbench.apps.analysis.leaderboard_write import write_leaderboard
from bonbench.apps.analysis.model_params import parse_params
from bonbench.apps.analysis.recipe import build_recipe
from bonbench.apps.analysis.recipe_workers import default_workers
from bonbench.apps.analysis.recipe_write import format_table, recipe_json, write_recipe
from bonbench.core import outputs, settings
from bonbench.core.errors import BonbenchError


def _metric_names(values: Sequence[str]) -> list[str] | None:
    """``--metric`` values expanded the way ``bonbench run`` reads them (``pass@1,4`` = pass@1 and
    pass@4; ``bonbench.api.metric.grammar.metric_names``); None when none was given."""
    return metric_names(values) if values else None


def cmd_leaderboard(args: argparse.Namespace) -> int:
    req = settings.from_args(LeaderboardRequest, args)
    out = req.out or req.results_dir
    outputs.check_writable_dir(out)  # before the bootstrap: a read-only --out fails now
    board = build_leaderboard(req.results_dir, base=req.base, tasks=req.tasks, metrics=_metric_names(req.metrics),
                              n_boot=req.n_boot, seed=req.seed, base_runs=req.base_runs)
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
        req = settings.from_args(GateRequest, args)  # inside the try: a value out of range is exit 2 too
        if req.save_baseline:
            if req.baseline:
                raise BonbenchError("--save-baseline writes a baseline from --run; drop --baseline (or use --out)")
            path = save_baseline(req.run, req.out, metrics=_metric_names(req.metrics))
            print(f"baseline written: {path} (commit it under results/baselines/)")
            return GATE_PASS
        if not req.baseline:
            raise BonbenchError("gate needs --baseline FILE (create one with --save-baseline --run RUN_DIR)")
        baseline = load_baseline(req.baseline)
        report = run_gate(baseline, load_gate_run(req.run, baseline.task), metrics=_metric_names(req.metrics),
                          alpha=req.alpha, tolerance=req.tolerance)
        if req.json_out:
            write_report_json(report, req.json_out)
    except BonbenchError as exc:
        if args.debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return GATE_ERROR
    print(format_report(report))
    return GATE_REGRESSION if report.failed else GATE_PASS


def cmd_plot(args: argparse.Namespace) -> int:
    req = settings.from_args(PlotRequest, args)
    first = req.paths[0]  # run dirs, sweeps, results trees and checkpoint folders
    out = req.out or (first if first.is_dir() else first.parent) / "report"
    # --out is a folder: an existing file there is refused (never replaced by a folder); an existing
    # report folder is refreshed, its files replaced one atomic rename each once all are written
    outputs.check_writable_dir(out)
    with outputs.staged_dir(out) as stage:
        path = write_report(list(req.paths), stage, kind=req.kind, coscaling_tol=req.coscaling_tol, verifier=req.verifier,
                            families=req.fit_families, holdout_fraction=req.holdout_fraction)
    print(out / path.name)
    return 0


def cmd_recipe(args: argparse.Namespace) -> int:
    req = settings.from_args(RecipeRequest, args)
    first = req.results[0]
    out = req.out or (first if first.is_dir() else first.parent) / "recipe"
    outputs.check_writable_dir(out)
    recipe = build_recipe(list(req.results), list(req.budgets), task=req.task, cost=req.cost,
                          params=parse_params(req.params), by=req.by, base_run=req.base_run, bom_share=req.bom_share,
                          n_boot=req.n_boot, seed=req.seed, rules=req.rules,
                          workers=default_workers() if req.workers is None else req.workers)
    with outputs.staged_dir(out) as stage:
        written = write_recipe(recipe, stage)
    print(json.dumps(recipe_json(recipe), indent=2) if req.json else format_table(recipe))
    for path in written:  # with --json, stdout is the document alone (for jq and friends)
        print(out / path.name, file=sys.stderr if req.json else sys.stdout)
    return 0
