"""Writing a compute recipe (``recipe.build_recipe``): the terminal table, the JSON document and the
accuracy-vs-cost plot of every strategy with the frontier and the chosen points marked.

It reads nothing but the ``Recipe`` record and computes nothing but the Pareto frontier it draws;
which strategy is chosen at a budget is decided in ``recipe``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bonbench.apps.analysis.plotkit import plain_log_axis, save_figure
from bonbench.apps.analysis.recipe import Choice, Recipe, Strategy
from bonbench.core import outputs

JSON_NAME, PLOT_NAME = "recipe.json", "recipe-frontier.png"


def _ci(s: Strategy) -> str:
    return f"{s.value:.3f}" if s.ci95 is None else f"{s.value:.3f} [{s.ci95[0]:.3f}, {s.ci95[1]:.3f}]"


def _row(c: Choice) -> list[str]:
    diff = "" if c.diff is None else f"{c.diff[0]:+.3f} [{c.diff[1]:+.3f}, {c.diff[2]:+.3f}]"
    runner = "" if c.runner_up is None else f"{c.runner_up.label} {c.runner_up.value:.3f}"
    bound = "" if c.oracle_bound is None else f"{c.oracle_bound.name} {c.oracle_bound.value:.3f}"
    return [f"{c.budget:g}", c.group, c.best.label, _ci(c.best), f"{c.best.cost:.4g}", runner, diff, bound]


def format_table(recipe: Recipe) -> str:
    """The chosen strategy per budget (and group), as aligned text lines."""
    header = [f"budget ({recipe.unit}/problem)", "problems", "best strategy", "accuracy [95% CI]", "cost",
              "runner-up", "best - runner-up [95% CI]", "oracle bound (pass@N)"]
    rows = [header] + [_row(c) for c in recipe.choices]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [f"recipe for {recipe.task}: {len(recipe.problems)} problems, {len(recipe.strategies)} strategies"]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    if recipe.base_run:
        lines.append(f"difficulty bins from the pass@1 of {recipe.base_run} (1 = easiest)")
    lines += [f"note: {n}" for n in recipe.notes]
    return "\n".join(lines)


def recipe_json(recipe: Recipe) -> dict[str, Any]:
    """The recipe as a JSON-ready document (every strategy, every choice, the notes)."""
    def strategy(s: Strategy | None) -> dict[str, Any] | None:
        return None if s is None else {**asdict(s), "name": s.name, "oracle": s.oracle}

    return {"task": recipe.task, "unit": recipe.unit, "problems": len(recipe.problems), "base_run": recipe.base_run,
            "choices": [{"budget": c.budget, "group": c.group, "n_problems": c.n_problems, "best": strategy(c.best),
                         "runner_up": strategy(c.runner_up),
                         "diff": None if c.diff is None else dict(zip(("value", "lo", "hi"), c.diff, strict=True)),
                         "oracle_bound": strategy(c.oracle_bound)} for c in recipe.choices],
            "strategies": [strategy(s) for s in recipe.strategies], "notes": list(recipe.notes)}


def frontier(strategies: Sequence[Strategy]) -> list[Strategy]:
    """The deployable strategies no cheaper-or-equal one beats (cost ascending, accuracy rising)."""
    out: list[Strategy] = []
    for s in sorted((s for s in strategies if not s.oracle), key=lambda s: (s.cost, -s.value)):
        if not out or s.value > out[-1].value:
            out.append(s)
    return out


def plot_frontier(recipe: Recipe, out: Path) -> Path:
    """Accuracy vs cost of every strategy (one line per run, rule and verifier, over N), the frontier,
    pass@N dashed (the oracle's bound) and the chosen points of the ``all`` group starred."""
    from matplotlib.figure import Figure  # heavy: only when a plot is drawn

    fig = Figure(figsize=(8, 5))
    ax = fig.add_subplot(1, 1, 1)
    series: dict[tuple[str, str, str | None], list[Strategy]] = {}
    for s in recipe.strategies:
        series.setdefault((s.run, s.rule, s.verifier), []).append(s)
    for (_, rule, _), pts in series.items():
        pts = sorted(pts, key=lambda s: s.N)
        search = f"{pts[0].search} " if pts[0].search else ""  # a search run: one point per rule
        label = f"{pts[0].setting} {search}{rule}" + (f" [{pts[0].verifier}]" if pts[0].verifier else "")
        ax.plot([s.cost for s in pts], [s.value for s in pts], marker="o", markersize=3, linewidth=1,
                linestyle="--" if rule == "pass" else "-", color="0.6" if rule == "pass" else None,
                label=label + (" (oracle bound)" if rule == "pass" else ""))
    front = frontier(recipe.strategies)
    ax.step([s.cost for s in front], [s.value for s in front], where="post", color="black", linewidth=2,
            label="frontier (deployable)")
    chosen = [c for c in recipe.choices if c.group == "all"]
    ax.scatter([c.best.cost for c in chosen], [c.best.value for c in chosen], marker="*", s=160, color="gold",
               edgecolors="black", zorder=5, label="chosen at a budget")
    for c in chosen:
        ax.axvline(c.budget, color="0.8", linestyle=":", linewidth=1)
        ax.annotate(f"{c.best.name}", (c.best.cost, c.best.value), textcoords="offset points", xytext=(4, 6), fontsize=7)
    plain_log_axis(ax, [s.cost for s in recipe.strategies], base=2 if recipe.unit == "tokens" else 10)
    ax.set_xlabel(f"cost per problem ({recipe.unit}, log scale)")
    ax.set_ylabel("accuracy")
    ax.set_title(f"{recipe.task}: accuracy vs cost ({len(recipe.problems)} problems)")
    ax.legend(fontsize=6, loc="lower right")
    fig.tight_layout()
    return save_figure(fig, out)


def write_recipe(recipe: Recipe, folder: Path) -> tuple[Path, Path]:
    """recipe.json and recipe-frontier.png into ``folder``."""
    path = outputs.write_json(folder / JSON_NAME, recipe_json(recipe))
    return path, plot_frontier(recipe, folder / PLOT_NAME)
