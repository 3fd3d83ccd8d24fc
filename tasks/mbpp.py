"""The ``mbpp`` task: MBPP (Austin et al. 2021), short Python functions checked by three asserts.

Variants (``-T variant=``): ``full`` (974 problems, fields text/code/test_list/test_setup_code/
challenge_test_list) and ``sanitized`` (427, fields prompt/code/test_list/test_imports). Splits
(``-T split=``) are the task-id ranges of the original release: prompt 1-10, test 11-510,
validation 511-600, train 601-974 (default: test). Source: ``mbpp/mbpp.jsonl`` or
``mbpp/sanitized-mbpp.json`` under the data dir, else the hub ``google-research-datasets/mbpp``.

Problems: id "mbpp/<task_id>"; input = the task text; target = the test program (setup code or
test imports, then the asserts; ``-T challenge=true`` adds the full variant's challenge tests);
meta = entry point (the reference function the tests call), tests, reference code.

Prompts: base models get the standard 3-shot prompt (prompt-split tasks 2, 3, 4 of the same
variant) ending in ``[BEGIN]`` and stop at ``[DONE]``; chat models get the same task text and tests
and are asked for a ```python block. Grading: code + setup + asserts run sandboxed with the entry
point's calls recorded as plain data; a trusted run of reference code + setup + asserts replays them
and its asserts decide (``bonbench.plugins.graders.replay``).

This module does not execute anything itself.
"""

from __future__ import annotations

import ast
import json
import warnings
from pathlib import Path
from typing import Any

from bonbench.api.task import PromptStyle, Task, register_task
from bonbench.core.data import file_fingerprint, load_hub, local_file, read_jsonl, resolve_data_dir
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Problem, Prompt
from bonbench.plugins.graders.code import CodeGrader
from bonbench.plugins.graders.code_cases import ExecCase, default_cache_dir
from bonbench.plugins.graders.code_text import extract_code
from bonbench.plugins.graders.replay import CallTest

TASK_NAME = "mbpp"
VERSION = 1
HUB_ID = "google-research-datasets/mbpp"
LOCAL = {"full": "mbpp/mbpp.jsonl", "sanitized": "mbpp/sanitized-mbpp.json"}
SPLITS = {"prompt": (1, 10), "test": (11, 510), "validation": (511, 600), "train": (601, 974)}
SHOT_IDS = (2, 3, 4)
STOP = ("[DONE]",)
TEMPLATE = "You are an expert Python programmer, and here is your task: {text} Your code should pass these tests:\n\n{tests}\n"


def _nl(s: str) -> str:
    return s.replace("\r\n", "\n")


def _load(root: Path | None, variant: str) -> tuple[list[dict[str, Any]], str]:
    if root is None:
        rows, fps = [], []
        for split in SPLITS:
            part, fp = load_hub(HUB_ID, split, variant)
            rows += part
            fps.append(fp)
        return rows, "|".join(fps)
    path = local_file(root, LOCAL[variant], f"MBPP ({variant})")
    rows = json.loads(path.read_text(encoding="utf-8")) if path.suffix == ".json" else list(read_jsonl(path))
    return rows, file_fingerprint(path)


def entry_point(code: str, tests: list[str]) -> str:
    """The reference function the tests call (first top-level def whose name appears in a test)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reference code has invalid escape sequences ("\d" in regexes)
        tree = ast.parse(code)
    names = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    for name in names:
        if any(f"{name}(" in t for t in tests):
            return name
    return names[-1] if names else ""


def called_functions(code: str, tests: str) -> tuple[str, ...]:
    """The reference's top-level functions that the tests call (classes such as task 601's ``Pair``
    only build arguments: their instances are not plain data, so they are not recorded)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = ast.parse(code)
        test_tree = ast.parse(tests)
    called = {n.func.id for n in ast.walk(test_tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return tuple(n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in called)


def to_problem(row: dict[str, Any], challenge: bool) -> Problem:
    tests = [_nl(t) for t in row["test_list"]]
    setup = _nl(row.get("test_setup_code") or "\n".join(row.get("test_imports") or []))
    extra = [_nl(t) for t in row.get("challenge_test_list") or []] if challenge else []
    code = _nl(row["code"])
    test_code = "\n".join(tests + extra) + "\n"
    target = (setup + "\n" if setup.strip() else "") + test_code  # what build_jobs appends to the code
    return Problem(id=f"mbpp/{row['task_id']}", input=_nl(row.get("text") or row.get("prompt") or ""), target=target,
                   meta={"task_id": int(row["task_id"]), "entry_point": entry_point(code, tests), "tests": tests,
                         "setup": setup, "test_code": test_code, "code": code})


def build_jobs(problem: Problem, completion: str) -> list[ExecCase]:
    """One recording run: the solution, the test setup, then every assert, with the entry point's
    calls recorded; a trusted run (reference code + setup + asserts) replays them and decides."""
    code = extract_code(completion, problem.meta["entry_point"])
    if code is None:
        code = completion.split("[DONE]")[0]
    setup = problem.meta["setup"]
    # the setup code comes after the solution: the only two full-variant setups (tasks 367, 927)
    # build trees from the Node class that the solution defines
    setup_code = "\n" + setup + "\n" if setup.strip() else "\n"
    tests = problem.meta["test_code"]
    names = called_functions(problem.meta["code"], tests) or (problem.meta["entry_point"],)
    test = CallTest(names=names, tests=tests, trusted=problem.meta["code"] + setup_code,
                    seed_random="random" in tests)
    return [ExecCase(source=code + setup_code, calls=test, label="asserts")]


def make_render(shots: list[Problem]) -> Any:
    head = "".join(TEMPLATE.format(text=p.input, tests="\n".join(p.meta["tests"])) + "[BEGIN]\n" + p.meta["code"] + "\n[DONE]\n"
                   for p in shots)

    def render(problem: Problem, style: PromptStyle) -> Prompt:
        task = TEMPLATE.format(text=problem.input, tests="\n".join(problem.meta["tests"]))
        if style == "base":
            return Prompt(problem_id=problem.id, text=head + task + "[BEGIN]\n", stop=STOP)
        ask = task + "\nWrite the Python code in a single ```python code block."
        return Prompt(problem_id=problem.id, messages=({"role": "user", "content": ask},))

    return render


@register_task(TASK_NAME, family="code")
def mbpp_task(data_dir: Path | None = None, variant: str = "full", split: str = "test", challenge: bool = False,
              exec_cache: str | None = None, workers: int = 0, timeout_s: float = 10.0) -> Task:
    """MBPP; see the module docstring for ``variant``, ``split`` and ``challenge``."""
    if variant not in LOCAL:
        raise BonbenchError(f"mbpp: unknown variant {variant!r}; use -T variant=full or -T variant=sanitized")
    if split not in SPLITS:
        raise BonbenchError(f"mbpp: unknown split {split!r}; use -T split= one of {', '.join(SPLITS)}")
    rows, fingerprint = _load(resolve_data_dir(data_dir), variant)
    everything = sorted((to_problem(r, challenge) for r in rows), key=lambda p: p.meta["task_id"])
    lo, hi = SPLITS[split]
    problems = tuple(p for p in everything if lo <= p.meta["task_id"] <= hi)
    shots = [p for p in everything if p.meta["task_id"] in SHOT_IDS]
    grader = CodeGrader(build_jobs, cache_dir=exec_cache or default_cache_dir(), workers=workers or None, timeout_s=timeout_s)
    return Task(name=TASK_NAME, family="code", version=VERSION, problems=problems, render=make_render(shots), grader=grader,
                grade_args={"timeout_s": timeout_s},
                prompt_id=f"mbpp-3shot-v1-{variant}", default_metrics=("pass@1",), max_tokens=512,
                hash_args={"variant": variant}, fingerprint=fingerprint,
                description=f"MBPP ({variant}, {split}): {len(problems)} Python functions graded by asserts")
