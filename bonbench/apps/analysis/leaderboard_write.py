"""Writing a leaderboard (``leaderboard.build_leaderboard``): markdown, HTML (with the chosen runs'
k-curves) and JSON into one folder. It reads nothing but the ``Leaderboard`` record and computes
nothing; which run fills a cell and every difference are decided in ``leaderboard``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from bonbench.api.metric.readings import metric_info
from bonbench.apps.analysis.htmlparts import Styled, Table, figure, page, render
from bonbench.apps.analysis.leaderboard import DOWN, MISMATCH, UP, Cell, Leaderboard
from bonbench.apps.analysis.plots import plot_k_curve_comparison
from bonbench.apps.analysis.sections import run_curve_label
from bonbench.core import outputs
from bonbench.core.config import strategy_label
from bonbench.core.store import atomic_write_json
from bonbench.metrics.info import LOWER


def _cell_text(cell: Cell | None, is_base: bool, sep: str) -> str:
    if cell is None:
        return "—"
    half = (cell.hi - cell.lo) / 2 if math.isfinite(cell.hi - cell.lo) else math.nan
    text = f"{cell.value:.3f} ± {half:.3f}" if math.isfinite(half) else f"{cell.value:.3f}"
    if cell.mc_se is not None:
        text += f" (MC SE {cell.mc_se:.3f})"
    if is_base:
        return text + f"{sep}(base)"
    if cell.diff is None:
        return text
    approx = "" if cell.paired else "≈"
    n = f", n={cell.n_shared}" if cell.paired else ""
    mark = f" {cell.marker}" if cell.marker else ""
    flag = f" {MISMATCH}" if not cell.settings_match else ""
    return (f"{text}{sep}Δ {approx}{cell.diff:+.3f} [{cell.diff_lo:+.3f}, {cell.diff_hi:+.3f}]{mark}{n}{flag}")


COMPUTE = "tokens/problem"  # the column of a task with a search row (leaderboard's module docstring)


def _layout(board: Leaderboard) -> list[tuple[str, str]]:
    """The table's columns after ``model``: each (task, metric), and after a task's metrics its
    ``(task, COMPUTE)`` column where the board has one."""
    out: list[tuple[str, str]] = []
    tasks = list(dict.fromkeys(t for t, _ in board.columns))
    for task in tasks:
        out += [(t, m) for t, m in board.columns if t == task]
        if any(t == task for _, t in board.compute):
            out.append((task, COMPUTE))
    return out


def _rows(board: Leaderboard, sep: str) -> tuple[list[str], list[list[str]]]:
    layout = _layout(board)
    header = ["model"] + [f"{task} {metric}" for task, metric in layout]
    rows = []
    for model in board.models:
        rows.append([model] + [_compute_text(board, model, t) if m == COMPUTE
                               else _cell_text(board.cells.get((model, t, m)), model == board.base, sep)
                               for t, m in layout])
    return header, rows


def _compute_text(board: Leaderboard, row: str, task: str) -> str:
    tokens = board.compute.get((row, task))
    return "—" if tokens is None else f"{tokens:,.0f}"


def _selection_lines(board: Leaderboard) -> list[str]:
    lines = []
    for s in sorted(board.selections, key=lambda s: (s.task, s.model)):
        extra = f" ({s.n_candidates - 1} other run(s) ignored)" if s.n_candidates > 1 else ""
        verifier = f", verifier={s.run.meta['verifier']}" if s.run.meta.get("verifier") else ""
        lines.append(f"{s.model} / {s.task}: run {s.run.hash} (T={s.run.temperature:g}, n={s.run.n}{verifier}) — "
                     f"{s.rule}{extra}")
    return lines


def render_markdown(board: Leaderboard) -> str:
    """The leaderboard as a GitHub-flavoured markdown table with its notes and run choices."""
    header, rows = _rows(board, "<br>")
    lines = ["# bonbench leaderboard", ""]
    if board.base:
        lines += [f"Base: **{board.base}**", ""]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join(["---"] + [":---:"] * (len(header) - 1)) + "|")
    for row in rows:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    lines.append("")
    lines.append("Cells: value ± half-width of the 95% bootstrap CI over problems.")
    lines += [f"{n}" for n in board.notes]
    lines += ["", "## Runs used", ""]
    lines += [f"- {line}" for line in _selection_lines(board)]
    return "\n".join(lines) + "\n"


def write_k_curve_figures(board: Leaderboard, out_dir: Path) -> list[Path]:
    """Per task with two or more chosen runs that have k-curves, those runs' curves on shared axes
    (the base first), as ``leaderboard_<task>_kcurves.png``."""
    out = []
    for task in dict.fromkeys(t for t, _ in board.columns):
        chosen = sorted((s for s in board.selections if s.task == task and s.run.curves),
                        key=lambda s: (s.model != board.base, s.model))
        if len(chosen) >= 2:
            curves = {("base " if s.model == board.base else "") + run_curve_label(s.run): s.run.curves for s in chosen}
            out.append(plot_k_curve_comparison(curves, Path(out_dir) / f"leaderboard_{task.replace('/', '_')}_kcurves.png",
                                               title=f"{task}: the leaderboard's runs"))
    return out


def render_html(board: Leaderboard, figures: Sequence[Path] = ()) -> str:
    """The leaderboard as a standalone HTML page (``templates/leaderboard.html.j2``; better green, worse
    red: ▲ green unless lower is better), with ``figures`` embedded below the table."""
    header, rows = _rows(board, "\n")
    lower = [False] + [m != COMPUTE and metric_info(m).direction == LOWER for _, m in _layout(board)]
    body_rows = []
    for row in rows:
        cells = []
        for c, flip in zip(row, lower, strict=True):
            good, bad = (DOWN, UP) if flip else (UP, DOWN)  # green is better, whichever way that is
            cells.append(Styled(c, "up" if good in c else "down" if bad in c else ""))
        body_rows.append(cells)
    body = render("leaderboard.html.j2", base=board.base, board=Table(header, body_rows), notes=board.notes,
                  figures=[figure(f, f.stem) for f in figures], runs=_selection_lines(board))
    return page("bonbench leaderboard", body)


def write_leaderboard(board: Leaderboard, out_dir: Path) -> tuple[Path, Path]:
    """Write ``leaderboard.md``, ``leaderboard.html`` and ``leaderboard.json`` into ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    md = out_dir / "leaderboard.md"
    html = out_dir / "leaderboard.html"
    outputs.write_text(md, render_markdown(board))
    outputs.write_text(html, render_html(board, write_k_curve_figures(board, out_dir)))
    atomic_write_json(out_dir / "leaderboard.json", {
        "base": board.base,
        "columns": [list(c) for c in board.columns],
        "cells": [{"model": m, "task": t, "metric": k, **{f: getattr(c, f) for f in (
            "value", "lo", "hi", "n_problems", "diff", "diff_lo", "diff_hi", "p_improve", "n_shared", "paired",
            "settings_match", "mc_se")},
                   "marker": c.marker} for (m, t, k), c in sorted(board.cells.items())],
        "runs": [{"model": s.model, "task": s.task, "run_dir": str(s.run.path), "rule": s.rule,
                  "verifier": s.run.meta.get("verifier"), "strategy": strategy_label(s.run.config),
                  **({"tokens_per_problem": board.compute[(s.model, s.task)]} if (s.model, s.task) in board.compute
                     else {})} for s in board.selections],
    })
    return md, html
