"""bonbench.plugins.graders.code: sentinel harness against pass-forging tricks, output comparison, extraction,
caching and grade shape. Executions go through the real sandbox (bubblewrap)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bonbench.core.records import Problem, Sample
from bonbench.plugins.graders.code import CodeGrader
from bonbench.plugins.graders.code_cases import ExecCase, NoCode, assemble_program
from bonbench.plugins.graders.code_text import extract_code, outputs_match, truncate_at_stop
from bonbench_sandbox.execution import execute

TESTS = "assert add(1, 2) == 3\nassert add(2, 2) == 4\n"
CORRECT = "def add(a, b):\n    return a + b\n"


@pytest.fixture(scope="module")
def grader(tmp_path_factory: pytest.TempPathFactory) -> CodeGrader:
    return CodeGrader(lambda p, c: [ExecCase(source=c + "\n" + TESTS)], cache_dir=tmp_path_factory.mktemp("exec"), workers=2)


def verdict(grader: CodeGrader, source: str, **kw: object) -> tuple[bool, str]:
    v = grader.run_cases([ExecCase(source=source, **kw)])[0]
    return v.passed, v.status


def test_correct_passes_and_wrong_fails(grader: CodeGrader) -> None:
    assert verdict(grader, CORRECT + TESTS) == (True, "ok")
    assert verdict(grader, "def add(a, b):\n    return a - b\n" + TESTS) == (False, "runtime_error")


# Each trick runs *before* a failing assertion (or instead of the tests); none may pass.
FORGERIES = {
    "exit(0)": "exit(0)\n",
    "quit()": "quit()\n",
    "sys.exit()": "import sys\nsys.exit()\n",
    "sys.exit(0)": "import sys\nsys.exit(0)\n",
    "raise SystemExit": "raise SystemExit(0)\n",
    "os._exit(0)": "import os\nos._exit(0)\n",
    "atexit prints": "import atexit, os\natexit.register(lambda: print('PASSED ' * 10))\nos._exit(0)\n",
    "atexit os.write": "import atexit, os\natexit.register(lambda: os.write(1, b'\\nPASSED\\n'))\nraise SystemExit(0)\n",
    "patched print": "import builtins\nbuiltins.print = lambda *a, **k: None\nimport sys\nsys.exit(0)\n",
    "patched AssertionError": "import builtins\nbuiltins.AssertionError = type('E', (BaseException,), {})\n",
    "patched __import__": "import builtins, os\n_imp = builtins.__import__\n"
                          "builtins.__import__ = lambda *a, **k: _imp(*a, **k)\nos._exit(0)\n",
    "patched os.write": "import os\n_w = os.write\nos.write = lambda fd, b: _w(fd, b'x' * 33)\nos._exit(0)\n",
    "guessed sentinel": "print('\\n' + '0' * 32)\nprint('ok')\nimport os\nos._exit(0)\n",
    "old sentinel": "print('\\n0123456789abcdef0123456789abcdef\\n')\nimport os\nos._exit(0)\n",
    "closed stdout": "import sys\nsys.stdout.close()\n",
    "closed fd 1": "import os\nos.close(1)\n",
    "redirected fd 1": "import os\nfd = os.open('/dev/null', os.O_WRONLY)\nos.dup2(fd, 1)\n",
    "read own source": (
        "import os, glob\nfor p in glob.glob('/tmp/*') + glob.glob('/tmp/.*') + ['main.py', '/proc/self/fd/0']:\n"
        "    try:\n        print(open(p).read())\n    except Exception:\n        pass\nos._exit(0)\n"
    ),
    "read parent fds": (
        "import os\nfor pid in (os.listdir('/proc') if os.path.isdir('/proc') else []):\n    if pid.isdigit():\n"
        "        for fd in os.listdir(f'/proc/{pid}/fd') if os.access(f'/proc/{pid}/fd', os.R_OK) else []:\n"
        "            try:\n                print(open(f'/proc/{pid}/fd/{fd}', errors='replace').read())\n"
        "            except Exception:\n                pass\nos._exit(0)\n"
    ),
    "SystemExit inside the tests": "def add(a, b):\n    raise SystemExit(0)\n",
}


@pytest.mark.parametrize("trick", sorted(FORGERIES))
def test_forging_tricks_do_not_pass(grader: CodeGrader, trick: str) -> None:
    source = FORGERIES[trick] + "def add(a, b):\n    return 0\n" + TESTS if "inside" not in trick else FORGERIES[trick] + TESTS
    passed, status = verdict(grader, source)
    assert not passed, f"{trick} forged a pass ({status})"


@pytest.mark.parametrize("trick", ["read own source", "read parent fds"])
def test_secret_is_not_readable_inside(grader: CodeGrader, trick: str) -> None:
    """The key file is gone before user code runs: nothing the program can read holds the sentinel."""
    case = ExecCase(source=FORGERIES[trick].replace("os._exit(0)\n", ""))
    job, secret = grader.job_for(case)
    result = execute(job.program, stdin=job.stdin, files=job.files)
    assert result.stdout.count(secret) == 1 and result.stdout.endswith("\n" + secret + "\n")
    assert secret not in job.program


def test_trick_controls_pass_when_tests_run(grader: CodeGrader) -> None:
    """The tricks above fail because of the trick, not the harness: benign variants still pass."""
    assert verdict(grader, "import atexit\natexit.register(lambda: print('bye'))\n" + CORRECT + TESTS)[0]
    assert verdict(grader, "import builtins\nbuiltins.print = lambda *a, **k: None\n" + CORRECT + TESTS)[0]
    assert verdict(grader, "print('0' * 32)\n" + CORRECT + TESTS)[0]


def test_sentinel_is_deterministic_per_execution_and_secret(tmp_path: Path) -> None:
    a = CodeGrader(lambda p, c: [], cache_dir=tmp_path / "a")
    b = CodeGrader(lambda p, c: [], cache_dir=tmp_path / "b")
    case = ExecCase(source=CORRECT + TESTS)
    assert a.job_for(case)[1] == a.job_for(case)[1]
    assert a.job_for(case)[1] != a.job_for(ExecCase(source=CORRECT + TESTS + "\n"))[1]
    assert a.job_for(case)[1] != b.job_for(case)[1]  # different key files
    assert a.job_for(case)[1] not in assemble_program(case)


def test_stdin_program_compared_tolerantly(grader: CodeGrader) -> None:
    src = "n = int(input())\nprint(n * 2, '  ')\nprint()\n"
    assert verdict(grader, src, stdin="21\n", expected_stdout="42\n", as_main=True) == (True, "ok")
    assert verdict(grader, src, stdin="21\n", expected_stdout="43\n", as_main=True) == (False, "wrong_answer")
    thread = "import threading\ndef main():\n    print(int(input()) + 1)\nthreading.Thread(target=main).start()\n"
    assert verdict(grader, thread, stdin="1", expected_stdout="2", as_main=True)[0]


def test_main_guard_runs_only_for_stdin_programs(grader: CodeGrader) -> None:
    src = "if __name__ == '__main__':\n    raise ValueError('demo block ran')\n"
    assert verdict(grader, src)[0]
    assert not verdict(grader, src, as_main=True)[0]


def test_limits(grader: CodeGrader) -> None:
    assert verdict(grader, "while True:\n    pass\n", timeout_s=1.0) == (False, "timeout")
    passed, status = verdict(grader, "x = bytearray(2 << 30)\n", memory_mb=256)
    assert not passed and status in ("memory", "runtime_error")


def test_outputs_match_rules() -> None:
    assert outputs_match("1 2  \n3\n\n\n", "1 2\n3")
    assert outputs_match("1\r\n2\r\n", "1\n2\n")
    assert not outputs_match("1 2", "1  2")
    assert not outputs_match("1\n2", "2\n1")
    assert not outputs_match("0.3333333", "0.333333333", float_tol=False)
    assert outputs_match("0.3333333", "0.333333333", float_tol=True)
    assert outputs_match("1000000.5", "1000000.50001", float_tol=True)  # relative
    assert not outputs_match("0.34", "0.333333333", float_tol=True)
    assert not outputs_match("2", "3", float_tol=True)
    assert not outputs_match("100000001", "100000000", float_tol=True)  # integers stay exact
    assert not outputs_match("nan", "nan1", float_tol=True)
    assert not outputs_match("1 2", "1", float_tol=True)


def test_extract_code() -> None:
    chat = "Here:\n```python\nimport math\n```\nand\n```python\ndef f(x):\n    return x\n```\nDone."
    assert extract_code(chat, "f") == "def f(x):\n    return x\n"
    assert extract_code("```\nprint(1)\n```", None) == "print(1)\n"
    assert extract_code("```python\ndef f():\n    return 1", "f") == "def f():\n    return 1"  # cut off by max_tokens
    assert extract_code("```js\nx\n```\n```py\ny = 2\n```", None) == "y = 2\n"
    assert extract_code("    return x\n", "f") is None
    assert extract_code("print(2)\n```\nThat prints 2.", None) is None  # continuation of an opened fence
    assert extract_code("Answer:\n```\nprint(2)\n```", None) == "print(2)\n"
    assert truncate_at_stop("    return 1\ndef g():\n", ("\ndef ", "\n#")) == "    return 1"


def test_grade_shape_and_cache(tmp_path: Path) -> None:
    def build(problem: Problem, completion: str) -> list[ExecCase]:
        if completion == "nothing":
            raise NoCode("no code block")
        if completion == "bug":
            raise KeyError("x")
        return [ExecCase(source=completion + "\n" + t) for t in TESTS.splitlines()]

    seen: list[tuple[int, int]] = []
    g = CodeGrader(build, cache_dir=tmp_path, workers=2, progress=lambda d, n: seen.append((d, n)))
    problems = {"p": Problem(id="p", input="", target="")}
    samples = [Sample("p", i, c, 1, "stop") for i, c in enumerate([CORRECT, "def add(a, b):\n    return 3\n", "nothing", "bug"])]
    samples.append(Sample("q", 0, CORRECT, 1, "stop"))
    grades = g.grade(problems, samples)
    assert [x.key for x in grades] == [s.key for s in samples]
    ok, half, nothing, bug, unknown = grades
    assert ok.correct is True and ok.detail == {"status": "ok", "passed": 2, "total": 2}
    assert ok.answer is None and ok.error is None
    assert half.correct is False and half.detail == {"status": "runtime_error", "passed": 1, "total": 2}
    assert "test 2/2" in (half.error or "")
    assert nothing.correct is False and nothing.detail and nothing.detail["status"] == "no_code"
    assert bug.correct is None and "build_jobs failed" in (bug.error or "")
    assert unknown.correct is None
    assert seen and seen[-1] == (2, 2)
    before = g._cache.hits
    again = g.grade(problems, samples[:2])
    assert [x.correct for x in again] == [True, False]
    assert g._cache.hits - before == 4  # both samples ran both cases; all four come from the cache


def test_early_stop_is_configurable(tmp_path: Path) -> None:
    g = CodeGrader(lambda p, c: [ExecCase(source="assert False"), ExecCase(source="pass")], cache_dir=None, early_stop=False)
    grade = g.grade({"p": Problem("p", "", "")}, [Sample("p", 0, "", 1, "stop")])[0]
    assert grade.correct is False and grade.detail == {"status": "runtime_error", "passed": 0, "total": 2}
    verdicts = g.run_cases([ExecCase(source="assert False"), ExecCase(source="pass")])
    assert [v.passed for v in verdicts] == [False, True]
