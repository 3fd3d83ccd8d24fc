"""The grammar of metric names: ``MetricSpec`` (kind, k, parameter; one canonical ``name``),
``parse_metrics`` / ``parse_metric`` (``--metric`` values of every command, each bad one a one-line
``BonbenchError`` naming the fix), ``spec_of`` (a stored name, or None for a task's own metric),
``metric_names`` (the analysis commands' ``--metric``), ``metric_sort_key`` (the one display order),
and the keys of curves.json (``curve_spec``, ``check_curve_key``).


Names: ``kind@k``, ``kind@k:param`` (the parameter a float in its range, spelled one way:
``0.750`` and ``.75`` are ``0.75``), ``kind^k`` for a kind registered with a trailing ``^``
(``pass^4``), and ``kind`` for a kind without k (``mean``). What it does not do: compute anything.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from bonbench.api.metric.kind import MetricKind, format_param, known_kind, metric_kind, metric_kinds
from bonbench.core.errors import BonbenchError
from bonbench.metrics.names import split_metric_name

NAME = re.compile(r"^(?P<kind>[a-z][a-z0-9_]*)(?:(?P<hat>\^)(?P<k1>[0-9]+)|@(?P<k2>[0-9]+))?(?::(?P<param>[^:\s]+))?$")


@dataclass(frozen=True)
class MetricSpec:
    """One metric: ``kind`` (a registered kind), ``k`` (None for a kind without k) and ``param``
    (None: none, or the kind's default). ``name`` is its one canonical spelling."""

    kind: str
    k: int | None = None
    param: float | None = None

    def __post_init__(self) -> None:
        assert self.k is None or self.k >= 1, f"k must be >= 1, got {self.k}"

    @property
    def name(self) -> str:
        base = self.kind if self.k is None else f"{self.kind}{self.k}" if self.kind.endswith("^") else f"{self.kind}@{self.k}"
        return base if self.param is None else f"{base}:{format_param(self.param)}"

    @property
    def curve_key(self) -> str:
        """Its curve's key in curves.json: the kind, with the parameter (``gpass:0.75``)."""
        return self.kind if self.param is None else f"{self.kind}:{format_param(self.param)}"


def accepted_forms() -> str:
    """The grammar of every kind bonbench computes, for messages: ``pass@k, bon@k, ... or mean``."""
    forms = [r.grammar() for r in metric_kinds() if r.computed]
    return ", ".join(forms[:-1]) + " or " + forms[-1] if len(forms) > 1 else "".join(forms)


def _unknown(token: str) -> BonbenchError:
    return BonbenchError(f"unknown metric {token!r}; use {accepted_forms()} (k >= 1; `bonbench list metrics`)")


def parse_param(record: MetricKind, text: str | None, base: str) -> float | None:
    """The canonical parameter of ``base`` (a name without its parameter) from ``text``."""
    p = record.param
    if p is None:
        if text is not None:
            raise BonbenchError(f"{base}:{text}: {record.kind} takes no parameter; use {base}")
        return None
    if text is None:
        if p.required:
            raise BonbenchError(f"{base} needs its parameter: {record.grammar()} with {p.name} in {p.range}, "
                                f"e.g. {base}:{format_param(p.example)}")
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and p.lo <= value <= p.hi):
        raise BonbenchError(f"{base}:{text}: {p.name} must be a number in {p.range}, e.g. {base}:{format_param(p.example)}")
    value = float(format_param(value))  # one float per spelling: 0.750 and .75 are one metric
    return None if not p.required and value == p.default else value


def parse_metric(token: str, *, stored: bool = False) -> MetricSpec:
    """One metric name as a ``MetricSpec``; a one-line ``BonbenchError`` naming the fix otherwise.

    A kind that is stored only (``kl_bon@4``) is refused with what writes it unless ``stored``."""
    tok = token.strip().lower()
    m = NAME.match(tok)
    if m is None:
        raise _unknown(token.strip())
    hat = m.group("hat") is not None
    kind = m.group("kind") + ("^" if hat else "")
    record = known_kind(kind)
    if record is None:
        raise _unknown(token.strip())
    digits = m.group("k1") if hat else m.group("k2")
    if record.takes_k and not (digits is None and record.bare):
        if digits is None:
            raise BonbenchError(f"{tok}: {kind} needs k: {record.grammar()} with k >= 1, e.g. {record.grammar('4')}")
        if int(digits) < 1:
            raise BonbenchError(f"{tok}: k must be >= 1, e.g. {record.grammar('4')}")
    elif digits is not None:
        raise BonbenchError(f"{tok}: {kind} takes no k; use {record.grammar()}")
    k = int(digits) if digits is not None else None
    base = MetricSpec(kind, k).name
    spec = MetricSpec(kind, k, parse_param(record, m.group("param"), base))
    if not record.computed and not stored:
        raise BonbenchError(f"{spec.name} is not computed from a run's grades: {record.how}")
    return spec


def parse_metrics(specs: Sequence[str] | str, *, stored: bool = False) -> list[MetricSpec]:
    """``--metric`` values: each a comma list of names (``pass@1,4,16``, ``bon@32``, ``gpass@8:0.75``,
    ``pass^4``, ``mean``); a bare integer repeats the previous kind (and parameter). Duplicates are
    dropped, first-seen order kept. Bad input raises a one-line BonbenchError naming the fix."""
    if isinstance(specs, str):
        specs = [specs]
    out: list[MetricSpec] = []
    for text in specs:
        last: MetricSpec | None = None
        for raw in text.split(","):
            tok = raw.strip()
            if tok.isdigit() and last is not None:
                if not metric_kind(last.kind).takes_k:
                    raise BonbenchError(f"{last.name},{tok}: {last.kind} takes no k; use {metric_kind(last.kind).grammar()}")
                base = f"{last.kind}{tok}" if last.kind.endswith("^") else f"{last.kind}@{tok}"
                spec = parse_metric(base if last.param is None else f"{base}:{format_param(last.param)}", stored=stored)
            else:
                spec = parse_metric(tok, stored=stored)
            last = spec
            if spec not in out:
                out.append(spec)
    if not out:
        raise BonbenchError(f"no metric given; use {accepted_forms()} (k >= 1)")
    return out


def spec_of(name: str) -> MetricSpec | None:
    """The spec of a stored metric name (its group suffix ignored: ``pass@1[level=3]``); None for a
    task's own metric (``static_accuracy``) or a name no installed kind reads."""
    base = split_metric_name(name)[0]
    if not NAME.match(base.strip().lower()):
        return None
    try:
        return parse_metric(base, stored=True)
    except BonbenchError:
        return None


def metric_names(values: Sequence[str]) -> list[str]:
    """Metric names as the analysis commands take them (``--metric`` of leaderboard, gate): expanded
    like ``bonbench run`` reads them, stored-only kinds included. A per-group name is taken whole (its
    group may hold commas); a name with no ``@``, ``^`` or ``:`` that is no kind passes through (a
    task's own metric, ``static_accuracy``); anything else that no kind reads is a one-line error."""
    names: list[str] = []
    for value in values:
        if split_metric_name(value.strip())[1] is not None:
            names.append(value.strip())
            continue
        pending: list[str] = []  # kind names and the bare ks after them, read together
        for tok in (t.strip() for t in value.split(",") if t.strip()):
            if tok.isdigit() or any(c in tok for c in "@^:") or known_kind(_kind_text(tok)) is not None:
                pending.append(tok)
                continue
            names += [s.name for s in parse_metrics([",".join(pending)], stored=True)] if pending else []
            pending = []
            names.append(tok)
        names += [s.name for s in parse_metrics([",".join(pending)], stored=True)] if pending else []
    return list(dict.fromkeys(names))


def _kind_text(token: str) -> str:
    m = NAME.match(token.strip().lower())
    return "" if m is None else m.group("kind") + ("^" if m.group("hat") else "")


def metric_sort_key(name: str) -> tuple[int, int, str, int, float, bool, str, str, str]:
    """Display order of metric names (the report table, the leaderboard columns, report.html): kinds
    by their ``order``, then kinds without one and task metrics by name; by k and parameter within
    a kind; each metric right before its per-group values (by breakdown, then group)."""
    base, breakdown, group = split_metric_name(name)
    spec = spec_of(base)
    order = metric_kind(spec.kind).order if spec is not None else None
    kind = (spec.kind if spec is not None else base) if order is None else ""
    k = spec.k or 0 if spec is not None else 0
    param = spec.param if spec is not None and spec.param is not None else -math.inf
    return (order is None, order or 0, kind, k, param, breakdown is not None, breakdown or "", group or "", name)


def curve_spec(key: str) -> MetricSpec | None:
    """The kind and parameter of a curves.json key (``pass``, ``gpass:0.75``); None when no
    installed kind has that curve (another tool's key, a verifier's ``bon learned:x``)."""
    kind, _, param = key.partition(":")
    record = known_kind(kind)
    if record is None or not record.has_curve:
        return None
    try:
        return MetricSpec(kind, None, parse_param(record, param or None, kind)) if record.param else (
            MetricSpec(kind) if not param else None)
    except BonbenchError:
        return None


def check_curve_key(key: str) -> str:
    """``key`` when it names a curve (``--kind`` of ``bonbench plot``); else a one-line error."""
    if curve_spec(key) is None:
        raise BonbenchError(f"--kind {key!r} is no metric kind with a curve; use pass, bon, maj, max or another kind of "
                            "`bonbench list metrics` (with its parameter: gpass:0.5)")
    return key
