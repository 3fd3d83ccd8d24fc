"""Metric specs and metric names: parsing ``--metric`` values, per-group names and the display order.

What it does: ``MetricSpec`` (one requested metric: kind and k), ``parse_metrics`` (the CLI's
``pass@1,4,16`` / ``bon@32`` / ``maj@8`` / ``max@4`` / ``mean`` forms, bad input a ``BonbenchError``
naming the accepted forms), ``group_metric_name`` / ``split_metric_name`` (``pass@1[level=college
math]``, a breakdown group's metric) and ``metric_sort_key`` (the one display order of the report
table, the leaderboard and report.html).

What it does not do: compute any value (``bonbench.metrics.estimators``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from bonbench.core.errors import BonbenchError

# max@k: the expected maximum of k real-valued rewards (the pass@k estimator on rewards; on 0/1
# grades it equals pass@k). Listed after the binary kinds so that displays keep their order.
KINDS = ("pass", "bon", "maj", "mean", "max")


# ----------------------------------------------------------------------------------------------
# metric specs: what --metric asks for


@dataclass(frozen=True)
class MetricSpec:
    """One requested metric: ``kind`` in pass/bon/maj/mean, ``k`` (None for mean)."""

    kind: str
    k: int | None = None

    def __post_init__(self) -> None:
        assert self.kind in KINDS, f"unknown metric kind {self.kind!r}"
        assert (self.kind == "mean") == (self.k is None), "mean takes no k; pass/bon/maj/max need one"
        assert self.k is None or self.k >= 1, f"k must be >= 1, got {self.k}"

    @property
    def name(self) -> str:
        return self.kind if self.k is None else f"{self.kind}@{self.k}"


_SPEC = re.compile(r"^(pass|bon|maj|max)@([1-9][0-9]*)$")


def _bad_spec(tok: str) -> BonbenchError:
    return BonbenchError(f"unknown metric {tok!r}; use pass@k, bon@k, maj@k, max@k or mean (k >= 1)")


def parse_metrics(specs: Sequence[str]) -> list[MetricSpec]:
    """Parse ``--metric`` values: 'pass@1,4,16' (a kind then extra ks), 'bon@32', 'maj@8', 'mean'.

    Any number of strings, each a comma list; a bare integer repeats the previous kind. Duplicates are
    dropped, first-seen order kept. Bad input raises BonbenchError naming the accepted forms.
    """
    if isinstance(specs, str):
        specs = [specs]
    out: list[MetricSpec] = []
    for text in specs:
        kind: str | None = None
        for raw in text.split(","):
            tok = raw.strip().lower()
            if tok == "mean":
                spec, kind = MetricSpec("mean"), None
            elif tok.isdigit() and kind is not None and int(tok) >= 1:
                spec = MetricSpec(kind, int(tok))
            elif m := _SPEC.match(tok):
                kind = m.group(1)
                spec = MetricSpec(kind, int(m.group(2)))
            else:
                raise _bad_spec(f"{kind}@{raw.strip()}" if kind is not None and "@" not in tok else raw.strip())
            if spec not in out:
                out.append(spec)
    if not out:
        raise BonbenchError("no metric given; use pass@k, bon@k, maj@k, max@k or mean (k >= 1)")
    return out


# ----------------------------------------------------------------------------------------------
# metric names: per-group names and the one display order (report table, leaderboard, report.html)


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


def metric_sort_key(name: str) -> tuple[int, str, int, bool, str, str, str]:
    """Display order of metric names: pass, bon, maj, mean, then task metrics (by name); by k within
    a kind; each metric right before its per-group values (by breakdown, then group)."""
    base, breakdown, group = split_metric_name(name)
    kind, _, k = base.partition("@")
    rank = KINDS.index(kind) if kind in KINDS and (kind == "mean") == (not k) else len(KINDS)
    # other metrics (static_accuracy, kl, winrate@k, kl_bon@k) by name, then by k: kl_bon@4 before kl_bon@16
    task_metric = kind if rank == len(KINDS) else ""
    return (rank, task_metric, int(k) if k.isdigit() else 0, breakdown is not None, breakdown or "", group or "", name)
