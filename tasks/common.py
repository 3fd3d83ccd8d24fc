"""What several tasks share: the MATH prompt family and the stdin/stdout program style.

The one module a task may import besides the layers below (tests/layer_rules.py); it imports no
task, so no task depends on another.

**MATH family** (``math``, ``math500``, ``functional_math``, ``mathodyssey``): Hendrycks MATH's
subject table and level / subject readers, the prompt (``math_prompt``, ``math_render``) and
``math_style_task``, which assembles a ``Task`` with those prompts, the MATH grader (under the
conventions ``math_conventions`` reads from the task arguments) and the family's default metrics,
so that every member's prompts and grading are exactly MATH's (same
``prompt_id``: runs are comparable, and a verifier trained on one member scores the others).
Base models get Minerva-style plain text::

    Problem:
    <problem>

    Solution:
    <worked solution> The answer is $\\boxed{<answer>}$.

repeated for each exemplar, then the target problem and an open "Solution:". A base model that has
answered tends to start a new "Problem:" block, so ``MATH_STOP`` cuts there. Chat models get one
user message asking for step-by-step reasoning and the final answer in ``\\boxed{}``.

**stdin/stdout programs** (``code_contests``, ``taco``): the prompt (``render_stdin``: base models
continue an open ```python fence, chat models are asked for one fenced program; TACO's call-based
problems name their function), the program a completion stands for (``solution_code``), one
sandboxed execution per test (``build_stdin_jobs``), the judge-style float tolerance
(``float_tolerance``) and the CPU / wall / memory limits derived from a problem's time and memory
limits (``limits``). A problem carries its tests as JSON in ``target`` and its limits in ``meta``.

This module loads no data and knows no dataset's schema (the tasks do), and grades or executes
nothing itself (``MathGrader`` and ``CodeGrader`` do).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from bonbench.api.task import PromptStyle, Task
from bonbench.core.errors import BonbenchError
from bonbench.core.prompts import chat_messages, fewshot_text
from bonbench.core.records import Problem, Prompt
from bonbench.plugins.graders.code_cases import ExecCase
from bonbench.plugins.graders.code_text import defines, extract_code
from bonbench.plugins.graders.math import MathGrader
from bonbench.plugins.graders.math_conventions import DEFAULT_CONVENTIONS, MathConventions

# --------------------------------------------------------------------------- the MATH family

MATH_FAMILY = "math"
MATH_PROMPT_ID = "math-prompt-v1"
MATH_METRICS = ("pass@1", "maj@4", "pass@4")
# subject folder (unique_id / hub config name) -> display name (the "type" field)
MATH_SUBJECTS: dict[str, str] = {
    "algebra": "Algebra",
    "counting_and_probability": "Counting & Probability",
    "geometry": "Geometry",
    "intermediate_algebra": "Intermediate Algebra",
    "number_theory": "Number Theory",
    "prealgebra": "Prealgebra",
    "precalculus": "Precalculus",
}

# Our own short exemplars (not copied from Minerva): each shows the format the grader extracts,
# and together they show an integer, a fraction and a radical as final answers.
MATH_FEWSHOT: tuple[tuple[str, str], ...] = (
    (
        "Solve for $x$: $2x - 7 = 11$.",
        "Adding $7$ to both sides gives $2x = 18$, and dividing by $2$ gives $x = 9$. "
        "The answer is $\\boxed{9}$.",
    ),
    (
        "A bag holds $3$ red marbles and $5$ blue marbles. One marble is drawn at random. "
        "What is the probability that it is red? Express your answer as a common fraction.",
        "There are $3 + 5 = 8$ marbles and $3$ of them are red, so the probability is $\\frac{3}{8}$. "
        "The answer is $\\boxed{\\frac{3}{8}}$.",
    ),
    (
        "Simplify $\\sqrt{50}$.",
        "Since $50 = 25 \\cdot 2$ and $25$ is a perfect square, $\\sqrt{50} = \\sqrt{25}\\cdot\\sqrt{2} = 5\\sqrt{2}$. "
        "The answer is $\\boxed{5\\sqrt{2}}$.",
    ),
    (
        "What is the distance between the points $(1, 2)$ and $(4, 6)$?",
        "The distance is $\\sqrt{(4-1)^2 + (6-2)^2} = \\sqrt{9 + 16} = \\sqrt{25} = 5$. "
        "The answer is $\\boxed{5}$.",
    ),
)

# "\n\nProblem:" is where a base model starts inventing the next exemplar; the single-newline form
# catches models that skip the blank line.
MATH_STOP: tuple[str, ...] = ("\n\nProblem:", "\nProblem:")

MATH_CHAT_INSTRUCTION = (
    "Solve the following math problem step by step. "
    "Put your final answer within \\boxed{{}}.\n\n{problem}"
)


def level_int(raw: Any) -> int | None:
    """A MATH level (``3``, ``"Level 3"``) as an int; None when it has no digit ("Level ?")."""
    if isinstance(raw, int):
        return raw
    digits = "".join(ch for ch in str(raw) if ch.isdigit())
    return int(digits) if digits else None


def subject_folder(subject: str) -> str:
    """Subject folder for a display name or folder name."""
    for folder, display in MATH_SUBJECTS.items():
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
    if key in MATH_SUBJECTS:
        return MATH_SUBJECTS[key]
    raise BonbenchError(f"{task}: unknown -T subject={subject!r}; choose from {', '.join(MATH_SUBJECTS)}")


def math_conventions(task: str, percent: str = "number", decimal_comma: bool = False,
                     gold_boxes: str = "all") -> MathConventions:
    """The grader conventions from ``-T percent=... -T decimal_comma=... -T gold_boxes=...``; a bad
    value is a one-line error naming the choices."""
    try:
        return MathConventions(percent=str(percent).strip().lower(), decimal_comma=decimal_comma,
                               gold_boxes=str(gold_boxes).strip().lower())
    except ValueError as exc:
        raise BonbenchError(f"{task}: -T {exc}") from None


def check_fewshot(fewshot: int) -> int:
    """``fewshot`` as an int within the exemplars there are, else a one-line error."""
    if not 0 <= int(fewshot) <= len(MATH_FEWSHOT):
        raise BonbenchError(f"fewshot must be between 0 and {len(MATH_FEWSHOT)}, got {fewshot}")
    return int(fewshot)


def math_prompt(problem: Problem, style: str, fewshot: int = 4) -> Prompt:
    """The MATH prompt for ``problem``: few-shot text (style "base") or a chat message ("chat")."""
    if style == "base":
        if not 0 <= fewshot <= len(MATH_FEWSHOT):
            raise ValueError(f"fewshot must be between 0 and {len(MATH_FEWSHOT)}, got {fewshot}")
        text = fewshot_text(MATH_FEWSHOT[:fewshot], problem.input)
        return Prompt(problem_id=problem.id, text=text, stop=MATH_STOP)
    if style == "chat":
        return Prompt(problem_id=problem.id,
                      messages=chat_messages(None, MATH_CHAT_INSTRUCTION.format(problem=problem.input.strip())))
    raise ValueError(f"unknown prompt style {style!r}; use 'base' or 'chat'")


def math_render(fewshot: int = 4) -> Callable[[Problem, PromptStyle], Prompt]:
    """The renderer with ``fewshot`` exemplars (base style); chat style ignores ``fewshot``."""

    def render(problem: Problem, style: PromptStyle) -> Prompt:
        return math_prompt(problem, style, fewshot=fewshot)

    return render


# a MATH-style solution's steps are its paragraphs (the split of the process reward models' training data)
MATH_STEP_DELIMITER = "\n\n"


def math_style_task(name: str, version: int, problems: tuple[Problem, ...], fingerprint: str, fewshot: int,
                    description: str, max_tokens: int = 512, extra_metrics: Callable[..., Any] | None = None,
                    breakdowns: Mapping[str, Callable[[Problem], str | None]] | None = None,
                    conventions: MathConventions = DEFAULT_CONVENTIONS) -> Task:
    """A Task with MATH's prompts, grader and default metrics, of the ``math`` family.

    ``breakdowns`` and ``extra_metrics`` are the task's per-group and task-specific metrics (``Task``).
    ``conventions`` (``math_conventions``) change verdicts, not prompts: they key the stored grades
    (``grade_args``, empty for the defaults) and stay out of the run id."""
    return Task(
        name=name,
        version=version,
        problems=problems,
        render=math_render(fewshot),
        grader=MathGrader(conventions=conventions),
        prompt_id=MATH_PROMPT_ID,
        default_metrics=MATH_METRICS,
        max_tokens=max_tokens,
        # level/subject/snapshot filters only select problems; a problem's prompt depends on fewshot alone
        hash_args={"fewshot": fewshot},
        grade_args=conventions.grade_args(),
        fingerprint=fingerprint,
        breakdowns=dict(breakdowns or {}),
        extra_metrics=extra_metrics,
        description=description,
        family=MATH_FAMILY,
        step_delimiter=MATH_STEP_DELIMITER,
    )


# --------------------------------------------------------------------------- stdin/stdout programs

STDIN_PROMPT_ID = "stdin-program-v1"
MIN_MEMORY_MB = 512  # RLIMIT_AS counts address space, not resident memory: Python needs headroom
INSTRUCTION = ("Solve the following competitive programming problem in Python 3. The program reads from standard "
               "input and writes to standard output.\n\n{statement}\n")
CALL_INSTRUCTION = ("Solve the following programming problem in Python 3 by implementing the function `{fn}` "
                    "(keep the given signature).\n\n{statement}\n")
_TOLERANCE_HINT = re.compile(r"(absolute|relative)\s+(or\s+(absolute|relative)\s+)?error"
                             r"|error\s+(does not|doesn't|must not|should not)\s+exceed|within\s+10\^?\{?-", re.I)


def float_tolerance(statement: str, mode: str) -> bool:
    """Whether float tokens may differ by 1e-6: ``on``/``off``, or ``auto`` = the statement says so."""
    if mode not in ("auto", "on", "off"):
        raise BonbenchError(f"float_tol must be auto, on or off, not {mode!r}")
    return mode == "on" or (mode == "auto" and bool(_TOLERANCE_HINT.search(statement)))


def render_stdin(problem: Problem, style: PromptStyle) -> Prompt:
    """Prompt for stdin/stdout (and TACO call-based) problems: base models continue an open ```python
    fence (stop at its close); chat models are asked for one fenced program."""
    fn = problem.meta.get("fn_name")
    text = (CALL_INSTRUCTION.format(fn=fn, statement=problem.input.strip()) if fn
            else INSTRUCTION.format(statement=problem.input.strip()))
    starter = problem.meta.get("starter_code") or ""
    if style == "base":
        return Prompt(problem_id=problem.id, text=text + "\n```python\n" + starter, stop=("```",))
    ask = text + ("\nStart from this code:\n```python\n" + starter + "\n```\n" if starter.strip() else "")
    ask += "\nReply with the complete program in a single ```python code block."
    return Prompt(problem_id=problem.id, messages=({"role": "user", "content": ask},))


def solution_code(problem: Problem, completion: str) -> str:
    """The program ``completion`` stands for: its fenced code, else the text before a closing fence,
    with the prompt's starter code put back in front of a base model's continuation."""
    code = extract_code(completion, problem.meta.get("fn_name"))
    if code is not None:
        return code
    code = completion.split("```")[0]
    starter = problem.meta.get("starter_code") or ""
    fn = problem.meta.get("fn_name")
    if not starter or (fn and defines(code, fn)) or defines(code, "Solution"):
        return code
    # a base-model continuation of the open fence: the prompt's starter code is part of the program
    return starter + code


def build_stdin_jobs(problem: Problem, completion: str) -> list[ExecCase]:
    """One execution per test: the program as ``__main__`` with the test's stdin."""
    code = solution_code(problem, completion)
    tests = json.loads(problem.target)
    meta = problem.meta
    return [ExecCase(source=code, stdin=t["input"], expected_stdout=t["output"], timeout_s=meta.get("timeout_s"),
                     cpu_s=meta.get("cpu_s"), memory_mb=meta.get("memory_mb"), float_tol=bool(meta.get("float_tol")),
                     as_main=True)
            for t in tests]


def limits(time_limit_s: float | None, memory_mb: float | None, time_scale: float) -> dict[str, Any]:
    """The meta fields of a problem's limits: the judge's time limit times ``time_scale`` as CPU
    seconds (wall: twice that plus one), memory at least ``MIN_MEMORY_MB``."""
    out: dict[str, Any] = {}
    if time_limit_s:
        cpu = time_limit_s * time_scale
        out.update(time_limit_s=time_limit_s, cpu_s=float(math.ceil(cpu)), timeout_s=2 * cpu + 1.0)
    if memory_mb:
        out["memory_mb"] = max(int(memory_mb), MIN_MEMORY_MB)
    return out
