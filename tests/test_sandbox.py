"""bonbench_sandbox on ordinary programs: statuses, stdin/stdout/stderr, limits, pool, cache, CLI.

The hostile programs live in test_sandbox_adversarial.py.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from bonbench_sandbox import arguments, command_line, execution, pool
from bonbench_sandbox.execution import SandboxUnavailable, execute
from bonbench_sandbox.pool import Job, run_many, run_many_tests, run_tests
from bonbench_sandbox.result_cache import ResultCache
from bonbench_sandbox.supervise import ExecResult

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


def test_ok_program_captures_stdout() -> None:
    res = execute("print('hello', 6 * 7)")
    assert res.status == "ok"
    assert res.exit_code == 0
    assert res.signal is None
    assert res.stdout == "hello 42\n"
    assert res.stderr == ""
    assert 0 < res.wall_s < 5


def test_stdin_is_passed_through() -> None:
    res = execute("import sys\nlines = sys.stdin.read().split()\nprint(sum(map(int, lines)))", stdin="1 2\n3\n")
    assert (res.status, res.stdout) == ("ok", "6\n")


def test_input_builtin_and_no_stdin_means_eof() -> None:
    assert execute("print(input()[::-1])", stdin="abc\n").stdout == "cba\n"
    res = execute("input()")
    assert res.status == "runtime_error"
    assert "EOFError" in res.stderr


def test_open0_and_dev_null_work() -> None:
    prog = ("import subprocess, sys\ndata = open(0).read()\n"
            "r = subprocess.run([sys.executable, '-c', 'print(7)'], stdin=subprocess.DEVNULL, capture_output=True)\n"
            "open('/dev/null', 'w').write('x')\n"
            "print(data.strip(), r.stdout.decode().strip(), len(open('/dev/urandom', 'rb').read(8)))")
    res = execute(prog, stdin="abc\n")
    assert (res.status, res.stdout) == ("ok", "abc 7 8\n"), res.stderr


def test_large_stdin_does_not_deadlock() -> None:
    data = "x" * (4 << 20) + "\n"
    res = execute("import sys; print(len(sys.stdin.read()))", stdin=data)
    assert (res.status, res.stdout) == ("ok", f"{len(data)}\n")


@pytest.mark.parametrize("code,expected", [("import sys; sys.exit(3)", 3), ("exit(4)", 4), ("quit(5)", 5),
                                           ("raise SystemExit(2)", 2)])
def test_exit_codes(code: str, expected: int) -> None:
    res = execute(code)
    assert res.status == "runtime_error"
    assert res.exit_code == expected
    assert res.signal is None


def test_exit_zero_is_ok() -> None:
    assert execute("print('a'); exit()").status == "ok"


def test_stderr_is_captured_with_traceback() -> None:
    res = execute("import sys\nprint('to err', file=sys.stderr)\nraise ValueError('boom')")
    assert res.status == "runtime_error"
    assert res.exit_code == 1
    assert res.stderr.startswith("to err\n")
    assert "ValueError: boom" in res.stderr
    assert 'line 3, in <module>' in res.stderr  # the program's own line numbering


def test_syntax_error_is_runtime_error() -> None:
    res = execute("def f(:\n  pass")
    assert res.status == "runtime_error"
    assert "SyntaxError" in res.stderr


def test_main_guard_and_script_semantics() -> None:
    res = execute("import sys, helper\nif __name__ == '__main__':\n    print(sys.argv, __file__, helper.X)",
                  files={"helper.py": "X = 1"})
    assert res.stdout == "['main.py'] main.py 1\n"


def test_unicode_round_trip() -> None:
    res = execute("import sys; s = sys.stdin.read(); print(s.upper(), '✓')", stdin="héllo ω")
    assert res.stdout == "HÉLLO Ω ✓\n"


def test_hash_seed_is_fixed_so_set_order_is_reproducible() -> None:
    prog = "print(list({'apple', 'banana', 'cherry', 'date', 'elder', 'fig'}))"
    assert execute(prog).stdout == execute(prog).stdout


def test_stdlib_only_no_site_packages() -> None:
    res = execute("import json, re, collections, heapq, itertools, math, fractions, bisect\nimport numpy")
    assert res.status == "runtime_error"
    assert "ModuleNotFoundError" in res.stderr and "numpy" in res.stderr


def test_extra_files_are_next_to_main() -> None:
    res = execute("import helper\nprint(helper.VALUE, open('data/in.txt').read())",
                  files={"helper.py": "VALUE = 7\n", "data/in.txt": "payload"})
    assert (res.status, res.stdout) == ("ok", "7 payload\n")


@pytest.mark.parametrize("bad", ["/etc/x", "../x", "main.py", "a/../../x"])
def test_extra_files_must_stay_inside(bad: str) -> None:
    with pytest.raises(ValueError):
        execute("pass", files={bad: ""})


def test_timeout_is_accurate() -> None:
    res = execute("import time; time.sleep(60)", timeout_s=1.0)
    assert res.status == "timeout"
    assert res.exit_code is None
    assert 1.0 <= res.wall_s < 1.8


def test_cpu_limit_stops_busy_loop_before_wall_clock() -> None:
    res = execute("while True: pass", timeout_s=20.0, cpu_s=1)
    assert res.status == "timeout"
    assert res.signal == 24  # SIGXCPU
    assert res.wall_s < 5


def test_memory_limit() -> None:
    res = execute("x = bytearray(600 << 20)\nprint('allocated')", memory_mb=256)
    assert res.status == "memory"
    assert "MemoryError" in res.stderr
    assert execute("x = bytearray(100 << 20)\nprint(len(x))", memory_mb=256).status == "ok"


def test_file_size_limit() -> None:
    res = execute("open('f', 'wb').write(b'x' * (3 << 20))", max_file_mb=2)
    assert res.status == "file_limit"
    assert "File too large" in res.stderr


def test_output_cap_keeps_prefix_and_flags_truncation() -> None:
    res = execute("print('0123456789' * 10)", max_output_bytes=25)
    assert res.status == "output_limit"
    assert res.stdout == "0123456789012345678901234"
    assert res.stdout_truncated and not res.stderr_truncated


def test_output_at_cap_is_ok() -> None:
    res = execute("import sys; sys.stdout.write('a' * 25)", max_output_bytes=25)
    assert (res.status, res.stdout_truncated, len(res.stdout)) == ("ok", False, 25)


def test_stderr_cap() -> None:
    res = execute("import sys; sys.stderr.write('e' * 1000)", max_output_bytes=100)
    assert res.status == "output_limit"
    assert res.stderr == "e" * 100 and res.stderr_truncated


def test_invalid_limits_are_rejected() -> None:
    with pytest.raises(ValueError):
        execute("pass", timeout_s=0)
    with pytest.raises(ValueError):
        execute("pass", max_procs=0)


def test_process_limit() -> None:
    prog = ("import os, time\nn = 0\ntry:\n    for _ in range(100):\n        if os.fork() == 0:\n"
            "            time.sleep(3); os._exit(0)\n        n += 1\nexcept OSError as e:\n    print(n, e.errno)")
    res = execute(prog, max_procs=10)
    n, errno = res.stdout.split()
    assert int(n) < 10 and errno == "11"


# ------------------------------------------------------------------ pool and cache


def test_run_many_keeps_order_and_reports_progress() -> None:
    jobs = [Job(f"print({i} * {i})") for i in range(6)] + [Job("import sys; sys.exit(1)")]
    seen: list[int] = []
    results = run_many(jobs, workers=2, progress=seen.append)
    assert [r.stdout for r in results[:6]] == [f"{i * i}\n" for i in range(6)]
    assert results[6].status == "runtime_error"
    assert seen[-1] == 7 and seen == sorted(seen)


def test_run_many_runs_in_parallel() -> None:
    jobs = [Job("import time; time.sleep(1)") for _ in range(4)]
    t = time.monotonic()
    results = run_many(jobs, workers=4)
    assert all(r.status == "ok" for r in results)
    assert time.monotonic() - t < 3.0


class _Counter:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return execution.execute(*args, **kwargs)


def test_cache_hit_avoids_reexecution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counter = _Counter()
    monkeypatch.setattr(pool, "execute", counter)
    jobs = [Job("print(input())", stdin=s) for s in ("a", "b", "a")]
    with ResultCache(tmp_path / "cache.sqlite") as cache:
        first = run_many(jobs, workers=2, cache=cache)
        assert counter.calls == 2  # the duplicate job ran once
        assert [r.stdout for r in first] == ["a\n", "b\n", "a\n"]
    with ResultCache(tmp_path / "cache.sqlite") as cache:  # persisted across opens
        second = run_many(jobs, workers=2, cache=cache)
        assert counter.calls == 2
        assert second == first
        assert cache.hits == 3 and len(cache) == 2
        run_many([Job("print(input())", stdin="a", timeout_s=5.0)], cache=cache)  # other limits: new key
        assert counter.calls == 3


def test_cache_key_covers_inputs() -> None:
    base = Job("print(1)")
    keys = {base.key(), Job("print(2)").key(), Job("print(1)", stdin="").key(), Job("print(1)", memory_mb=512).key(),
            Job("print(1)", unsafe=True).key(), Job("print(1)", files={"a": "b"}).key()}
    assert len(keys) == 6
    assert Job("print(1)").key() == base.key()


def test_sandbox_errors_are_not_cached(tmp_path: Path) -> None:
    with ResultCache(tmp_path / "c.sqlite") as cache:
        cache.put("k", ExecResult("sandbox_error", None, "", "x", 0.0))
        assert cache.get("k") is None
        cache.put("k2", ExecResult("timeout", None, "", "", 1.0, 9))
        assert cache.get("k2") == ExecResult("timeout", None, "", "", 1.0, 9)


def test_run_tests_stops_on_first_failure() -> None:
    prog = "n = int(input())\nassert n != 2\nprint(n)"
    jobs = [Job(prog, stdin=f"{i}\n") for i in range(5)]
    results = run_tests(jobs, stop_on_first_failure=True)
    assert [r.status for r in results] == ["ok", "ok", "runtime_error"]
    assert len(run_tests(jobs, stop_on_first_failure=False)) == 5


def test_run_tests_judge_stops_on_wrong_answer() -> None:
    jobs = [Job("print(int(input()) * 2)", stdin=f"{i}\n") for i in range(4)]
    expected = ["0", "2", "5", "6"]
    results = run_tests(jobs, judge=lambda i, r: r.stdout.strip() == expected[i])
    assert len(results) == 3


def test_run_many_tests_groups_in_parallel() -> None:
    good = [Job("print(int(input()) + 1)", stdin=f"{i}\n") for i in range(3)]
    bad = [Job("raise SystemExit(1)", stdin=f"{i}\n") for i in range(3)]
    done: list[int] = []
    out = run_many_tests([good, bad], workers=2, progress=done.append)
    assert [len(g) for g in out] == [3, 1]
    assert [r.stdout for r in out[0]] == ["1\n", "2\n", "3\n"]
    assert done[-1] == 2


# ------------------------------------------------------------------ unsafe mode


def test_unsafe_mode_still_limits_and_cleans_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BONBENCH_TEST_SECRET", "s3cr3t")
    prog = ("import os\nprint(os.getuid(), os.getcwd())\nprint('BONBENCH_TEST_SECRET' in os.environ)\n"
            "open('scratch', 'w').write('x')")
    res = execute(prog, unsafe=True)
    assert res.status == "ok"
    uid, cwd = res.stdout.splitlines()[0].split()
    if os.geteuid() == 0:
        assert uid == "65534"
    assert res.stdout.splitlines()[1] == "False"
    assert not os.path.exists(cwd), "the private work dir must be removed afterwards"
    assert execute("x = bytearray(600 << 20)", memory_mb=256, unsafe=True).status == "memory"
    assert execute("import time; time.sleep(30)", timeout_s=0.5, unsafe=True).status == "timeout"


def test_unsafe_mode_sees_host_filesystem_as_documented() -> None:
    # The point of the default mode: this path exists on the host but not inside bubblewrap.
    prog = "import os; print(os.path.exists('/work') or os.path.exists('/home'))"
    assert execute(prog, unsafe=True).stdout == "True\n"
    assert execute(prog).stdout == "False\n"


def test_missing_bwrap_refuses_with_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(execution.os.path, "exists", lambda p: False if str(p).endswith("bwrap") else os.path.lexists(p))
    with pytest.raises(SandboxUnavailable) as info:
        execute("print(1)")
    assert "apt-get install bubblewrap" in str(info.value) and "unsafe" in str(info.value)
    assert execute("print(1)", unsafe=True).stdout == "1\n"


def test_broken_bwrap_fails_self_check(monkeypatch: pytest.MonkeyPatch) -> None:
    # A world-readable directory, so that uid 65534 can execute the fake as it would the real one.
    fake_dir = Path(tempfile.mkdtemp(prefix="bonbench-fake-bwrap-"))
    try:
        fake_dir.chmod(0o755)
        fake = fake_dir / "bwrap"
        fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
        fake.chmod(0o755)
        monkeypatch.setenv("PATH", str(fake_dir))
        monkeypatch.setattr(execution, "_checked", {})
        with pytest.raises(SandboxUnavailable, match="self-check failed.*No permissions"):
            execute("print(1)")
    finally:
        shutil.rmtree(fake_dir)


# ------------------------------------------------------------------ CLI


def test_cli_run_prints_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog = tmp_path / "p.py"
    prog.write_text("print(input().upper())")
    stdin = tmp_path / "in.txt"
    stdin.write_text("shout\n")
    assert command_line.main(["run", str(prog), "--stdin", str(stdin), "--timeout", "5", "--memory-mb", "512"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["status"] == "ok" and row["stdout"] == "SHOUT\n" and row["exit_code"] == 0
    assert {"stderr", "wall_s"} <= set(row)
    prog.write_text("import time; time.sleep(5)")
    assert command_line.main(["run", str(prog), "--timeout", "0.3", "--unsafe-no-sandbox"]) == 1
    assert json.loads(capsys.readouterr().out)["status"] == "timeout"


def test_cli_check(capsys: pytest.CaptureFixture[str]) -> None:
    assert command_line.main(["check"]) == 0
    assert json.loads(capsys.readouterr().out)["bwrap"] == "ok"


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid change only happens as root")
@pytest.mark.parametrize("unsafe", [False, True])
def test_uid_drop_without_setpriv(monkeypatch: pytest.MonkeyPatch, unsafe: bool) -> None:
    # Fallback path: Popen(user=...) when util-linux's setpriv is missing.
    monkeypatch.setattr(execution, "_setpriv_path", lambda: None)
    res = execute("import os; print(os.getuid(), os.getgid(), os.getgroups())", unsafe=unsafe)
    assert (res.status, res.stdout) == ("ok", "65534 65534 []\n")


def test_cli_mounts_into_a_host_parser(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The way bonbench's CLI mounts it: `bonbench sandbox run PROGRAM.py ...`.
    import argparse

    parser = argparse.ArgumentParser(prog="bonbench")
    sub = parser.add_subparsers(dest="command")
    sandbox_sub = sub.add_parser("sandbox").add_subparsers(dest="sandbox_command", required=True)
    arguments.add_arguments(sandbox_sub.add_parser("run"))
    prog = tmp_path / "p.py"
    prog.write_text("import sys; sys.exit(3)")
    args = parser.parse_args(["sandbox", "run", str(prog), "--timeout", "5", "--memory-mb", "256"])
    assert command_line.run_from_args(args) == 1
    row = json.loads(capsys.readouterr().out)
    assert (row["status"], row["exit_code"]) == ("runtime_error", 3)
