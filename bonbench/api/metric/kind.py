"""The metric record (``MetricKind``, with its ``Param``) and the metric registry (``METRICS``).


A metric kind is one registered record: its name grammar (``pass@k``, ``pass^k``, ``gpass@k:tau``,
``mean``), what it reads (``READS``), its better side, whether it is gateable, a closed form of n
(no interval) or a Monte Carlo estimate, and its per-problem and curve functions. Records are
registered like every other plugin (``bonbench.core.registry``): in-process with
``register_metric(record)``, or by a package's ``bonbench.metrics`` entry points, each naming a
record (``pass = "bonbench.plugins.metrics.exact:PASS"``) or a module that registers its records
when imported. bonbench's own are plugins too (``bonbench.plugins.metrics``, listed in
pyproject.toml).


What it does not do: parse names (``grammar``), compute values (``values``), or know a kind.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from bonbench.core.errors import BonbenchError
from bonbench.core.registry import Registry
from bonbench.metrics.info import HIGHER, LOWER

if TYPE_CHECKING:  # array and outcome types of the function fields only: the record itself loads no numpy
    import numpy as np

    from bonbench.metrics.estimators import ProblemOutcome
    from bonbench.metrics.montecarlo import SampledCurve


METRIC_GROUP = "bonbench.metrics"
MONTE_CARLO = "monte_carlo"  # a value's "estimate" in metrics.json when it averages random draws (exact: no field)

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
_KIND = re.compile(r"^[a-z][a-z0-9_]*\^?$")

# the function fields' signatures (MetricKind's docstring)
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
        if not self.lo <= self.example <= self.hi:
            raise ValueError(f"parameter {self.name}: example outside [{self.lo}, {self.hi}]")
        if not self.required and self.default is None:
            raise ValueError(f"parameter {self.name}: an optional parameter needs a default")

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
    be; an exact value at k depends on k, not on the other ks asked with it: a run's metrics take their
    exact values from its curves, ``values.compute_metrics``). Either may raise ``ValueError`` with the
    fix, which the user sees as one line. A kind with
    neither is stored only: another part of a run writes it (``how`` says which), and it is known
    here for its name, direction and display.

    The run's rules read the rest: ``reads`` (keys of ``READS``), ``companions`` (kinds computed beside
    each of its metrics at the same k where the task can compute them), ``always_on`` (outcome forms
    on whose tasks every run computes it, at k = 1), ``default_curve`` (every run that can writes its
    curve to curves.json; any other kind with a curve gets one when asked for), ``selection_kl`` (on
    a reward-judged task the run also writes the KL of reward-best-of-k selection beside it).
    Displays read ``order`` (kinds without one follow, by name), ``color`` and ``footnote``;
    ``scaling_law``: its curve rises with k towards a ceiling as coverage does, so the report fits
    the coverage-law families to it (pass^k falls with k and G-Pass@k zigzags: they are not fitted).
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
    scaling_law: bool = False
    how: str = ""

    def __post_init__(self) -> None:
        """A record a plugin got wrong is a ValueError naming the field (one line when its entry point loads)."""
        object.__setattr__(self, "reads", frozenset(self.reads))
        if not _KIND.match(self.kind):
            raise ValueError(f"metric kind {self.kind!r}: lower-case letters, digits and _, optionally ending in ^")
        unknown = sorted(set(self.reads) - set(READS))
        if unknown:
            raise ValueError(f"metric kind {self.kind!r} reads unknown inputs {unknown}; choose from {sorted(READS)}")
        if not set(self.always_on) <= set(OUTCOME_FORMS):
            raise ValueError(f"metric kind {self.kind!r}: always_on takes {OUTCOME_FORMS}")
        if self.direction not in (HIGHER, LOWER, None):
            raise ValueError(f"metric kind {self.kind!r}: direction is higher, lower or None")
        if not self.takes_k and self.curve is not None:
            raise ValueError(f"metric kind {self.kind!r}: a curve is a function of k")
        if not self.takes_k and self.kind.endswith("^"):
            raise ValueError(f"metric kind {self.kind!r}: a ^ kind takes k after the ^")
        if not self.computed and not self.how:
            raise ValueError(f"metric kind {self.kind!r} computes nothing: say in how= what writes it")

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


def known_kind(kind: str) -> MetricKind | None:
    """The record of ``kind`` when one is registered, else None (no error: for stored names)."""
    return metric_kind(kind) if kind in METRICS.names() else None
