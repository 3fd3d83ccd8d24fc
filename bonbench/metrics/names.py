"""Per-group metric names: ``group_metric_name`` / ``split_metric_name`` (``pass@1[level=college
math]``, a metric computed on one group of a task's breakdown).

What it does not do: read a metric's own name (its kind, k and parameter: the metric registry,
``bonbench.api.metric``) or compute any value (``bonbench.metrics.estimators``).
"""

from __future__ import annotations


def group_metric_name(metric: str, breakdown: str, group: str) -> str:
    """The name of ``metric`` computed on one group of a task's breakdown: ``pass@1[variant=static]``.

    ``breakdown`` must not contain ``=``, ``[`` or ``]`` (so that :func:`split_metric_name` can
    invert it); ``group`` may be any text, spaces included (``pass@1[level=college math]``).
    """
    if not breakdown or any(ch in breakdown for ch in "=[]"):
        raise ValueError(f"breakdown name {breakdown!r} must be non-empty and free of '=', '[' and ']'")
    return f"{metric}[{breakdown}={group}]"


def split_metric_name(name: str) -> tuple[str, str | None, str | None]:
    """``(metric, breakdown, group)`` of a metric name; ``(name, None, None)`` for a dataset metric.

    Inverse of :func:`group_metric_name`. A name written before breakdowns had names
    (``pass@4[Oct-2023]``) gives breakdown ``""``.
    """
    base, sep, rest = name.partition("[")
    if not sep or not rest.endswith("]"):
        return name, None, None
    breakdown, eq, group = rest[:-1].partition("=")
    return (base, breakdown, group) if eq else (base, "", breakdown)
