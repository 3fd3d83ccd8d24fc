"""bonbench.plugins.graders.replay through the real grader: the plain-data codec keeps Python's comparison
semantics (tuple vs list, exact floats, big ints, containers, exceptions), refuses look-alikes, and
the record/replay verdicts equal the single-process harness's on real MBPP references and wrong
answers (the verdicts the redesign must not change)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bonbench.api.task import get_task
from bonbench.core.records import Sample
from bonbench.plugins.graders.code import CodeGrader
from bonbench.plugins.graders.code_cases import ExecCase
from bonbench.plugins.graders.replay import CallTest


@pytest.fixture(scope="module")
def grader(tmp_path_factory: pytest.TempPathFactory) -> CodeGrader:
    return CodeGrader(lambda p, c: [], cache_dir=tmp_path_factory.mktemp("exec"), workers=2, timeout_s=10.0)


def passes(grader: CodeGrader, candidate: str, tests: str, trusted: str = "") -> bool:
    case = ExecCase(source=candidate, calls=CallTest(names=("f",), tests=tests, trusted=trusted))
    return grader.run_cases([case])[0].passed


CASES = [  # (candidate body of f, test, passes?) -- the verdict plain Python gives
    ("return (1, 2)", "assert f() == (1, 2)", True),
    ("return [1, 2]", "assert f() == (1, 2)", False),
    ("return 0.1 + 1e-9", "assert abs(f() - 0.1) < 1e-6", True),
    ("return 0.1 + 1e-9", "assert f() == 0.1", False),
    ("return float('nan')", "import math\nassert math.isnan(f())", True),
    ("return 2 ** 200 + 1", "assert f() == 2 ** 200 + 1", True),
    ("return {'a': {1, 2}, 3: frozenset([4])}", "assert f() == {'a': {1, 2}, 3: frozenset([4])}", True),
    ("return b'x' + bytes([200])", "assert f() == b'x\\xc8'", True),
    ("return 1 + 2j", "assert f() == complex(1, 2)", True),
    ("import collections\n    return collections.Counter('aab')", "assert f() == {'a': 2, 'b': 1}", True),
    ("return True", "assert f() == 1 and f() is True", True),
    ("return 1", "assert f() is True", False),
    ("raise ValueError('no')", "try:\n    f()\nexcept ValueError:\n    pass\nelse:\n    assert False", True),
    ("raise KeyError('no')", "try:\n    f()\nexcept ValueError:\n    pass", False),
    ("class I(int):\n        def __eq__(self, o):\n            return True\n    return I(3)", "assert f() == 5", False),
    ("return (x for x in [1])", "assert list(f()) == [1]", False),  # a generator is not plain data
]


@pytest.mark.parametrize("body,test,expected", CASES)
def test_codec_keeps_python_semantics(grader: CodeGrader, body: str, test: str, expected: bool) -> None:
    assert passes(grader, f"def f():\n    {body}\n", test) is expected


def test_trusted_run_checks_arguments_names_and_length() -> None:
    """Recordings handed straight to the trusted program: only the honest one passes."""
    from bonbench.plugins.graders.replay import RECORDINGS_FILE, parse_verdicts, recordings_file, trusted_program
    from bonbench_sandbox.execution import execute

    test = CallTest(names=("f",), tests="assert f(1) == 2\nassert f(2) == 3\n")
    good = [{"f": "f", "a": [[1], {"$d": []}], "r": 2}, {"f": "f", "a": [[2], {"$d": []}], "r": 3}]
    other_args = [{"f": "f", "a": [[5], {"$d": []}], "r": 2}, good[1]]
    other_name = [{"f": "g", "a": good[0]["a"], "r": 2}, good[1]]
    wrong_value = [good[0], {"f": "f", "a": good[1]["a"], "r": 4}]
    not_plain = [{"f": "f", "a": good[0]["a"], "u": "Yes"}, good[1]]
    recs = [good, other_args, other_name, good[:1], wrong_value, not_plain]
    res = execute(trusted_program(test, 5.0), files={RECORDINGS_FILE: recordings_file(recs)})
    verdicts = parse_verdicts(res.stdout, len(recs))
    assert verdicts is not None, res
    assert [v[0] for v in verdicts] == ["ok", "not_recorded", "not_recorded", "not_recorded", "wrong_answer",
                                        "runtime_error"]


def test_recursive_calls_are_not_recorded(grader: CodeGrader) -> None:
    tests = "assert f(1) == 2\nassert f(3) == 4\n"
    assert passes(grader, "def f(x):\n    return 2 if x <= 1 else f(x - 1) + 1\n", tests)


def test_trusted_helpers_come_from_the_trusted_code(grader: CodeGrader) -> None:
    """HumanEval/32-style tests call a helper; the candidate redefining it changes nothing."""
    trusted = "def poly(x):\n    return x * x - 4\n"
    tests = "r = f()\nassert abs(poly(r)) < 1e-9\n"
    assert passes(grader, "def f():\n    return 2.0\n", tests, trusted)
    assert not passes(grader, "def poly(x):\n    return 0\ndef f():\n    return 7.0\n", tests, trusted)


@pytest.mark.slow
def test_mbpp_verdicts_equal_the_single_process_harness(data_dir: Path, tmp_path: Path) -> None:
    task = get_task("mbpp", data_dir=str(data_dir), split="test", exec_cache=str(tmp_path / "a"))
    problems = [p for p in task.problems][:40]
    samples, old_cases = [], []
    for p in problems:
        name = p.meta["entry_point"]
        wrong = f"def {name}(*args, **kwargs):\n    return None\n"
        for i, code in enumerate((p.meta["code"], wrong)):
            samples.append(Sample(p.id, i, code, 1, "stop"))
            setup = p.meta["setup"]
            old_cases.append(code + "\n" + (setup + "\n" if setup.strip() else "") + p.meta["test_code"])
    new = [g.correct for g in task.grader.grade({p.id: p for p in problems}, samples)]
    old_grader = CodeGrader(lambda p, c: [], cache_dir=tmp_path / "b", workers=2)
    old = [v.passed for v in (old_grader.run_cases([ExecCase(source=src)])[0] for src in old_cases)]
    assert new == old
    assert sum(new) == len(problems)  # every reference passes, every wrong answer fails


def test_a_call_test_must_name_what_it_replays() -> None:
    with pytest.raises(ValueError):
        CallTest(names=(), tests="assert True")
    with pytest.raises(ValueError):
        CallTest(names=("Solution().f",), tests="assert True")
