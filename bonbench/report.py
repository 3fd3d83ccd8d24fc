"""metrics.json -> a terminal table (rich) or plain text; nothing else.

The table lists every metric with its value and 95% bootstrap CI. Plots, HTML and leaderboards
live in bonbench.analysis.
"""

from __future__ import annotations

from typing import Any, Mapping

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def _fmt(x: float) -> str:
    return "nan" if x != x else f"{x:.4f}"


def _metric_order(name: str) -> tuple[int, int, str]:
    """pass, bon, maj, mean, then task metrics; by k within a kind."""
    kinds = {"pass": 0, "bon": 1, "maj": 2, "mean": 3}
    base, _, rest = name.partition("@")
    k = rest.split("[", 1)[0]  # per-variant names such as pass@4[Oct-2023]
    k_num = int(k) if k.isdigit() else 0
    return (kinds.get(base, 4), k_num, name)


def metrics_table(doc: Mapping[str, Any], title: str | None = None) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("95% CI", justify="right")
    table.add_column("problems", justify="right")
    for name in sorted(doc["metrics"], key=_metric_order):
        m = doc["metrics"][name]
        lo, hi = m.get("ci95", [float("nan"), float("nan")])
        # escape: per-variant names like pass@1[static] would otherwise be read as rich markup
        table.add_row(escape(name), _fmt(m["value"]), escape(f"[{_fmt(lo)}, {_fmt(hi)}]"), str(m.get("n_problems", "")))
    return table


def print_metrics(doc: Mapping[str, Any], console: Console | None = None) -> None:
    """Print the metrics table to stdout."""
    console = console or Console(soft_wrap=True)
    verifier = doc.get("verifier")
    title = f"{doc.get('task')} · {doc.get('model')} · n={doc.get('n')}" + (f" · verifier={verifier}" if verifier else "")
    console.print(metrics_table(doc, title=title))
