"""Tests of the ``math`` / ``math500`` tasks on the real offline mirror: loading, filters, errors,
prompt rendering (both styles), and grading a few real solutions through the task's grader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import bonbench_tasks.math as mt
from bonbench.api.task import get_task
from bonbench.core.errors import BonbenchError
from bonbench.core.prompts import chat_messages, fewshot_text
from bonbench.core.records import Sample
from bonbench.plugins.graders.math_equiv import is_equiv
from bonbench.plugins.graders.math_extract import extract_answer
from bonbench_tasks.common import MATH_FEWSHOT, MATH_STOP


def test_loads_full_test_split(data_dir: Path) -> None:
    task = mt.math_task(data_dir=str(data_dir))
    assert task.name == "math" and task.version == 1 and len(task.problems) == 5000
    first = task.problems[0]
    assert first.id == "test/algebra/1.json" and first.target == "2"
    assert first.meta == {"level": 3, "subject": "Algebra"}
    assert len({p.id for p in task.problems}) == 5000
    assert task.fingerprint.startswith("sha256:")
    assert task.hash_args == {"fewshot": 4} and task.max_tokens == 512
    assert "pass@1" in task.default_metrics and task.prompt_id


def test_loads_math500_both_ways(data_dir: Path) -> None:
    a = get_task("math500", data_dir=str(data_dir))
    b = get_task("math", data_dir=str(data_dir), subset="math500")
    assert len(a.problems) == 500 and [p.id for p in a.problems] == [p.id for p in b.problems]
    full = {p.id: p for p in mt.math_task(data_dir=str(data_dir)).problems}
    # MATH-500 ids are MATH test ids and the gold answers agree
    assert all(is_equiv(p.target, full[p.id].target) for p in a.problems)
    assert {type(p.meta["level"]) for p in a.problems} == {int}


def test_level_and_subject_filters(data_dir: Path) -> None:
    lvl = get_task("math", data_dir=str(data_dir), level="5")  # -T strings are coerced
    assert len(lvl.problems) == 1324 and {p.meta["level"] for p in lvl.problems} == {5}
    nt = mt.math_task(data_dir=str(data_dir), subject="number theory")
    assert len(nt.problems) == 540 and {p.meta["subject"] for p in nt.problems} == {"Number Theory"}
    same = mt.math_task(data_dir=str(data_dir), subject="Counting_and_Probability")
    assert {p.meta["subject"] for p in same.problems} == {"Counting & Probability"}
    both = mt.math_task(data_dir=str(data_dir), subject="geometry", level=1)
    assert both.problems and all(p.meta == {"level": 1, "subject": "Geometry"} for p in both.problems)
    # selection-only arguments stay out of the run hash
    assert lvl.hash_args == nt.hash_args == {"fewshot": 4}
    m500 = mt.math500_task(data_dir=str(data_dir), subject="Precalculus")
    assert m500.problems and all(p.meta["subject"] == "Precalculus" for p in m500.problems)


def test_bad_arguments_name_the_fix(data_dir: Path) -> None:
    with pytest.raises(BonbenchError, match="unknown subject 'calculus'.*Number Theory"):
        mt.math_task(data_dir=str(data_dir), subject="calculus")
    with pytest.raises(BonbenchError, match="level must be 1-5"):
        mt.math_task(data_dir=str(data_dir), level=7)
    with pytest.raises(BonbenchError, match="unknown subset"):
        mt.math_task(data_dir=str(data_dir), subset="tiny")
    with pytest.raises(BonbenchError, match="fewshot"):
        mt.math_task(data_dir=str(data_dir), fewshot=9)
    with pytest.raises(BonbenchError, match="only a test split"):
        mt.math_task(data_dir=str(data_dir), subset="math500", split="train")


def test_missing_data_dir_and_file(tmp_path: Path) -> None:
    with pytest.raises(BonbenchError, match="does not exist"):
        mt.math_task(data_dir=str(tmp_path / "absent"))
    with pytest.raises(BonbenchError, match="math/test.jsonl"):
        mt.math_task(data_dir=str(tmp_path))


def test_train_split(data_dir: Path) -> None:
    task = mt.math_task(data_dir=str(data_dir), split="train", level=1, subject="algebra")
    assert task.problems and all(p.id.startswith("train/algebra/") for p in task.problems)


def test_hub_rows_without_unique_id_get_stable_ids() -> None:
    row = {"problem": "What is $1+1$?", "level": "Level 1", "type": "Counting & Probability",
           "solution": "It is $\\boxed{2}$."}
    p = mt.to_problem(row, "test")
    assert p.id == mt.to_problem(dict(row), "test").id
    assert p.id.startswith("test/counting_and_probability/h") and p.id.endswith(".json")
    assert p.target == "2" and p.meta == {"level": 1, "subject": "Counting & Probability"}
    assert mt.to_problem({**row, "level": "Level ?"}).meta["level"] is None


def test_hub_rows_take_the_gold_the_answer_field_has(data_dir: Path) -> None:
    # hub MATH rows have no answer field: the gold is read from the solution by the dataset's rule
    # (its last box), not by the extractor, which reads a solution ending in several boxes as a list
    rows = [json.loads(line) for line in (data_dir / "math" / "test.jsonl").read_text().splitlines()]
    hub = [mt.to_problem({k: v for k, v in r.items() if k != "answer"}).target for r in rows]
    assert [t for t, r in zip(hub, rows, strict=True) if not is_equiv(t, r["answer"])] == []
    row = {"problem": "q", "type": "Algebra", "level": 2, "solution": "So $\\boxed{x+11}$ or $\\boxed{11+x}$."}
    assert mt.to_problem(row).target == "11+x" and extract_answer(row["solution"]) == "x+11, 11+x"


def test_render_base_and_chat(data_dir: Path) -> None:
    task = mt.math500_task(data_dir=str(data_dir))
    problem = task.problems[0]
    base = task.render(problem, "base")
    assert base.problem_id == problem.id and base.messages is None
    assert base.text.count("Problem:\n") == 5 and base.text.endswith(problem.input.strip() + "\n\nSolution:\n")
    assert base.stop == MATH_STOP and "\n\nProblem:" in base.stop
    chat = task.render(problem, "chat")
    assert chat.text is None and len(chat.messages) == 1 and chat.messages[0]["role"] == "user"
    assert "\\boxed{}" in chat.messages[0]["content"] and problem.input.strip() in chat.messages[0]["content"]
    zero = mt.math500_task(data_dir=str(data_dir), fewshot=0)
    assert zero.render(problem, "base").text == f"Problem:\n{problem.input.strip()}\n\nSolution:\n"
    assert zero.hash_args == {"fewshot": 0}


def test_fewshot_exemplars_are_self_consistent() -> None:
    # every exemplar's boxed answer must be what the grader extracts from it
    expected = ["9", "\\frac{3}{8}", "5\\sqrt{2}", "5"]
    assert [extract_answer(sol) for _, sol in MATH_FEWSHOT] == expected
    assert is_equiv(str(3 / 8), expected[1]) and is_equiv("\\sqrt{50}", expected[2])


def test_prompt_helpers() -> None:
    text = fewshot_text([("Q1", "A1")], "Q2", instruction="Solve.")
    assert text == "Solve.\n\nProblem:\nQ1\n\nSolution:\nA1\n\nProblem:\nQ2\n\nSolution:\n"
    assert chat_messages("sys", "hi") == ({"role": "system", "content": "sys"}, {"role": "user", "content": "hi"})
    assert chat_messages(None, "hi") == ({"role": "user", "content": "hi"},)


def test_grader_on_real_solutions(data_dir: Path) -> None:
    task = mt.math500_task(data_dir=str(data_dir))
    problems = {p.id: p for p in task.problems[:6]}

    rows = {r["unique_id"]: r for r in map(json.loads, (data_dir / "math500" / "test.jsonl").read_text().splitlines())}
    samples = []
    for pid in problems:
        samples.append(Sample(pid, 0, rows[pid]["solution"], 100, "stop"))
        samples.append(Sample(pid, 1, "Thus the answer is $\\boxed{-12345}$.", 10, "stop"))
        samples.append(Sample(pid, 2, rows[pid]["solution"][:40], 10, "length"))
    grades = task.grader.grade(problems, samples)
    assert [g.correct for g in grades[0::3]] == [True] * 6
    assert [g.correct for g in grades[1::3]] == [False] * 6
    assert all(g.answer == "-12345" for g in grades[1::3])
    assert all(g.correct is False for g in grades[2::3])


def test_registered_under_both_names() -> None:
    from bonbench.api.task import task_names

    assert {"math", "math500"} <= set(task_names())


def test_grader_conventions_are_task_arguments(data_dir: Path) -> None:
    from bonbench.plugins.graders.math_conventions import MathConventions

    default = mt.math500_task(data_dir=str(data_dir), level=1)
    assert default.grade_args == {} and default.grader.conventions == MathConventions()
    # -T strings as the CLI gives them: coerced by annotation (decimal_comma: bool), case-insensitive choices
    other = get_task("math500", data_dir=str(data_dir), level="1", percent="Fraction", decimal_comma="true",
                     gold_boxes="any")
    assert other.grader.conventions == MathConventions(percent="fraction", decimal_comma=True, gold_boxes="any")
    assert other.grade_args == {"percent": "fraction", "decimal_comma": True, "gold_boxes": "any"}
    assert other.hash_args == default.hash_args == {"fewshot": 4}  # verdicts change, prompts do not
    with pytest.raises(BonbenchError, match="math500: -T percent='ratio': use one of number, fraction"):
        mt.math500_task(data_dir=str(data_dir), percent="ratio")
    with pytest.raises(BonbenchError, match="math: -T gold_boxes='some': use one of all, any"):
        mt.math_task(data_dir=str(data_dir), gold_boxes="some")
    with pytest.raises(BonbenchError, match="decimal_comma takes bool"):
        get_task("math", data_dir=str(data_dir), decimal_comma="maybe")


def test_a_run_regraded_under_other_conventions_keeps_both(data_dir: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """`run -T percent=fraction` records the grading settings; `score RUN -T gold_boxes=any` regrades
    the same samples under a new grading id; the defaults reuse their own grades."""
    from bonbench.apps.cli import main

    rows = [json.loads(line) for line in (data_dir / "math500" / "test.jsonl").read_text().splitlines()]
    by_id = {r["unique_id"]: r for r in rows}
    ids = [p.id for p in mt.math500_task(data_dir=str(data_dir)).problems[:2]]
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps({"problem_id": pid, "sample_idx": i, "completion": text}) + "\n"
                               for pid in ids
                               for i, text in enumerate([f"So $\\boxed{{{by_id[pid]['answer']}}}$.", "So $\\boxed{0}$."])))
    common = ["--task", "math500", "--backend", "scripted", "--samples", str(samples), "--limit", "2", "--n", "2",
              "--data-dir", str(data_dir), "--out", str(tmp_path / "results")]

    def grading(run_dir: Path) -> dict:
        return json.loads((run_dir / "metrics.json").read_text())["grading"]

    def grade_rows(run_dir: Path) -> list[dict]:
        return [json.loads(line) for line in (run_dir / "grades" / "math.jsonl").read_text().splitlines()]

    assert main(["run", *common, "-T", "percent=fraction"]) == 0
    run_dir = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert grading(run_dir)["grade_args"] == {"percent": "fraction"}
    first = grade_rows(run_dir)
    assert len(first) == 4 and [r["correct"] for r in first].count(True) == 2

    assert main(["score", str(run_dir), "--data-dir", str(data_dir), "-T", "gold_boxes=any"]) == 0
    assert Path(capsys.readouterr().out.strip().splitlines()[-1]) == run_dir  # same samples, same run
    assert grading(run_dir)["grade_args"] == {"percent": "fraction", "gold_boxes": "any"}  # merged over the saved args
    second = grade_rows(run_dir)
    assert len(second) == 8 and len({r["grading_id"] for r in second}) == 2

    assert main(["run", *common]) == 0  # the defaults: a third grading id, recorded as no settings
    assert Path(capsys.readouterr().out.strip().splitlines()[-1]) == run_dir
    assert grading(run_dir)["grade_args"] == {} and grading(run_dir)["grading_id"] == ""
    assert len(grade_rows(run_dir)) == 12
    assert main(["run", *common, "-T", "percent=fraction"]) == 0  # back again: its stored grades are reused
    capsys.readouterr()
    assert len(grade_rows(run_dir)) == 12
