"""What a metric's number means for comparisons: which way is better, and whether it is a model
measurement at all.

``metric_info(name, notes, per_problem)`` answers, for a metric as metrics.json stores it:

* ``direction``: ``"higher"`` (pass@k, bon@k, maj@k, max@k, mean, win rates, accuracies,
  coverage), ``"lower"`` (``kl`` and ``kl_bon@k`` measured against a reference model: distance
  from the reference; a reasoning gap), or ``None`` (a count or report such as MathOdyssey's
  ``gold_abstained``, or a task metric this module does not know; a metric entry may declare its
  own with ``"direction": "higher" | "lower"``). Per-group names (``pass@1[level=3]``) take their
  base metric's direction.
* ``closed_form``: the value is a function of the run's settings, not a measurement of the model.
  ``kl_bon@k`` against the run's own policy is ``sum_l b_l log(b_l n / c_l)`` over a problem's
  reward levels (``bonbench.metrics.winrate.bon_kl``); when each problem's n rewards are distinct it is
  the same number for every problem, a function of n and k alone, and its "CI" has width 0.
  ``bonbench.pipeline.compare.bon_kls`` records this as ``"closed_form": true``; for files written before
  that, a ``kl_bon@k`` without a reference model whose per-problem values are all equal is read
  the same way.

``gateable`` combines them: the gate (``bonbench.apps.analysis.gate``) compares only metrics with a
direction that are not closed-form; tables show closed-form values without an interval.

This module computes nothing from samples and reads no files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bonbench.metrics.names import split_metric_name

HIGHER, LOWER = "higher", "lower"
_HIGHER_KINDS = ("pass", "bon", "maj", "max", "mean", "winrate")
_LOWER_KINDS = ("kl", "kl_bon")
# task metrics (tasks/functional_math.py, tasks/mathodyssey.py) by name: accuracies and coverage up,
# the reasoning gap down, abstention counts are reports without a better side
_TASK_DIRECTIONS = {"static_accuracy": HIGHER, "combined_accuracy": HIGHER, "functional_accuracy": HIGHER,
                    "static_accuracy_functional_only": HIGHER, "functional_coverage": HIGHER,
                    "reasoning_gap": LOWER, "reasoning_gap_functional_only": LOWER, "gold_abstained": None}

KL_FOOTNOTE = ("kl estimates KL(policy ‖ reference) in nats per completion as the mean over the policy's own "
               "samples of log pi(y|x) − log pi_ref(y|x). The mean is unbiased and the true KL is ≥ 0, but single "
               "terms are negative wherever the reference gives a sample more probability than the policy, so when "
               "the true KL is small next to the sampling noise the estimate and its CI can fall below 0; read a "
               "negative value as \"not distinguishable from 0 at this sample size\".")
CLOSED_FORM_FOOTNOTE = ("kl_bon@k without a reference model is the KL of reward-best-of-k selection to the run's own "
                        "samples; with distinct rewards it equals the same closed form of n and k on every problem, "
                        "so it has no sampling interval and is not a measurement of the model (never gated).")


@dataclass(frozen=True)
class MetricInfo:
    """How to read one metric: its better side (None: none) and whether it is closed-form."""

    name: str
    direction: str | None
    closed_form: bool = False

    @property
    def gateable(self) -> bool:
        return self.direction is not None and not self.closed_form

    @property
    def sign(self) -> float:
        """+1 when higher is better, -1 when lower is better (multiply a difference to get "better > 0")."""
        return -1.0 if self.direction == LOWER else 1.0


def _kind(name: str) -> str:
    base = split_metric_name(name)[0]
    return base.partition("@")[0]


def metric_info(name: str, notes: Mapping[str, Any] | None = None,
                per_problem: Mapping[str, float] | None = None) -> MetricInfo:
    """Direction and closed-form flag of metric ``name`` (see the module docstring).

    ``notes`` are the metric's metrics.json fields besides value/ci95/n_problems; ``per_problem`` its
    per-problem values (only read to recognise closed-form ``kl_bon@k`` in files that predate the flag).
    """
    notes = notes or {}
    kind = _kind(name)
    declared = notes.get("direction")
    if declared in (HIGHER, LOWER):
        direction: str | None = str(declared)
    elif kind in _HIGHER_KINDS:
        direction = HIGHER
    elif kind in _LOWER_KINDS:
        direction = LOWER
    else:
        direction = _TASK_DIRECTIONS.get(split_metric_name(name)[0])
    closed = False
    if kind == "kl_bon":
        if "closed_form" in notes:
            closed = bool(notes["closed_form"])
        elif per_problem:
            values = list(per_problem.values())
            closed = max(values) - min(values) <= 1e-12 * max(1.0, abs(values[0]))
    return MetricInfo(name, direction, closed)


def footnotes(names: Any) -> list[str]:
    """The explanatory lines a table listing ``names`` should carry (negative ``kl``, closed forms)."""
    names = list(names)
    out = []
    if any(_kind(n) == "kl" for n in names):
        out.append(KL_FOOTNOTE)
    if any(_kind(n) == "kl_bon" for n in names):
        out.append(CLOSED_FORM_FOOTNOTE)
    return out
