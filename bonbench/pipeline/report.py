"""metrics.json -> a terminal table (rich) or plain text, and the compute ledger -> its table; nothing else.

The table lists every metric with its value and 95% bootstrap CI (and, for a Monte Carlo value, its
Monte Carlo standard error). ``compute_table`` shows what the policy and each verifier spent
(``pipeline.ledger``: tokens and calls, per run and per problem); it computes nothing. A document that is not a
metrics.json (no ``metrics`` table, a metric without a value) is a one-line BonbenchError naming the
file, never a half-printed table. Plots, HTML and leaderboards live in bonbench.apps.analysis.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bonbench.api.metric.grammar import metric_sort_key
from bonbench.api.metric.readings import footnotes, mc_note, metric_info
from bonbench.core.errors import BonbenchError
from bonbench.pipeline import adaptive
from bonbench.pipeline.ledger import Ledger, ProblemCost
from bonbench.pipeline.search_rows import reuse_note


def _fmt(x: float | None) -> str:
    # None: a value the task withholds (functional_math's reasoning_gap below its coverage rule)
    if x is None:
        return "withheld"
    return "nan" if x != x else f"{x:.4f}"


def metrics_table(doc: Mapping[str, Any], title: str | None = None) -> Table:
    """The table of every metric: value, 95% CI, problems, and a "MC SE" column (the Monte Carlo
    standard error and draws) when some value is a Monte Carlo estimate."""
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("95% CI", justify="right")
    sampled = {name: mc_note(m) for name, m in doc["metrics"].items() if isinstance(m, Mapping) and mc_note(m)}
    if sampled:
        table.add_column("MC SE", justify="right")
    table.add_column("problems", justify="right")
    for name in sorted(doc["metrics"], key=metric_sort_key):
        m = doc["metrics"][name]
        lo, hi = m.get("ci95") or [float("nan"), float("nan")]
        # escape: per-group names like pass@1[variant=static] would otherwise be read as rich markup
        ci = "" if lo is None and hi is None else escape(f"[{_fmt(lo)}, {_fmt(hi)}]")  # withheld: no interval either
        per_problem = (doc.get("per_problem") or {}).get(name) if isinstance(doc.get("per_problem"), Mapping) else None
        if metric_info(name, m, per_problem if isinstance(per_problem, Mapping) else None).closed_form:
            ci = "closed form"  # a function of n and k, not a sample statistic: no interval to show
        mc = sampled.get(name)
        extra = [f"{mc[0]:.4f} ({mc[1]} draws)" if mc else ""] if sampled else []
        table.add_row(escape(name), _fmt(m["value"]), ci, *extra, str(m.get("n_problems", "")))
    return table


def check_metrics_doc(doc: Any, path: Path | str | None = None) -> None:
    """Raise a one-line BonbenchError unless ``doc`` has the shape of a metrics.json (a ``metrics``
    table whose entries have a ``value`` that is a number or null)."""
    where = f"{path}" if path is not None else "the metrics document"
    metrics = doc.get("metrics") if isinstance(doc, Mapping) else None
    bad = None if isinstance(metrics, Mapping) else "it has no \"metrics\" table"
    for name, m in (metrics or {}).items() if bad is None else ():
        value = m.get("value", "missing") if isinstance(m, Mapping) else "missing"
        ci = m.get("ci95") if isinstance(m, Mapping) else None
        if not (value is None or isinstance(value, (int, float))) or not (ci is None or (
                isinstance(ci, (list, tuple)) and len(ci) == 2 and all(x is None or isinstance(x, (int, float)) for x in ci))):
            bad = f"metric {name!r} has no numeric value and interval"
            break
    if bad:
        raise BonbenchError(f"{where} is not a bonbench metrics.json ({bad}); rescore the run with `bonbench score RUN_DIR`")


def print_metrics(doc: Mapping[str, Any], console: Console | None = None, path: Path | str | None = None) -> None:
    """Print the metrics table to stdout (``path``: the file ``doc`` came from, named in errors)."""
    check_metrics_doc(doc, path)
    console = console or Console(soft_wrap=True)
    verifier = doc.get("verifier")
    title = f"{doc.get('task')} · {doc.get('model')} · n={doc.get('n')}" + (f" · verifier={verifier}" if verifier else "")
    if doc.get("shard"):  # one shard's metrics (shard-metrics.json), not the run's
        title += f" · shard {doc['shard'].get('label')} only"
    if (doc.get("shards") or {}).get("partial"):
        title += f" · partial: shards {', '.join(doc['shards'].get('missing', []))} missing"
    search = doc.get("search") if isinstance(doc.get("search"), Mapping) else None
    if search:  # a search run: its strategy and options, and how a value over seeds is made
        options = ", ".join(f"{k}={v}" for k, v in sorted((search.get("options") or {}).items()))
        title += f" · search {search.get('strategy')}({options}) · seeds={search.get('seeds', 1)}"
    console.print(metrics_table(doc, title=title))
    for note in footnotes(doc["metrics"]):  # what a negative kl or a closed-form value means
        console.print(escape(note), style="dim")
    if search:
        console.print(escape(f"search: n={search.get('n')} is the budget of each search; {search.get('estimate')}"),
                      style="dim")
    if isinstance(doc.get("adaptive"), Mapping):  # an adaptive run: n is the cap, each problem had its own
        console.print(escape(adaptive.summary_line(doc["adaptive"])), style="dim")


def _count(x: int | None) -> str:
    return "unknown" if x is None else f"{x:,}"


def _per(x: int | None, n: int) -> str:
    return "unknown" if x is None else f"{x / max(n, 1):,.1f}"


def compute_table(ledger: Ledger) -> Table:
    """The run's compute: the policy's prompt and generated tokens and each verifier's tokens and
    calls (forward passes or requests), in all and per problem; "unknown" where rows did not count."""
    total, n = ledger.total(), len(ledger.problems)
    searched = "" if total.wall_s is None else f" · searches {total.wall_s:,.1f} s"  # a search run's (pipeline.ledger)
    table = Table(title=f"compute · {n} problems · {total.samples} samples{searched}", title_justify="left")
    table.add_column("who", no_wrap=True)
    for name in ("samples", "tokens", "tokens/problem", "calls", "calls/problem"):
        table.add_column(name, justify="right")
    table.add_row("policy: prompt", str(total.samples), _count(total.prompt_tokens), _per(total.prompt_tokens, n), "", "")
    table.add_row("policy: generated", str(total.samples), _count(total.generated_tokens),
                  _per(total.generated_tokens, n), "", "")
    if total.reasoning_tokens is not None and total.reasoning_tokens > 0:  # a reasoning model's trace, apart
        answer = total.generated_tokens - total.reasoning_tokens
        table.add_row("  of which reasoning", str(total.samples), _count(total.reasoning_tokens),
                      _per(total.reasoning_tokens, n), "", "")
        table.add_row("  of which answer", str(total.samples), _count(answer), _per(answer, n), "", "")
    for cost in total.verifiers:
        table.add_row(escape(f"verifier: {cost.verifier}"), str(cost.samples), _count(cost.tokens), _per(cost.tokens, n),
                      _count(cost.calls), _per(cost.calls, n))
    return table


def compute_by_problem_table(ledger: Ledger) -> Table:
    """One row per problem (and the total): policy tokens, then each verifier's tokens and calls."""
    table = Table(title="compute per problem", title_justify="left")
    table.add_column("problem", overflow="fold")
    for name in ("samples", "policy prompt", "policy generated"):
        table.add_column(name, justify="right")
    for name in ledger.verifiers:
        table.add_column(escape(f"{name} tokens"), justify="right")
        table.add_column(escape(f"{name} calls"), justify="right")

    def row(p: ProblemCost) -> list[str]:
        cells = [escape(p.problem_id if p.problem_id != "*" else "total"), str(p.samples), _count(p.prompt_tokens),
                 _count(p.generated_tokens)]
        for name in ledger.verifiers:
            cost = p.verifier(name)
            cells += ["", ""] if cost is None else [_count(cost.tokens), _count(cost.calls)]
        return cells

    for p in ledger.problems:
        table.add_row(*row(p))
    table.add_row(*row(ledger.total()))
    return table


def print_compute(ledger: Ledger, console: Console | None = None, per_problem: bool = False) -> None:
    """Print the compute table (and, with ``per_problem``, one row per problem) to stdout; nothing for a
    run without sample rows (one scored from metrics written elsewhere: no cost is known)."""
    if not ledger.problems:
        return
    console = console or Console(soft_wrap=True)
    console.print(compute_table(ledger))
    note = reuse_note(Path(ledger.run_dir))
    if note:  # a search run: whether the selection row's PRM pass was the search's own
        console.print(escape(note))
    if per_problem:
        console.print(compute_by_problem_table(ledger))
