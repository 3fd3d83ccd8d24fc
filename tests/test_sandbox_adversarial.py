"""Hostile programs against bonbench_sandbox: each test asserts containment, not just a status.

After every attack the harness must still be alive, no process carrying the attack's marker may
be left, nothing may have been written outside the sandbox, and a trivial execution must still
finish quickly. Markers are random per test so concurrent runs elsewhere cannot confuse the scan.
"""

from __future__ import annotations

import ast
import os
import resource
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bonbench_sandbox.execution import execute
from bonbench_sandbox.pool import Job, run_many
from bonbench_sandbox.supervise import ExecResult

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")

REPO = Path(__file__).resolve().parents[1]
IS_ROOT = os.geteuid() == 0


@pytest.fixture
def marker() -> str:
    return f"bonbench_marker_{uuid.uuid4().hex}"


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _assert_contained(marker: str) -> None:
    assert _processes_with(marker) == [], "a process from the sandbox survived"
    start = time.monotonic()
    res = execute("print('still here')")
    assert res.status == "ok" and res.stdout == "still here\n"
    assert time.monotonic() - start < 3.0, "machine not responsive after the attack"


def _reexec_with_marker(body: str, marker: str, *, new_session: bool = False) -> str:
    """A program that runs ``body`` in a fresh interpreter whose command line carries ``marker``."""
    code = f"# {marker}\n{body}"
    if new_session:
        return ("import subprocess, sys\n"
                f"subprocess.Popen([sys.executable, '-S', '-c', {code!r}], start_new_session=True,\n"
                "                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n")
    return f"import os, sys\nos.execv(sys.executable, [sys.executable, '-S', '-c', {code!r}])\n"


FORK_BOMB = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"


def test_fork_bomb(marker: str) -> None:
    start = time.monotonic()
    res = execute(_reexec_with_marker(FORK_BOMB, marker), timeout_s=3.0)
    assert res.status == "timeout"
    assert time.monotonic() - start < 8.0
    _assert_contained(marker)


@pytest.mark.skipif(not IS_ROOT, reason="unsafe mode only changes uid (and so enforces RLIMIT_NPROC) as root")
def test_fork_bomb_unsafe_mode(marker: str) -> None:
    res = execute(_reexec_with_marker(FORK_BOMB, marker), timeout_s=2.0, max_procs=32, unsafe=True)
    assert res.status == "timeout"
    _assert_contained(marker)


def test_parallel_bombs_do_not_starve_other_jobs(marker: str) -> None:
    # RLIMIT_NPROC is counted per sandbox (per user namespace): one sandbox's fork bomb must not
    # make another sandbox's fork fail.
    spawn = "import subprocess, sys\nprint(subprocess.run([sys.executable, '-c', 'print(5)'], capture_output=True).stdout)"
    jobs = [Job(_reexec_with_marker(FORK_BOMB, marker), timeout_s=3.0), Job(spawn, timeout_s=10.0),
            Job("x = []\nwhile True: x.append(b'y' * (64 << 20))", timeout_s=5.0, memory_mb=512)]
    results = run_many(jobs, workers=3)
    assert [r.status for r in results] == ["timeout", "ok", "memory"]
    assert results[1].stdout == "b'5\\n'\n"
    _assert_contained(marker)


def test_memory_bomb() -> None:
    res = execute("x = []\nwhile True:\n    x.append(b'y' * (64 << 20))", memory_mb=512, timeout_s=10.0)
    assert res.status == "memory"
    assert res.wall_s < 5.0
    _assert_contained("no-marker-" + uuid.uuid4().hex)


def test_memory_bomb_in_many_processes(marker: str) -> None:
    body = ("import os\nfor _ in range(4):\n    if os.fork() == 0:\n        try:\n            x = b'y' * (900 << 20)\n"
            "        except MemoryError:\n            os._exit(3)\n        os._exit(0)\n"
            "codes = [os.waitstatus_to_exitcode(os.wait()[1]) for _ in range(4)]\nprint(codes)\n")
    res = execute(_reexec_with_marker(body, marker), memory_mb=256, timeout_s=10.0)
    assert res.stdout == "[3, 3, 3, 3]\n"
    _assert_contained(marker)


def test_infinite_loop() -> None:
    res = execute("while True:\n    pass", timeout_s=1.5)
    assert res.status == "timeout"
    assert 1.5 <= res.wall_s < 2.5


def test_sleep_ignoring_signals(marker: str) -> None:
    body = ("import signal, time\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU):\n"
            "    signal.signal(s, signal.SIG_IGN)\ntime.sleep(1000)\n")
    res = execute(_reexec_with_marker(body, marker), timeout_s=1.0)
    assert res.status == "timeout"
    assert res.wall_s < 2.0
    _assert_contained(marker)


def test_disk_fill(marker: str) -> None:
    prog = (f"import errno\nn = 0\ntry:\n    while True:\n        with open('{marker}_%d' % n, 'wb') as f:\n"
            "            f.write(b'z' * (8 << 20))\n        n += 1\n"
            "except OSError as e:\n    print(n, errno.errorcode[e.errno])\n")
    res = execute(prog, max_file_mb=16, timeout_s=20.0)
    n, code = res.stdout.split()
    assert code == "ENOSPC"
    assert int(n) * 8 <= 64, "the work dir is capped (4 x max_file_mb, at least 64 MiB)"
    res = execute(prog.replace("except OSError", "except ZeroDivisionError"), timeout_s=20.0)
    assert res.status == "file_limit"
    assert list(Path(tempfile.gettempdir()).glob(f"{marker}*")) == []
    _assert_contained(marker)


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.setblocking(False)
    yield srv
    srv.close()


def test_no_network_not_even_host_loopback(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    prog = ("import socket\nfor addr in [('127.0.0.1', %d), ('8.8.8.8', 53), ('1.1.1.1', 443)]:\n"
            "    try:\n        socket.create_connection(addr, timeout=2)\n        print('CONNECTED', addr)\n"
            "    except OSError as e:\n        print('blocked', e.errno)\n"
            "try:\n    socket.getaddrinfo('example.com', 80)\n    print('RESOLVED')\nexcept OSError:\n    print('no dns')\n"
            % port)
    res = execute(prog, timeout_s=10.0)
    assert res.status == "ok"
    assert "CONNECTED" not in res.stdout and "RESOLVED" not in res.stdout
    assert res.stdout.count("blocked") == 3
    with pytest.raises(BlockingIOError):
        listener.accept()


def test_writes_outside_the_work_dir_do_not_land(marker: str) -> None:
    victim_dir = Path(tempfile.mkdtemp(prefix="bonbench-victim-"))
    try:
        # World-writable on purpose: only the sandbox's mount namespace stands between it and these.
        victim_dir.chmod(0o777)
        (victim_dir / "keep.txt").write_text("keep")
        (victim_dir / "keep.txt").chmod(0o666)
        targets = [f"/usr/{marker}", f"/tmp/{marker}", f"{REPO}/{marker}", f"/root/{marker}", f"/etc/{marker}",
                   f"{victim_dir}/{marker}", f"{victim_dir}/keep.txt", f"/dev/shm/{marker}", f"/dev/{marker}",
                   f"/{marker}", f"/proc/{marker}"]
        prog = ("import shutil\nfor p in %r:\n    try:\n        open(p, 'w').write('pwned')\n        print('wrote', p)\n"
                "    except OSError as e:\n        print('denied', p, e.errno)\nshutil.rmtree(%r, ignore_errors=True)\n"
                "shutil.rmtree('/usr/lib/python3', ignore_errors=True)\n" % (targets, str(victim_dir)))
        res = execute(prog)
        assert res.status == "ok"
        # The sandbox's own /tmp is the writable work dir; everything else must be refused.
        assert [line.split()[1] for line in res.stdout.splitlines() if line.startswith("wrote")] == [f"/tmp/{marker}"]
        for t in targets:
            if t != f"{victim_dir}/keep.txt":
                assert not os.path.exists(t), t
        assert (victim_dir / "keep.txt").read_text() == "keep"
        assert os.path.isdir("/usr/lib/python3")
    finally:
        shutil.rmtree(victim_dir)


def test_secrets_on_disk_are_not_visible(marker: str) -> None:
    secret_value = f"SECRET-{marker}"
    planted: list[Path] = []
    outside = Path(tempfile.mkdtemp(prefix="bonbench-secret-"))
    outside.chmod(0o755)  # world-readable: the absence of a mount, not permissions, must protect it
    planted.append(outside / "token.txt")
    if IS_ROOT and os.access("/root", os.W_OK):
        planted.append(Path("/root") / f".{marker}_token")
    try:
        for p in planted:
            p.write_text(secret_value)
            p.chmod(0o644)
        paths = [str(p) for p in planted] + [str(REPO / "pyproject.toml"), "/etc/shadow", "/etc/passwd",
                                             os.path.expanduser("~/.ssh/id_rsa")]
        prog = ("import os\nfor p in %r:\n    try:\n        print('READ', p, open(p).read())\n"
                "    except OSError as e:\n        print('absent', p, e.errno)\n"
                "for d in ['/', '/root', '/home', '/work', '/tmp']:\n"
                "    try:\n        print('LS', d, os.listdir(d))\n    except OSError as e:\n        print('nols', d, e.errno)\n"
                % paths)
        res = execute(prog)
        assert res.status == "ok"
        assert secret_value not in res.stdout + res.stderr
        assert "READ" not in res.stdout
        listing = next(line for line in res.stdout.splitlines() if line.startswith("LS / "))
        assert sorted(ast.literal_eval(listing[len("LS / "):])) == ["bin", "dev", "lib", "lib64", "sbin", "tmp", "usr"]
        assert "LS /tmp ['main.py']" in res.stdout
    finally:
        for p in planted:
            p.unlink(missing_ok=True)
        shutil.rmtree(outside)


@pytest.mark.parametrize("unsafe", [False, True])
def test_secret_env_var_is_not_inherited(marker: str, monkeypatch: pytest.MonkeyPatch, unsafe: bool) -> None:
    monkeypatch.setenv("BONBENCH_SECRET_TOKEN", marker)
    monkeypatch.setenv("HF_TOKEN", marker)
    prog = ("import os\nprint(sorted(os.environ))\n"
            "for p in ['/proc/self/environ', '/proc/1/environ']:\n"
            "    try:\n        print(open(p, 'rb').read())\n    except OSError as e:\n        print(p, e.errno)\n")
    res = execute(prog, unsafe=unsafe)
    assert res.status == "ok"
    assert marker not in res.stdout + res.stderr
    assert res.stdout.splitlines()[0] == "['HOME', 'LANG', 'PATH', 'PYTHONHASHSEED', 'TMPDIR']" or unsafe is False


def test_killing_the_parent_and_everyone(marker: str) -> None:
    prog = ("import os, signal\nfor target in (os.getppid(), -1, 1):\n    try:\n        os.kill(target, signal.SIGKILL)\n"
            "        print('sent', target)\n    except OSError as e:\n        print('refused', target, e.errno)\n"
            "print('survived')\n")
    harness = os.getpid()
    res = execute(prog)
    assert res.status in {"ok", "killed"}
    assert os.getpid() == harness  # we are, evidently, still running
    _assert_contained(marker)


@pytest.mark.skipif(not IS_ROOT, reason="unsafe mode relies on the uid change (root only) to protect the parent")
def test_unsafe_mode_cannot_kill_the_harness() -> None:
    res = execute("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)", unsafe=True)
    assert res.status == "runtime_error"
    assert "PermissionError" in res.stderr


def test_privilege_escalation_is_refused() -> None:
    prog = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "def unshare_userns():\n    if libc.unshare(0x10000000) != 0:\n"
            "        raise OSError(ctypes.get_errno(), 'unshare')\n"
            "for f in (lambda: os.setuid(0), lambda: os.chroot('/tmp'), unshare_userns):\n    try:\n        f()\n"
            "        print('ALLOWED')\n    except OSError as e:\n        print('refused', e.errno)\n"
            "print(os.getuid(), os.getgid(), os.getgroups())\n")
    res = execute(prog)
    assert res.status == "ok", res.stderr
    assert res.stdout.count("refused") == 3
    assert res.stdout.splitlines()[-1].startswith("65534 65534")


def test_setsid_grandchild_does_not_outlive_the_run(marker: str) -> None:
    res = execute(_reexec_with_marker("import time\ntime.sleep(1000)", marker, new_session=True) + "print('parent done')")
    assert res.status == "ok" and res.stdout == "parent done\n"
    _assert_contained(marker)


def test_double_forked_daemon_dies_with_timed_out_parent(marker: str) -> None:
    prog = (_reexec_with_marker("import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(1000)\ntime.sleep(1000)",
                                marker, new_session=True)
            + "import time\ntime.sleep(1000)\n")
    res = execute(prog, timeout_s=1.0)
    assert res.status == "timeout"
    _assert_contained(marker)


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_gigabytes_of_output_are_bounded(stream: str) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.monotonic()
    res = execute(f"import sys\nb = 'x' * (1 << 20)\nfor _ in range(10 << 10):\n    sys.{stream}.write(b)\n",
                  timeout_s=60.0)
    elapsed = time.monotonic() - start
    assert res.status == "output_limit"
    assert elapsed < 5.0
    assert len(getattr(res, stream)) == 1 << 20
    assert getattr(res, f"{stream}_truncated")
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 64 << 10, f"host memory grew by {grown_kib} KiB"


def test_many_short_lines_flood() -> None:
    res = execute("while True:\n    print(1)", max_output_bytes=1 << 16, timeout_s=30.0)
    assert res.status == "output_limit"
    assert res.stdout == "1\n" * (1 << 15)
    assert res.wall_s < 5.0


def test_closed_pipes_and_hung_program_still_time_out(marker: str) -> None:
    body = "import os, time\nos.close(1)\nos.close(2)\ntime.sleep(1000)\n"
    res = execute(_reexec_with_marker(body, marker), timeout_s=1.0)
    assert res.status == "timeout" and res.wall_s < 2.0
    _assert_contained(marker)


def test_results_are_plain_values() -> None:
    # A program cannot smuggle objects to the host: results are strings and numbers only.
    res = execute("print('x')")
    assert isinstance(res, ExecResult)
    assert {type(v) for v in res.to_dict().values()} <= {str, int, float, bool, type(None)}
