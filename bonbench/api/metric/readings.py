"""How stored metrics and curves read: ``metric_info`` (better side, closed form, gateable: the gate,
the baseline, the leaderboard's colours), ``footnotes``, ``mc_note`` (a Monte Carlo value's standard
error and draws), the curves' labels, colours and order for the plots and tables, and
``metric_listing`` (``bonbench list metrics``).


Files written before a field existed read as before: an entry without ``estimate`` is exact, a
kl_bon@k without ``closed_form`` is judged by its kind's rule. What it does not do: read files.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from bonbench.api.metric.grammar import curve_spec, spec_of
from bonbench.api.metric.kind import MONTE_CARLO, OUTCOME_FORMS, READS, format_param, metric_kind, metric_kinds
from bonbench.metrics.info import HIGHER, LOWER, TASK_DIRECTIONS, MetricInfo
from bonbench.metrics.names import split_metric_name


def metric_info(name: str, notes: Mapping[str, Any] | None = None,
                per_problem: Mapping[str, float] | None = None) -> MetricInfo:
    """How to read the stored metric ``name`` (per-group names take their base metric's reading).

    The direction is the one the entry declares (``"direction": "higher" | "lower"``), else its
    kind's, else a task metric's (``metrics.info.TASK_DIRECTIONS``), else None. Closed form: what the
    entry records (``closed_form``), else its kind's rule (``per_problem`` is read only by a rule that
    recognises files written before the flag). Gateable: a direction, no closed form, and a kind that
    allows it.
    """
    notes = notes or {}
    spec = spec_of(name)
    record = metric_kind(spec.kind) if spec is not None else None
    declared = notes.get("direction")
    if declared in (HIGHER, LOWER):
        direction: str | None = str(declared)
    elif record is not None:
        direction = record.direction
    else:
        direction = TASK_DIRECTIONS.get(split_metric_name(name)[0])
    closed = record.is_closed_form(notes, per_problem) if record is not None else bool(notes.get("closed_form", False))
    return MetricInfo(name, direction, closed, can_gate=record is None or record.gateable)


def footnotes(names: Iterable[str]) -> list[str]:
    """The explanatory lines a table listing ``names`` should carry (its kinds' footnotes)."""
    kinds = {spec.kind for spec in map(spec_of, names) if spec is not None}
    return [r.footnote for r in metric_kinds() if r.kind in kinds and r.footnote]


def mc_note(notes: Mapping[str, Any]) -> tuple[float, int] | None:
    """(Monte Carlo standard error, draws) of a stored metric whose value is a Monte Carlo estimate;
    None for an exact one (files without ``estimate`` are exact)."""
    if notes.get("estimate") != MONTE_CARLO or notes.get("mc_se") is None:
        return None
    return float(notes["mc_se"]), int(notes.get("mc_draws") or 0)


def curve_label(key: str, k: str = "k") -> str:
    """How a curve is named in legends and tables: ``pass@k``, ``pass^k``, ``gpass@k:0.75``."""
    spec = curve_spec(key)
    if spec is None:
        return key
    label = metric_kind(spec.kind).grammar(k)
    return label if spec.param is None else label.rsplit(":", 1)[0] + ":" + format_param(spec.param)


def curve_fits_law(key: str) -> bool:
    """Whether the report fits the coverage-law families to this curve (its kind's ``scaling_law``;
    a key no installed kind has, such as verifier evaluation's ``bon:<verifier>``, is fitted)."""
    spec = curve_spec(key)
    return metric_kind(spec.kind).scaling_law if spec is not None else True


def curve_color(key: str) -> str | None:
    spec = curve_spec(key)
    return metric_kind(spec.kind).color if spec is not None else None


def curve_sort_key(key: str) -> tuple[int, int, str]:
    """Display order of curve keys (the kinds' order; unknown keys last, by name)."""
    spec = curve_spec(key)
    order = metric_kind(spec.kind).order if spec is not None else None
    return (order is None, order or 0, key)


def metric_listing() -> list[str]:
    """``bonbench list metrics``: every kind's grammar, summary, inputs, direction and estimate."""
    lines = []
    for r in metric_kinds():
        if r.computed:
            reads = " or ".join(sorted(r.forms(), key=list(READS).index)) if r.reads & set(OUTCOME_FORMS) else ""
            others = [x for x in READS if x in r.reads and x not in OUTCOME_FORMS]
            what = " + ".join(([reads] if reads else []) + others) or "nothing"
            side = f"{r.direction} is better" if r.direction else "no better side"
            kind = "Monte Carlo where exact is too costly" if r.estimate == MONTE_CARLO else "exact"
            param = f"; {r.param.name} in {r.param.range}" if r.param is not None else ""
            lines.append(f"{r.grammar():<12} {r.summary} (reads {what}; {side}; {kind}{param})")
        else:
            lines.append(f"{r.grammar():<12} {r.summary} ({r.how})")
    return lines + ["list forms: pass@1,4,16 (a bare k repeats the kind); repeat --metric for several kinds"]
