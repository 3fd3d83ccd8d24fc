"""What a metric's number means for comparisons: the record of its reading, and the directions of
the tasks' own metrics.

``MetricInfo`` is how one stored metric reads: its ``direction`` (``"higher"``, ``"lower"`` or
``None``: a count or report without a better side), whether it is ``closed_form`` (a function of
the run's settings such as n and k, not a measurement of the model: no interval) and whether its
kind may be gated at all. ``gateable`` combines them: the gate (``bonbench.apps.analysis.gate``)
compares only metrics with a direction that are not closed-form; tables show closed-form values
without an interval. ``bonbench.api.metric.readings.metric_info`` fills it in from the metric kinds'
records; ``TASK_DIRECTIONS`` gives the better side of the tasks' own metrics, which have no kind.

This module computes nothing from samples, reads no files and knows no metric kind.
"""

from __future__ import annotations

from dataclasses import dataclass

HIGHER, LOWER = "higher", "lower"
# task metrics (tasks/functional_math.py, tasks/mathodyssey.py) by name: accuracies and coverage up,
# the reasoning gap down, abstention counts are reports without a better side
TASK_DIRECTIONS = {"static_accuracy": HIGHER, "combined_accuracy": HIGHER, "functional_accuracy": HIGHER,
                   "static_accuracy_functional_only": HIGHER, "functional_coverage": HIGHER,
                   "reasoning_gap": LOWER, "reasoning_gap_functional_only": LOWER, "gold_abstained": None}


@dataclass(frozen=True)
class MetricInfo:
    """How to read one metric: its better side (None: none), whether it is closed-form, and whether
    its kind allows gating (``can_gate``)."""

    name: str
    direction: str | None
    closed_form: bool = False
    can_gate: bool = True

    @property
    def gateable(self) -> bool:
        return self.can_gate and self.direction is not None and not self.closed_form

    @property
    def sign(self) -> float:
        """+1 when higher is better, -1 when lower is better (multiply a difference to get "better > 0")."""
        return -1.0 if self.direction == LOWER else 1.0
