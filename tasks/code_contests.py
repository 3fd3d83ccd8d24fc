"""The ``code_contests`` task: CodeContests (Li et al. 2022), competitive programming in Python 3.

Hub ``deepmind/code_contests`` rows (name, description, public_tests / private_tests /
generated_tests as ``{"input": [...], "output": [...]}``, time_limit ``{seconds, nanos}``,
memory_limit_bytes, difficulty, source) become problems with id "code_contests/<name>", input = the
statement, target = the tests as JSON, meta = time limit, memory limit, float tolerance flag.
``-T tests=`` picks the tests: ``public``, ``private`` (public + private) or ``all`` (+ generated,
the default, as in the paper's evaluation). ``-T split=`` test (default) / valid / train.

Offline, ``code_contests/sandboxfusion_code_contests_sample.jsonl`` under the data dir is read
instead: 20 real problems in SandboxFusion's schema (content, labels JSON, test JSON list of
``{"input": {"stdin"}, "output": {"stdout"}}`` with all test kinds merged, no limits), so there
only ``tests=all`` exists and the default time limit applies.

Grading: one sandboxed execution per test, stdin in, stdout compared judge-style (trailing
whitespace and blank lines ignored; floats within 1e-6 when the statement speaks of an absolute or
relative error, or ``-T float_tol=on``); the first failing test stops the sample. The CPU limit is
the problem's time limit times ``-T time_scale`` (Python is slower than the C++ the limits were set
for), the wall limit twice that plus one second. Problems that accept several correct outputs
(special judges) are only gradable when the model prints the reference output.

The prompt, test jobs and limits are the stdin problem style (``bonbench_tasks.common``),
shared with ``taco``. This module does not execute anything itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bonbench.api.task import Task, register_task
from bonbench.core.data import file_fingerprint, load_hub, local_file, read_jsonl, resolve_data_dir
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Problem
from bonbench.plugins.graders.code import CodeGrader
from bonbench.plugins.graders.code_cases import default_cache_dir
from bonbench_tasks.common import STDIN_PROMPT_ID, build_stdin_jobs, float_tolerance, limits, render_stdin

TASK_NAME = "code_contests"
VERSION = 1
HUB_ID = "deepmind/code_contests"
LOCAL_FILE = "code_contests/sandboxfusion_code_contests_sample.jsonl"
TEST_SETS = {"public": ("public_tests",), "private": ("public_tests", "private_tests"),
             "all": ("public_tests", "private_tests", "generated_tests")}
__all__ = ["code_contests_task"]


def _from_hub(row: dict[str, Any], tests: str, float_tol: str, time_scale: float) -> Problem:
    cases = []
    for key in TEST_SETS[tests]:
        block = row.get(key) or {"input": [], "output": []}
        cases += [{"input": i, "output": o} for i, o in zip(block["input"], block["output"], strict=False)]
    tl = row.get("time_limit") or {}
    seconds = (tl.get("seconds") or 0) + (tl.get("nanos") or 0) / 1e9
    mem = (row.get("memory_limit_bytes") or 0) / (1 << 20)
    meta = {"name": row["name"], "difficulty": row.get("difficulty"), "source": row.get("source"),
            "float_tol": float_tolerance(row["description"], float_tol), "n_tests": len(cases)}
    meta.update(limits(seconds or None, mem or None, time_scale))
    return Problem(id=f"{TASK_NAME}/{row['name']}", input=row["description"], target=json.dumps(cases), meta=meta)


def _from_sample(row: dict[str, Any], name: str, float_tol: str) -> Problem:
    labels = json.loads(row["labels"])
    cases = [{"input": t["input"]["stdin"], "output": t["output"]["stdout"]} for t in json.loads(row["test"])]
    meta = {"name": labels.get("name"), "difficulty": labels.get("difficulty"), "source": labels.get("source"),
            "float_tol": float_tolerance(row["content"], float_tol), "n_tests": len(cases)}
    return Problem(id=f"{TASK_NAME}/{name}", input=row["content"], target=json.dumps(cases), meta=meta)


@register_task(TASK_NAME, family="code")
def code_contests_task(data_dir: Path | None = None, split: str = "test", tests: str = "all", float_tol: str = "auto",
                       time_scale: float = 1.0, exec_cache: str | None = None, workers: int = 0) -> Task:
    """CodeContests; see the module docstring for the arguments."""
    if tests not in TEST_SETS:
        raise BonbenchError(f"code_contests: -T tests= must be one of {', '.join(TEST_SETS)}, not {tests!r}")
    root = resolve_data_dir(data_dir)
    if root is None:
        rows, fingerprint = load_hub(HUB_ID, split)
        problems = tuple(_from_hub(r, tests, float_tol, time_scale) for r in rows)
    else:
        if tests != "all":
            raise BonbenchError("code_contests: the offline sample merges public, private and generated tests; "
                                "use -T tests=all, or load the hub dataset (no --data-dir) for other test sets")
        path = local_file(root, LOCAL_FILE, "CodeContests sample")
        rows = list(read_jsonl(path))
        names = [json.loads(r["labels"]).get("name") or str(r["id"]) for r in rows]
        # a name shared by two rows falls back to the row id so that problem ids stay unique
        names = [n if names.count(n) == 1 else str(r["id"]) for n, r in zip(names, rows, strict=True)]
        problems = tuple(_from_sample(r, n, float_tol) for r, n in zip(rows, names, strict=True))
        fingerprint = file_fingerprint(path)
    grader = CodeGrader(build_stdin_jobs, cache_dir=exec_cache or default_cache_dir(), workers=workers or None)
    return Task(name=TASK_NAME, family="code", version=VERSION, problems=problems, render=render_stdin, grader=grader,
                grade_args={"tests": tests, "float_tol": float_tol, "time_scale": time_scale},
                prompt_id=STDIN_PROMPT_ID, default_metrics=("pass@1",), max_tokens=2048, fingerprint=fingerprint,
                description=f"CodeContests ({'hub ' + split if root is None else 'offline sample'}, tests={tests}): "
                            f"{len(problems)} problems, stdin/stdout judged")
