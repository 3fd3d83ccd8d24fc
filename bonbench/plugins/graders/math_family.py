"""What the MATH-style tasks share (``math``, ``math500``, ``functional_math``, ``mathodyssey``).

The subject table of Hendrycks MATH and the level / subject readers, the prompt (``make_render``:
``bonbench.core.prompts.math_prompt`` with k few-shot exemplars), and ``math_style_task``, which
assembles a ``Task`` with those prompts, the MATH grader and the family's default metrics. A task
of the ``math`` family builds its Task here so that its prompts and grading are exactly MATH's
(same ``prompt_id``, so runs are comparable) and no task imports another.

This module loads no data (the tasks do) and grades nothing itself (``MathGrader`` does).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from bonbench.api.task import PromptStyle, Task
from bonbench.core.errors import BonbenchError
from bonbench.core.prompts import MATH_FEWSHOT, math_prompt
from bonbench.core.records import Problem, Prompt
from bonbench.plugins.graders.math import MathGrader

FAMILY = "math"
PROMPT_ID = "math-prompt-v1"
DEFAULT_METRICS = ("pass@1", "maj@4", "pass@4")
# subject folder (unique_id / hub config name) -> display name (the "type" field)
SUBJECTS: dict[str, str] = {
    "algebra": "Algebra",
    "counting_and_probability": "Counting & Probability",
    "geometry": "Geometry",
    "intermediate_algebra": "Intermediate Algebra",
    "number_theory": "Number Theory",
    "prealgebra": "Prealgebra",
    "precalculus": "Precalculus",
}


def level_int(raw: Any) -> int | None:
    """A MATH level (``3``, ``"Level 3"``) as an int; None when it has no digit ("Level ?")."""
    if isinstance(raw, int):
        return raw
    digits = "".join(ch for ch in str(raw) if ch.isdigit())
    return int(digits) if digits else None


def subject_folder(subject: str) -> str:
    """Subject folder for a display name or folder name."""
    for folder, display in SUBJECTS.items():
        if subject.lower() in (folder, display.lower()):
            return folder
    return subject.lower().replace(" & ", "_and_").replace(" ", "_")


def parse_level(level: str | int | None, task: str) -> int | None:
    """``3``, ``"3"``, ``"level 3"`` or ``"Level 3"`` -> ``3``; None keeps all levels."""
    if level is None or str(level).strip() == "":
        return None
    text = str(level).strip().lower().replace("level", "").strip()
    if text not in {"1", "2", "3", "4", "5"}:
        raise BonbenchError(f"{task}: -T level={level!r} is not a MATH level; use 1..5 (or 'Level 3')")
    return int(text)


def parse_subject(subject: str | None, task: str) -> str | None:
    """A MATH subject's display name from its folder name (``number_theory``) or display name (``Number Theory``)."""
    if subject is None or str(subject).strip() == "":
        return None
    key = str(subject).strip().lower().replace("&", "and").replace("-", "_").replace(" ", "_")
    if key in SUBJECTS:
        return SUBJECTS[key]
    raise BonbenchError(f"{task}: unknown -T subject={subject!r}; choose from {', '.join(SUBJECTS)}")


def check_fewshot(fewshot: int) -> int:
    """``fewshot`` as an int within the exemplars there are, else a one-line error."""
    if not 0 <= int(fewshot) <= len(MATH_FEWSHOT):
        raise BonbenchError(f"fewshot must be between 0 and {len(MATH_FEWSHOT)}, got {fewshot}")
    return int(fewshot)


def make_render(fewshot: int = 4) -> Callable[[Problem, PromptStyle], Prompt]:
    """The renderer with ``fewshot`` exemplars (base style); chat style ignores ``fewshot``."""

    def render(problem: Problem, style: PromptStyle) -> Prompt:
        return math_prompt(problem, style, fewshot=fewshot)

    return render


def math_style_task(name: str, version: int, problems: tuple[Problem, ...], fingerprint: str, fewshot: int,
                    description: str, max_tokens: int = 512, extra_metrics: Callable[..., Any] | None = None,
                    breakdowns: Mapping[str, Callable[[Problem], str | None]] | None = None) -> Task:
    """A Task with MATH's prompts, grader and default metrics, of the ``math`` family.

    ``breakdowns`` and ``extra_metrics`` are the task's per-group and task-specific metrics (``Task``)."""
    return Task(
        name=name,
        version=version,
        problems=problems,
        render=make_render(fewshot),
        grader=MathGrader(),
        prompt_id=PROMPT_ID,
        default_metrics=DEFAULT_METRICS,
        max_tokens=max_tokens,
        # level/subject/snapshot filters only select problems; a problem's prompt depends on fewshot alone
        hash_args={"fewshot": fewshot},
        fingerprint=fingerprint,
        breakdowns=dict(breakdowns or {}),
        extra_metrics=extra_metrics,
        description=description,
        family=FAMILY,
    )
