"""Accuracy against compute across runs: every strategy of a task on one axis (``bonbench plot``).

A point is a run's best-of-N accuracy (``bon@N``, with its 95% CI, N the run's n) at the tokens
it spent per problem: the policy's prompt and generated tokens plus every token a verifier read
(``pipeline.ledger.compute_ledger``: a search run's own ledger, its scorer's tokens included, plus
the selection's scoring; a sampling run's samples and scores; of the verifiers, only the one bon@N
selected with). A best-of-N run whose curves.json
holds the ``bon`` curve also gets its line: bon@k at k/N of its tokens, since its samples are
independent and k of them cost k/N of n (a search's candidates are not, so a search is one point).
A run whose prompt tokens were not counted (imported samples) has no point, and the section says so.

What it does not do: read samples or rerun anything, or fit scaling laws (``fits``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import matplotlib
from markupsafe import Markup
from matplotlib.figure import Figure

from bonbench.apps.analysis.htmlparts import Table, figure, fmt_value, render
from bonbench.apps.analysis.plotkit import save_figure, yerr
from bonbench.apps.analysis.rundir import RunData
from bonbench.core.config import strategy_label
from bonbench.pipeline.ledger import SEARCH_SCORER, compute_ledger


@dataclass(frozen=True)
class ComputePoint:
    """One run on the compute axis: its label, strategy, tokens per problem and bon@N with its CI;
    ``curve``: (tokens per problem, bon@k) for k = 1..N of a best-of-N run (empty for a search)."""

    run: str
    label: str
    strategy: str
    tokens: float
    value: float
    ci: tuple[float, float]
    n: int
    curve: tuple[tuple[float, float], ...] = ()


def tokens_per_problem(run: RunData, verifier: str | None) -> float | None:
    """Prompt + generated + verifier tokens per problem (None when some were not counted): the tokens
    of ``verifier`` (the one bon@N selected with) and of a search's scorer, not of other verifiers
    the run was also scored with."""
    ledger = compute_ledger(run.path)
    if not ledger.problems:
        return None
    total = ledger.total()
    read = [v.tokens for v in total.verifiers if v.verifier in (SEARCH_SCORER, verifier)]
    if total.prompt_tokens is None or any(t is None for t in read):
        return None
    return (total.prompt_tokens + total.generated_tokens + sum(t or 0 for t in read)) / len(ledger.problems)


def compute_point(run: RunData) -> ComputePoint | None:
    """``run`` on the compute axis, or None (no bon@N, or tokens not counted)."""
    n = int(run.meta.get("n") or run.config.get("n") or 0)
    metric = run.metrics.get(f"bon@{n}")
    tokens = tokens_per_problem(run, metric.notes.get("verifier")) if metric is not None else None
    if metric is None or tokens is None:
        return None
    strategy = str(run.config.get("strategy") or "sampling")
    label = f"{strategy_label(run.config)} N={n} · {run.model_slug}"  # the label `list runs` and the leaderboard show
    curve: tuple[tuple[float, float], ...] = ()
    bon = run.curves.get("bon")
    if strategy == "sampling" and bon is not None and len(bon.k):
        curve = tuple((tokens * float(k) / n, float(v)) for k, v in zip(bon.k, bon.value, strict=True) if k <= n)
    ci = (float(metric.ci95[0]), float(metric.ci95[1]))
    return ComputePoint(str(run.path), label, strategy, tokens, float(metric.value), ci, n, curve)


def plot_accuracy_tokens(points: Sequence[ComputePoint], out: Path, *, title: str) -> Path:
    """Every point with its CI, one colour per strategy, best-of-N runs' curves as lines; log-scaled tokens."""
    fig = Figure(figsize=(6.8, 4.6), layout="constrained")
    ax = fig.add_subplot()
    cmap = matplotlib.colormaps["tab10"]
    strategies = list(dict.fromkeys(p.strategy for p in points))
    for p in points:
        color = cmap(strategies.index(p.strategy) % 10)
        if p.curve:
            ax.plot([t for t, _ in p.curve], [v for _, v in p.curve], color=color, lw=1.0, alpha=0.7)
        ax.errorbar([p.tokens], [p.value], yerr=yerr(p.value, p.ci), fmt="o", color=color, ms=5, capsize=2, lw=0.8)
    for s in strategies:
        ax.plot([], [], "o", color=cmap(strategies.index(s) % 10), label=s)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_xscale("log")
    ax.set_xlabel("tokens per problem (policy prompt + generated + verifier read)")
    ax.set_ylabel("accuracy (bon@N; best-of-N runs: bon@k along their line)")
    ax.grid(True, alpha=0.3)
    ax.set_title(title, fontsize=9)
    return save_figure(fig, out)


def compute_section(task: str, runs: Sequence[RunData], idx: int, out_dir: Path) -> tuple[Markup | None, dict[str, Any]]:
    """The section of ``task``'s runs on the compute axis (None when fewer than one run has a point)."""
    points = [p for p in (compute_point(r) for r in runs) if p is not None]
    left_out = [str(r.path) for r in runs if compute_point(r) is None]
    info: dict[str, Any] = {"task": task, "points": [asdict(p) for p in points], "left_out": left_out}
    if not points:
        return None, info
    table = Table(["run", "strategy", "N", "tokens / problem", "bon@N [95% CI]"],
                  [(p.label, p.strategy, p.n, f"{p.tokens:,.0f}", f"{fmt_value(p.value)} [{fmt_value(p.ci[0])}, "
                    f"{fmt_value(p.ci[1])}]") for p in sorted(points, key=lambda p: p.tokens)])
    png = plot_accuracy_tokens(points, out_dir / f"compute{idx:02d}_{task}.png", title=f"{task}: accuracy vs tokens")
    html = render("compute.html.j2", task=task, points=table, left_out=left_out,
                  fig=figure(png, f"accuracy vs tokens on {task}"))
    return html, info
