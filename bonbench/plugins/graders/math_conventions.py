"""The conventions on which math graders differ, as one record (part of the math grader).

What it does: ``MathConventions`` names each choice where careful graders disagree and bonbench
keeps a default (docs/math-grading.md, "Conventions"): how a percent reads, whether a comma can
be a decimal mark, and what a gold answer written as several boxes means. The math tasks take
each field as a task argument (``-T percent=fraction``); the fields go into the task's
``grade_args``, so a run graded under other conventions keeps its own stored grades.

What it does not do: it applies nothing itself; ``math_canonical`` reads ``percent`` and
``decimal_comma``, ``MathGrader`` and ``is_equiv`` read ``gold_boxes``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

PERCENT_CHOICES = ("number", "fraction")
GOLD_BOXES_CHOICES = ("all", "any")


@dataclass(frozen=True)
class MathConventions:
    """``percent``: ``number`` (bonbench's default: ``10\\%`` is 10, the sign a unit) or ``fraction``
    (``10\\%`` is 1/10, as Math-Verify, newer NeMo-Skills and Qwen's grader read it).
    ``decimal_comma``: False (default: a comma separates list items or thousands) or True (a comma
    between digits, ``3,5``, is a decimal mark; a list then needs a space or a semicolon).
    ``gold_boxes``: what a gold answer written as several ``\\boxed{}`` means: ``all`` (default: the
    list of every box, the way a completion's final boxes read) or ``any`` (alternatives: an answer
    equal to one of them is right)."""

    percent: str = "number"
    decimal_comma: bool = False
    gold_boxes: str = "all"

    def __post_init__(self) -> None:
        if self.percent not in PERCENT_CHOICES:
            raise ValueError(f"percent={self.percent!r}: use one of {', '.join(PERCENT_CHOICES)}")
        if not isinstance(self.decimal_comma, bool):
            raise ValueError(f"decimal_comma={self.decimal_comma!r}: use true or false")
        if self.gold_boxes not in GOLD_BOXES_CHOICES:
            raise ValueError(f"gold_boxes={self.gold_boxes!r}: use one of {', '.join(GOLD_BOXES_CHOICES)}")

    def grade_args(self) -> dict[str, Any]:
        """The fields that differ from the defaults (empty for the defaults, so runs graded before
        these conventions existed keep their grading id)."""
        default = asdict(DEFAULT_CONVENTIONS)
        return {k: v for k, v in asdict(self).items() if v != default[k]}


DEFAULT_CONVENTIONS = MathConventions()
