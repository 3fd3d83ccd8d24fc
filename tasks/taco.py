"""The ``taco`` task: TACO (Li et al. 2023), algorithmic problems with stdin/stdout or call-based tests.

Rows have the hub ``BAAI/TACO`` schema: question, solutions (JSON list), starter_code,
input_output (JSON ``{"inputs", "outputs", "fn_name"?}``), difficulty, raw_tags, name, source, tags,
skill_types, url, time_limit ("1 second"), memory_limit ("256 megabytes"), ... Problems: id
"taco/<row index in the split>", input = question, target = input_output, meta = difficulty,
fn_name, starter code, limits. ``-T split=test|train``, ``-T difficulty=EASY|MEDIUM|MEDIUM_HARD|
HARD|VERY_HARD`` (comma list; default all). Source: ``taco/{split}.jsonl`` under the data dir, else
the hub (there is no public offline copy; the error says so).

Tests, as in TACO's own harness: without ``fn_name`` every input is stdin and every output the
expected stdout (judged as in ``code_contests``). With ``fn_name`` (Codewars/LeetCode style) each
test calls the function (``Solution().<fn_name>`` when the starter code has ``class Solution``) with
the JSON-decoded argument list; tuples in the result become lists, and the result passes if it
equals the expected value or, when that is a non-empty list, its first element (TACO wraps
single return values in a list). The call runs in the sandbox with its result recorded as plain
data; the comparison runs in a trusted process (``bonbench.plugins.graders.replay``), and the expected value
never enters the sandbox. Programs get TACO's usual standard-library imports prepended
(``typing.List`` for LeetCode signatures, ``math``, ``collections`` ...; numpy is not available).

This module does not execute anything itself.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from bonbench.api.task import Task, register_task
from bonbench.core.data import file_fingerprint, load_hub, read_jsonl, resolve_data_dir
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Problem
from bonbench.plugins.graders.code import CodeGrader
from bonbench.plugins.graders.code_cases import ExecCase, default_cache_dir
from bonbench.plugins.graders.replay import CallTest
from bonbench_tasks.common import STDIN_PROMPT_ID, build_stdin_jobs, float_tolerance, limits, render_stdin, solution_code

TASK_NAME = "taco"
VERSION = 1
HUB_ID = "BAAI/TACO"
DIFFICULTIES = ("EASY", "MEDIUM", "MEDIUM_HARD", "HARD", "VERY_HARD", "UNKNOWN_DIFFICULTY")
PRELUDE = ("import sys, math, heapq, bisect, itertools, collections, functools, string, re, random\n"
           "from typing import List, Tuple, Dict, Optional\n"
           "from collections import Counter, OrderedDict, deque, defaultdict\n"
           "from functools import lru_cache, reduce\n"
           "from itertools import accumulate, product, permutations, combinations\n"
           "from math import sqrt, ceil, floor, gcd, inf, log, log2\n")
# TACO's call tests. The recording run only makes the call (the expected value never enters it);
# the trusted run compares as TACO's harness does.
CALL_ARGS = '''
import json as _bb_json
_bb_in = _bb_json.loads({args!r})
if _bb_in and isinstance(_bb_in[0], dict):
    try:  # JSON stringified integer keys; TACO's harness undoes that the same way
        _bb_in = [{{int(k): v for k, v in _bb_in[0].items()}}] + _bb_in[1:]
    except ValueError:
        pass
'''
CALL_RUN = "_bb_target(*_bb_in)\n"
CALL_CHECK = '''

def _bb_lists(x):
    if isinstance(x, (list, tuple)):
        return [_bb_lists(v) for v in x]
    return x


_bb_want = _bb_json.loads({want!r})
_bb_got = _bb_lists(_bb_target(*_bb_in))
assert _bb_got == _bb_want or (isinstance(_bb_want, list) and len(_bb_want) > 0 and _bb_got == _bb_lists(_bb_want[0])), "wrong answer"
'''  # noqa: E501  (the check's text is part of every cached TACO result's key: wrapping it re-runs them all)


def _number(text: Any) -> float | None:
    m = re.search(r"\d+(?:\.\d+)?", str(text or ""))
    return float(m.group()) if m else None


def to_problem(index: int, row: dict[str, Any], float_tol: str, time_scale: float) -> Problem:
    io = json.loads(row["input_output"]) if row.get("input_output") else {"inputs": [], "outputs": []}
    meta: dict[str, Any] = {"difficulty": row.get("difficulty"), "name": row.get("name"), "source": row.get("source"),
                            "fn_name": io.get("fn_name"), "starter_code": row.get("starter_code") or "",
                            "float_tol": float_tolerance(row["question"], float_tol), "n_tests": len(io.get("inputs", []))}
    meta.update(limits(_number(row.get("time_limit")), _number(row.get("memory_limit")), time_scale))
    if io.get("fn_name"):
        target = json.dumps({"fn_name": io["fn_name"], "inputs": io["inputs"], "outputs": io["outputs"]})
    else:
        target = json.dumps([{"input": i, "output": o} for i, o in zip(io["inputs"], io["outputs"], strict=False)])
    return Problem(id=f"{TASK_NAME}/{index}", input=row["question"], target=target, meta=meta)


def build_jobs(problem: Problem, completion: str) -> list[ExecCase]:
    """stdin/stdout problems: one execution per test; call-based: one call + comparison per test."""
    meta = problem.meta
    if not meta.get("fn_name"):
        return [replace(c, source=PRELUDE + c.source) for c in build_stdin_jobs(problem, completion)]
    code = PRELUDE + solution_code(problem, completion)
    fn = meta["fn_name"]
    target = f"Solution().{fn}" if "class Solution" in meta.get("starter_code", "") else fn
    tests = json.loads(problem.target)
    cases = []
    for i, (args, want) in enumerate(zip(tests["inputs"], tests["outputs"], strict=False)):
        setup = CALL_ARGS.format(args=json.dumps(args))
        test = CallTest(names=("_bb_target",), tests=setup + CALL_CHECK.format(want=json.dumps(want)),
                        untrusted_tests=setup + CALL_RUN)
        cases.append(ExecCase(source=code + f"\n_bb_target = {target}\n", calls=test, timeout_s=meta.get("timeout_s"),
                              cpu_s=meta.get("cpu_s"), memory_mb=meta.get("memory_mb"), label=f"call {i}"))
    return cases


def _rows(root: Path | None, split: str) -> tuple[list[dict[str, Any]], str]:
    if root is None:
        return load_hub(HUB_ID, split)
    path = root / "taco" / f"{split}.jsonl"
    if not path.is_file():
        raise BonbenchError(f"TACO: {str(path)!r} not found; no offline TACO copy is shipped. Export the hub split "
                            f"({HUB_ID}, {split}) as JSON lines to taco/{split}.jsonl under --data-dir, "
                            "or drop --data-dir to use the hub")
    return list(read_jsonl(path)), file_fingerprint(path)


@register_task(TASK_NAME, family="code")
def taco_task(data_dir: Path | None = None, split: str = "test", difficulty: str = "ALL", float_tol: str = "auto",
              time_scale: float = 1.0, exec_cache: str | None = None, workers: int = 0) -> Task:
    """TACO; see the module docstring for the arguments."""
    if split not in ("test", "train"):
        raise BonbenchError(f"taco: -T split= must be test or train, not {split!r}")
    wanted = {d.strip().upper() for d in difficulty.split(",") if d.strip()}
    if wanted - set(DIFFICULTIES) - {"ALL"}:
        raise BonbenchError(f"taco: unknown difficulty {sorted(wanted - set(DIFFICULTIES))}; "
                            f"use {', '.join(DIFFICULTIES)} or ALL")
    rows, fingerprint = _rows(resolve_data_dir(data_dir), split)
    problems = tuple(to_problem(i, r, float_tol, time_scale) for i, r in enumerate(rows)
                     if "ALL" in wanted or str(r.get("difficulty")).upper() in wanted)
    grader = CodeGrader(build_jobs, cache_dir=exec_cache or default_cache_dir(), workers=workers or None)
    return Task(name=TASK_NAME, family="code", version=VERSION, problems=problems, render=render_stdin, grader=grader,
                grade_args={"float_tol": float_tol, "time_scale": time_scale},
                prompt_id=STDIN_PROMPT_ID, default_metrics=("pass@1",), max_tokens=2048, fingerprint=fingerprint,
                description=f"TACO ({split}, difficulty {difficulty}): {len(problems)} problems")
