"""The stdin/stdout competitive-programming problem style, shared by the ``code_contests`` and ``taco`` tasks.

The prompt (``render_stdin``: base models continue an open ```python fence, chat models are asked
for one fenced program; TACO's call-based problems name their function), the program a completion
stands for (``solution_code``), one sandboxed execution per test (``build_stdin_jobs``), the
judge-style float tolerance (``float_tolerance``) and the CPU / wall / memory limits derived from a
problem's time and memory limits (``limits``). A problem carries its tests as JSON in ``target``
and its limits in ``meta``.

This module executes nothing (``CodeGrader`` does) and knows no dataset's schema (the tasks do).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from bonbench.api.task import PromptStyle
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Problem, Prompt
from bonbench.plugins.graders.code import ExecCase, defines, extract_code

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
    out: dict[str, Any] = {}
    if time_limit_s:
        cpu = time_limit_s * time_scale
        out.update(time_limit_s=time_limit_s, cpu_s=float(math.ceil(cpu)), timeout_s=2 * cpu + 1.0)
    if memory_mb:
        out["memory_mb"] = max(int(memory_mb), MIN_MEMORY_MB)
    return out
