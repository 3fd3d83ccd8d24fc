"""Forged passes (issue 24 §2) through the real HumanEval grader: each forge fools the old
single-process harness (control, run here through the same sandbox) and is graded wrong by the
recording + trusted replay design. Also: the plain-data codec rejects look-alikes, and a failing
program that prints a ``bwrap:`` line is a failure, not a sandbox error."""

from __future__ import annotations

from pathlib import Path

import pytest

from bonbench.api.task import Task, get_task
from bonbench.core.records import Sample
from bonbench.plugins.graders.code import CodeGrader
from bonbench.plugins.graders.code_cases import ExecCase
from bonbench_tasks.humaneval import program_source

# Wrong solutions of HumanEval/0 (has_close_elements) and HumanEval/2 (truncate_number), each with a
# forge. Completions continue the prompt (base-model style).
FORGES = {
    "always-true __eq__": ("HumanEval/0", (
        "    class Yes:\n        def __eq__(self, other):\n            return True\n"
        "        def __bool__(self):\n            return True\n    return Yes()\n")),
    "frame walk to the secret": ("HumanEval/0", (
        "    import sys, os\n    f = sys._getframe()\n    while f is not None:\n"
        "        s = f.f_locals.get('secret')\n        if isinstance(s, bytes):\n"
        "            os.write(1, b'\\n' + s.strip() + b'\\n')\n            os._exit(0)\n"
        "        f = f.f_back\n    return None\n")),
    "sys.settrace replaces check": ("HumanEval/0", (
        "    return None\n\n\nimport sys\n\n\ndef _tr(frame, event, arg):\n    g = frame.f_globals\n"
        "    c = g.get('check')\n    if c is not None and getattr(c, '__name__', '') == 'check':\n"
        "        g['check'] = lambda candidate: None\n    return _tr\n\n\n"
        "sys._getframe().f_trace = _tr\nsys.settrace(_tr)\n")),
    "patched builtins.abs": ("HumanEval/2", (
        "    return 0.5\n\n\nimport builtins\nbuiltins.abs = lambda x: 0\n")),
}


@pytest.fixture(scope="module")
def humaneval(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Task:
    return get_task("humaneval", data_dir=str(data_dir), exec_cache=str(tmp_path_factory.mktemp("exec")))


def test_forges_fool_the_single_process_harness(humaneval: Task) -> None:
    """Control: run as one program (test asserts in the untrusted process), every forge passes, so
    the next test fails for the right reason if the design regresses."""
    problems = {p.id: p for p in humaneval.problems}
    grader = CodeGrader(lambda p, c: [], cache_dir=None, workers=2, timeout_s=5.0)
    for name, (pid, completion) in FORGES.items():
        verdict = grader.run_cases([ExecCase(source=program_source(problems[pid], completion))])[0]
        if name == "frame walk to the secret":
            # the old harness printed the secret line by line; this forge replays exactly that
            assert verdict.status in ("ok", "incomplete"), verdict
            continue
        assert verdict.passed, (name, verdict)


def test_forges_are_graded_wrong(humaneval: Task) -> None:
    problems = {p.id: p for p in humaneval.problems}
    samples = [Sample(pid, i, completion, 1, "stop") for i, (pid, completion) in enumerate(FORGES.values())]
    samples += [Sample("HumanEval/0", 10, problems["HumanEval/0"].meta["canonical_solution"], 1, "stop"),
                Sample("HumanEval/2", 11, problems["HumanEval/2"].meta["canonical_solution"], 1, "stop")]
    grades = humaneval.grader.grade(problems, samples)
    by_idx = {g.sample_idx: g for g in grades}
    for i, name in enumerate(FORGES):
        assert by_idx[i].correct is False, (name, by_idx[i])
    assert by_idx[10].correct is True and by_idx[11].correct is True
    assert "not plain data" in (by_idx[0].error or "")


def test_frame_walk_secret_alone_does_not_pass(humaneval: Task) -> None:
    """In the single-process harness the secret line was the pass signal; here it is only framing."""
    problems = {p.id: p for p in humaneval.problems}
    pid, completion = FORGES["frame walk to the secret"]
    grade = humaneval.grader.grade(problems, [Sample(pid, 0, completion, 1, "stop")])[0]
    assert grade.correct is False and grade.detail is not None and grade.detail["status"] == "incomplete"


def test_bwrap_line_on_stderr_is_a_failure(humaneval: Task) -> None:
    problems = {p.id: p for p in humaneval.problems}
    completion = "    import sys\n    sys.stderr.write('bwrap: Creating new namespace failed\\n')\n    sys.exit(1)\n"
    grade = humaneval.grader.grade(problems, [Sample("HumanEval/0", 0, completion, 1, "stop")])[0]
    assert grade.correct is False, grade
    at_top = "import sys\nsys.stderr.write('bwrap: Creating new namespace failed\\n')\nsys.exit(1)\n"
    grade = humaneval.grader.grade(problems, [Sample("HumanEval/0", 1, "    return True\n" + at_top, 1, "stop")])[0]
    assert grade.correct is False and grade.detail is not None and grade.detail["status"] != "sandbox_error", grade


def test_mbpp_forges_are_graded_wrong(data_dir: Path, tmp_path: Path) -> None:
    task = get_task("mbpp", data_dir=str(data_dir), split="test", exec_cache=str(tmp_path))
    p = next(q for q in task.problems if q.id == "mbpp/11")
    name = p.meta["entry_point"]
    eq = f"class Y:\n    def __eq__(self, o):\n        return True\n\ndef {name}(*a):\n    return Y()\n"
    trace = (f"def {name}(*a):\n    return None\nimport builtins\n_real = builtins.AssertionError\n"
             "import sys\ndef _t(f, e, a):\n    return None\nsys.settrace(_t)\n"
             "builtins.AssertionError = type('E', (BaseException,), {})\n")
    grades = task.grader.grade({p.id: p}, [Sample(p.id, 0, eq, 1, "stop"), Sample(p.id, 1, trace, 1, "stop"),
                                           Sample(p.id, 2, p.meta["code"], 1, "stop")])
    assert [g.correct for g in grades] == [False, False, True]


# Two candidates that know nothing but read the answers the test holds from the caller's code object:
# the constant that follows the input among check's constants, or the value compared right after the
# call. Both pass the single-process harness.
READ_ANSWERS = {
    "answers read from check's constants": (
        "    import sys\n"
        "    consts = [c for c in sys._getframe(1).f_code.co_consts if isinstance(c, float)]\n"
        "    return consts[consts.index(number) + 1] if number in consts[:-1] else -1.0\n"),
    "answers read from the caller's frame": (
        "    import sys, dis\n"
        "    f = sys._getframe(1)\n"
        "    ins = [i for i in dis.get_instructions(f.f_code) if i.offset > f.f_lasti]\n"
        "    consts = [i.argval for i in ins if i.opname == 'LOAD_CONST' and isinstance(i.argval, float)]\n"
        "    return consts[0] if consts else -1.0\n"),
}


def test_answer_reading_candidates_fool_the_single_process_harness(humaneval: Task) -> None:
    problem = next(p for p in humaneval.problems if p.id == "HumanEval/2")
    grader = CodeGrader(lambda p, c: [], cache_dir=None, workers=2, timeout_s=5.0)
    for name, completion in READ_ANSWERS.items():
        verdict = grader.run_cases([ExecCase(source=program_source(problem, completion))])[0]
        assert verdict.passed, (name, verdict)


def test_answer_reading_candidates_are_graded_wrong(humaneval: Task) -> None:
    """The recording process runs the test with its asserts reduced to the candidate's calls
    (bonbench.plugins.graders.blind): the expected values are not in its source or its code objects."""
    problems = {p.id: p for p in humaneval.problems}
    samples = [Sample("HumanEval/2", i, c, 1, "stop") for i, c in enumerate(READ_ANSWERS.values())]
    grades = humaneval.grader.grade(problems, samples)
    assert [g.correct for g in grades] == [False, False], grades


def test_every_humaneval_test_is_blinded_without_its_expected_values(humaneval: Task) -> None:
    from bonbench.plugins.graders.blind import blind_asserts
    from bonbench_tasks.humaneval import call_test

    for problem in humaneval.problems:
        test = call_test(problem)
        assert test.untrusted_tests is not None and "assert" not in test.untrusted_tests, problem.id
        assert blind_asserts(test.tests, ("candidate", problem.meta["entry_point"]))[1] == 1.0
    two = call_test(next(p for p in humaneval.problems if p.id == "HumanEval/2")).untrusted_tests
    assert "candidate(3.5)" in two and "0.5" not in two
