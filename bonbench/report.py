"""metrics.json -> a terminal table (rich) or plain text; nothing else.

The table lists every metric with its value and 95% bootstrap CI. Plots, HTML and leaderboards
live in bonbench.analysis.
"""

from __future__ import annotations

from typing import Any, Mapping

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bonbench.estimators import metric_sort_key


def _fmt(x: float | None) -> str:
    # None: a value the task withholds (functional_math's reasoning_gap below its coverage rule)
    if x is None:
        return "withheld"
    return "nan" if x != x else f"{x:.4f}"


def metrics_table(doc: Mapping[str, Any], title: str | None = None) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("95% CI", justify="right")
    table.add_column("problems", justify="right")
    for name in sorted(doc["metrics"], key=metric_sort_key):
        m = doc["metrics"][name]
        lo, hi = m.get("ci95") or [float("nan"), float("nan")]
        # escape: per-group names like pass@1[variant=static] would otherwise be read as rich markup
        ci = "" if lo is None and hi is None else escape(f"[{_fmt(lo)}, {_fmt(hi)}]")  # withheld: no interval either
        table.add_row(escape(name), _fmt(m["value"]), ci, str(m.get("n_problems", "")))
    return table


def print_metrics(doc: Mapping[str, Any], console: Console | None = None) -> None:
    """Print the metrics table to stdout."""
    console = console or Console(soft_wrap=True)
    verifier = doc.get("verifier")
    title = f"{doc.get('task')} · {doc.get('model')} · n={doc.get('n')}" + (f" · verifier={verifier}" if verifier else "")
    if doc.get("shard"):  # one shard's metrics (shard-metrics.json), not the run's
        title += f" · shard {doc['shard'].get('label')} only"
    if (doc.get("shards") or {}).get("partial"):
        title += f" · partial: shards {', '.join(doc['shards'].get('missing', []))} missing"
    console.print(metrics_table(doc, title=title))
