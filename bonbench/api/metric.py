"""The metric record (``MetricKind``), the metric registry and the grammar of metric names.

A metric kind is one registered record: its name grammar (``pass@k``, ``pass^k``, ``gpass@k:tau``,
``mean``), what it reads (``READS``), its better side, whether it is gateable, a closed form of n
(no interval) or a Monte Carlo estimate, and its per-problem and curve functions. Records are
registered like every other plugin (``bonbench.core.registry``): in-process with
``register_metric(record)``, or by a package's ``bonbench.metrics`` entry points, each naming a
record (``pass = "bonbench.plugins.metrics.exact:PASS"``) or a module that registers its records
when imported. bonbench's own are plugins too (``bonbench.plugins.metrics``, listed in
pyproject.toml).

Every consumer asks this module, never a kind string: ``parse_metrics`` / ``parse_metric`` turn
``--metric`` values into ``MetricSpec``s (one canonical name each), ``spec_of`` reads a stored name,
``missing_inputs`` says what a task cannot give a metric (the run's rules), ``curve_keys`` which
curves a run writes, ``metric_info`` / ``footnotes`` / ``metric_sort_key`` how a stored metric reads
in tables, the gate and the plots. Computing values is ``bonbench.api.metric_values``.

What it does not do: compute any value, read files, or know a kind: the records say everything.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from bonbench.api.task import Task
from bonbench.core.errors import BonbenchError
from bonbench.core.registry import Registry
from bonbench.metrics.info import HIGHER, LOWER, TASK_DIRECTIONS, MetricInfo
from bonbench.metrics.names import split_metric_name

if TYPE_CHECKING:  # array and outcome types of the function fields only: the record itself loads no numpy
    import numpy as np

    from bonbench.metrics.estimators import ProblemOutcome
    from bonbench.metrics.montecarlo import SampledCurve

METRIC_GROUP = "bonbench.metrics"

# what a metric may read, and what provides it. "grades" and "rewards" are the two forms of a
# sample's outcome: a metric lists the forms it is defined on and is refused on a task judged the
# other way (one that lists neither reads no outcome). Every other input it lists is required.
READS = {
    "grades": "0/1 verdicts: a task judged by correctness",
    "rewards": "real-valued rewards: a task judged by a reward model",
    "answers": "the grader's answer classes: a grader that extracts answers (code graders do not)",
    "scores": "verifier scores of every sample: --verifier NAME",
    "logprobs": "the samples' log-probabilities: a sampler that records them (vllm, hf)",
}
OUTCOME_FORMS = ("grades", "rewards")
# why a task lacks an input: the clause after "but this task" in the one-line refusal
_LACKING = {
    "grades": "is judged by a reward model, so there is nothing to pass or vote on",
    "rewards": "is judged by correctness, so its outcomes are 0/1 grades, not rewards",
    "answers": "has a grader that extracts no answers (it runs programs), so there is nothing to vote on",
    "scores": "has no verifier scores; pass --verifier NAME",
    "logprobs": "has samples without log-probabilities; sample with --backend vllm or hf",
}
_KIND = re.compile(r"^[a-z][a-z0-9_]*\^?$")
_NAME = re.compile(r"^(?P<kind>[a-z][a-z0-9_]*)(?:(?P<hat>\^)(?P<k1>[0-9]+)|@(?P<k2>[0-9]+))?(?::(?P<param>[^:\s]+))?$")

PerProblem = Callable[["ProblemOutcome", "int | None", "float | None"], float]
CurveFn = Callable[[Sequence["ProblemOutcome"], Sequence[int], "float | None", int], "np.ndarray | SampledCurve"]
ClosedForm = Callable[[Mapping[str, Any], "Mapping[str, float] | None"], bool]


def format_param(value: float) -> str:
    """The canonical spelling of a parameter: the shortest text that reads back as the same float,
    without a trailing ``.0`` (``0.750`` and ``.75`` are ``0.75``; ``1.0`` is ``1``)."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


@dataclass(frozen=True)
class Param:
    """A metric's one parameter, written after a colon (``gpass@8:0.75``): a float in [lo, hi].

    ``example`` is the value the error messages suggest. A parameter that is not ``required`` means
    ``default`` when left out, and a name that spells the default is the name without it.
    """

    name: str
    lo: float
    hi: float
    example: float
    required: bool = True
    default: float | None = None

    def __post_init__(self) -> None:
        assert self.lo <= self.example <= self.hi, f"parameter {self.name}: example outside [{self.lo}, {self.hi}]"
        assert self.required or self.default is not None, f"parameter {self.name}: an optional parameter needs a default"

    @property
    def range(self) -> str:
        return f"[{format_param(self.lo)}, {format_param(self.hi)}]"


@dataclass(frozen=True)
class MetricKind:
    """One registered kind of metric; ``kind`` is its registry name (see the module docstring).

    Name grammar: ``kind@k`` (``takes_k``), ``kind`` alone (``mean``), and ``kind^k`` for a kind whose
    name ends in ``^`` (``pass^4``); a ``param`` adds ``:value``; ``bare``: the kind alone is a name of
    it too (``winrate``, k = 1). A computed kind has ``per_problem``
    (one problem's exact value: ``(outcome, k, param) -> float``, k None for a kind without k) and/or
    ``curve`` (every k at once: ``(outcomes, ks, param, seed)`` -> a [P, K] array, NaN where n < k, or a
    ``SampledCurve`` when some values are Monte Carlo estimates; ``estimate="monte_carlo"`` says it may
    be). Either may raise ``ValueError`` with the fix, which the user sees as one line. A kind with
    neither is stored only: another part of a run writes it (``how`` says which), and it is known
    here for its name, direction and display.

    The run's rules read the rest: ``reads`` (keys of ``READS``), ``companions`` (kinds computed beside
    each of its metrics at the same k where the task can compute them), ``always_on`` (outcome forms
    on whose tasks every run computes it, at k = 1), ``default_curve`` (every run that can writes its
    curve to curves.json; any other kind with a curve gets one when asked for), ``selection_kl`` (on
    a reward-judged task the run also writes the KL of reward-best-of-k selection beside it).
    Displays read ``order`` (kinds without one follow, by name), ``color`` and ``footnote``.
    """

    kind: str
    summary: str
    reads: frozenset[str] = frozenset()
    direction: str | None = HIGHER  # HIGHER, LOWER or None (a count or report)
    takes_k: bool = True
    bare: bool = False
    param: Param | None = None
    per_problem: PerProblem | None = None
    curve: CurveFn | None = None
    estimate: Literal["exact", "monte_carlo"] = "exact"
    closed_form: bool | ClosedForm = False
    gateable: bool = True
    companions: tuple[str, ...] = ()
    always_on: tuple[str, ...] = ()
    default_curve: bool = False
    selection_kl: bool = False
    order: int | None = None
    color: str | None = None
    footnote: str | None = None
    how: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "reads", frozenset(self.reads))
        assert _KIND.match(self.kind), f"metric kind {self.kind!r}: lower-case letters, digits and _, optionally ending in ^"
        unknown = sorted(set(self.reads) - set(READS))
        assert not unknown, f"metric kind {self.kind!r} reads unknown inputs {unknown}; choose from {sorted(READS)}"
        assert set(self.always_on) <= set(OUTCOME_FORMS), f"metric kind {self.kind!r}: always_on takes {OUTCOME_FORMS}"
        assert self.direction in (HIGHER, LOWER, None), f"metric kind {self.kind!r}: direction is higher, lower or None"
        assert self.takes_k or self.curve is None, f"metric kind {self.kind!r}: a curve is a function of k"
        assert self.takes_k or not self.kind.endswith("^"), f"metric kind {self.kind!r}: a ^ kind takes k after the ^"
        assert self.computed or self.how, f"metric kind {self.kind!r} computes nothing: say in how= what writes it"

    @property
    def computed(self) -> bool:
        """Whether bonbench computes it from a run's outcomes (else it is stored only)."""
        return self.per_problem is not None or self.curve is not None

    @property
    def has_curve(self) -> bool:
        return self.computed and self.takes_k

    def forms(self) -> frozenset[str]:
        """The outcome forms it is defined on (both when it reads none)."""
        return frozenset(self.reads & set(OUTCOME_FORMS)) or frozenset(OUTCOME_FORMS)

    def grammar(self, k: str = "k") -> str:
        """How its names are written: ``pass@k``, ``pass^k``, ``gpass@k:tau``, ``mean``."""
        base = self.kind + (k if self.kind.endswith("^") else f"@{k}") if self.takes_k else self.kind
        return base + (f":{self.param.name}" if self.param is not None else "")

    def is_closed_form(self, notes: Mapping[str, Any], per_problem: Mapping[str, float] | None) -> bool:
        if "closed_form" in notes:  # what the writer recorded wins
            return bool(notes["closed_form"])
        return self.closed_form(notes, per_problem) if callable(self.closed_form) else bool(self.closed_form)


METRICS: Registry[MetricKind] = Registry("metric", METRIC_GROUP)


def register_metric(record: MetricKind) -> MetricKind:
    """Register ``record`` under its kind (in-process; a package lists records as entry points)."""
    METRICS.add(record.kind, record)
    return record


def metric_kind(kind: str) -> MetricKind:
    """The registered record of ``kind`` (``pass``, ``pass^``); a one-line error for an unknown one."""
    record = METRICS.get(kind, hint=" (see `bonbench list metrics`)")
    if not isinstance(record, MetricKind) or record.kind != kind:
        raise BonbenchError(f"metric entry point {kind!r} is not a MetricKind of kind {kind!r} ({record!r:.60}); "
                            "fix the plugin's entry point or reinstall it")
    return record


def metric_kinds() -> list[MetricKind]:
    """Every registered kind in display order (``order``, then the kinds without one by name)."""
    return sorted((metric_kind(k) for k in METRICS.names()), key=lambda r: (r.order is None, r.order or 0, r.kind))


def _known(kind: str) -> MetricKind | None:
    return metric_kind(kind) if kind in METRICS.names() else None


# ----------------------------------------------------------------------------------------------
# names: specs, parsing, canonical spelling


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


def _parameter(record: MetricKind, text: str | None, base: str) -> float | None:
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
    m = _NAME.match(tok)
    if m is None:
        raise _unknown(token.strip())
    hat = m.group("hat") is not None
    kind = m.group("kind") + ("^" if hat else "")
    record = _known(kind)
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
    spec = MetricSpec(kind, k, _parameter(record, m.group("param"), base))
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
                if last.k is None:
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
    if not _NAME.match(base.strip().lower()):
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
            if tok.isdigit() or any(c in tok for c in "@^:") or _known(_kind_text(tok)) is not None:
                pending.append(tok)
                continue
            names += [s.name for s in parse_metrics([",".join(pending)], stored=True)] if pending else []
            pending = []
            names.append(tok)
        names += [s.name for s in parse_metrics([",".join(pending)], stored=True)] if pending else []
    return list(dict.fromkeys(names))


def _kind_text(token: str) -> str:
    m = _NAME.match(token.strip().lower())
    return "" if m is None else m.group("kind") + ("^" if m.group("hat") else "")


# ----------------------------------------------------------------------------------------------
# what a task gives a metric


def run_inputs(judged_by: str, *, answers: bool = True, scores: bool = True, logprobs: bool = True) -> frozenset[str]:
    """The inputs (``READS`` keys) a run provides: its outcome form (grades for a task judged by
    correctness, rewards for one judged by a reward model) and each other input it has."""
    have = {"rewards" if judged_by == "reward" else "grades"}
    have |= {name for name, present in (("answers", answers), ("scores", scores), ("logprobs", logprobs)) if present}
    return frozenset(have)


def task_inputs(task: Task, *, scores: bool = True, logprobs: bool = True) -> frozenset[str]:
    """What a run of ``task`` gives its metrics: its outcome form, answers when its grader extracts
    them (code graders say ``extracts_answers = False``: every answer is None), and ``scores`` /
    ``logprobs`` as the caller says (the run's rules assume both come: a verifier is chosen for a
    metric that reads scores)."""
    return run_inputs(task.judged_by, answers=bool(getattr(task.grader, "extracts_answers", True)), scores=scores,
                      logprobs=logprobs)


def missing_inputs(kind: str, inputs: Iterable[str]) -> list[str]:
    """What ``kind`` reads that ``inputs`` lack (its outcome form first), in ``READS`` order."""
    record, have = metric_kind(kind), set(inputs)
    lacking = [] if record.forms() & have else sorted(record.forms() - have, key=list(READS).index)[:1]
    return lacking + [r for r in READS if r in record.reads and r not in OUTCOME_FORMS and r not in have]


def applies(kind: str, inputs: Iterable[str]) -> bool:
    return not missing_inputs(kind, inputs)


def refusal(names: Sequence[str], lacking: str, inputs: Iterable[str]) -> BonbenchError:
    """The one line that refuses ``names`` (which read ``lacking``) on a task that lacks it, naming
    the kinds the task can compute."""
    usable = [r.grammar() for r in metric_kinds() if r.computed and applies(r.kind, inputs)]
    what = READS[lacking].split(":")[0]
    alternatives = ", ".join(usable[:-1]) + " or " + usable[-1] if len(usable) > 1 else "".join(usable) or "none"
    return BonbenchError(f"{', '.join(names)} read(s) {what}, but this task {_LACKING[lacking]}; use {alternatives}")


def always_metrics(inputs: Iterable[str]) -> list[MetricSpec]:
    """The metrics every run computes on a task with ``inputs`` (``always_on``), in display order."""
    have = set(inputs)
    return [MetricSpec(r.kind, 1 if r.takes_k else None) for r in metric_kinds()
            if set(r.always_on) & have and applies(r.kind, have)]


def companions(spec: MetricSpec, inputs: Iterable[str]) -> list[MetricSpec]:
    """The metrics computed beside ``spec`` at its k on a task with ``inputs``."""
    have = set(inputs)
    return [MetricSpec(kind, spec.k) for kind in metric_kind(spec.kind).companions
            if applies(kind, have) and metric_kind(kind).takes_k == (spec.k is not None)]


def reads_scores(specs: Iterable[MetricSpec]) -> bool:
    """Whether some metric of ``specs`` reads verifier scores (then the run picks a verifier)."""
    return any("scores" in metric_kind(s.kind).reads for s in specs)


def reads_scores_name(name: str) -> bool:
    """Whether the stored metric ``name`` (groups included) was computed from verifier scores."""
    spec = spec_of(name)
    return spec is not None and "scores" in metric_kind(spec.kind).reads


def curve_keys(specs: Iterable[MetricSpec], inputs: Iterable[str]) -> list[str]:
    """The curves a run writes: every ``default_curve`` kind the run's ``inputs`` allow, then the
    curve of every requested kind that has one, in display order."""
    have = set(inputs)
    keys = [r.kind for r in metric_kinds() if r.default_curve and r.has_curve and applies(r.kind, have)]
    asked = [s for s in specs if metric_kind(s.kind).has_curve and applies(s.kind, have)]
    keys += [s.curve_key for s in sorted(asked, key=lambda s: metric_sort_key(s.name))]
    return list(dict.fromkeys(keys))


def curve_spec(key: str) -> MetricSpec | None:
    """The kind and parameter of a curves.json key (``pass``, ``gpass:0.75``); None when no
    installed kind has that curve (another tool's key, a verifier's ``bon learned:x``)."""
    kind, _, param = key.partition(":")
    record = _known(kind)
    if record is None or not record.has_curve:
        return None
    try:
        return MetricSpec(kind, None, _parameter(record, param or None, kind)) if record.param else (
            MetricSpec(kind) if not param else None)
    except BonbenchError:
        return None


def check_curve_key(key: str) -> str:
    """``key`` when it names a curve (``--kind`` of ``bonbench plot``); else a one-line error."""
    if curve_spec(key) is None:
        raise BonbenchError(f"--kind {key!r} is no metric kind with a curve; use pass, bon, maj, max or another kind of "
                            "`bonbench list metrics` (with its parameter: gpass:0.5)")
    return key


def curve_label(key: str, k: str = "k") -> str:
    """How a curve is named in legends and tables: ``pass@k``, ``pass^k``, ``gpass@k:0.75``."""
    spec = curve_spec(key)
    if spec is None:
        return key
    label = metric_kind(spec.kind).grammar(k)
    return label if spec.param is None else label.rsplit(":", 1)[0] + ":" + format_param(spec.param)


def curve_color(key: str) -> str | None:
    spec = curve_spec(key)
    return metric_kind(spec.kind).color if spec is not None else None


def curve_sort_key(key: str) -> tuple[int, int, str]:
    """Display order of curve keys (the kinds' order; unknown keys last, by name)."""
    spec = curve_spec(key)
    order = metric_kind(spec.kind).order if spec is not None else None
    return (order is None, order or 0, key)


# ----------------------------------------------------------------------------------------------
# reading stored metrics: direction, closed form, notes, display order


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


MONTE_CARLO = "monte_carlo"


def mc_note(notes: Mapping[str, Any]) -> tuple[float, int] | None:
    """(Monte Carlo standard error, draws) of a stored metric whose value is a Monte Carlo estimate;
    None for an exact one (files without ``estimate`` are exact)."""
    if notes.get("estimate") != MONTE_CARLO or notes.get("mc_se") is None:
        return None
    return float(notes["mc_se"]), int(notes.get("mc_draws") or 0)


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
