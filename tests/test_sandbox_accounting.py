"""Per-execution accounting (issue 24 §2, memory): the held-out attacks that escaped the per-process
rlimits are bounded by the execution's cgroup leaf and the inode-capped work dir. Each attack also
runs with ``accounting="rlimit"`` (the old path) as a control, so the test shows what the leaf adds.
Executions go through the real sandbox; on a machine without a writable cgroup hierarchy these tests
are skipped with the reason (CI runs as root on a v1/hybrid host, where they run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bonbench_sandbox import accounting as acct
from bonbench_sandbox.execution import accounting_mode, execute
from bonbench_sandbox.pool import Job

pytestmark = pytest.mark.skipif(accounting_mode() == "rlimit", reason=f"no cgroup accounting here: {acct.hierarchy().reason}")

MEMFD = """
import os, mmap
fds = []
for i in range(48):
    fd = os.memfd_create("x")
    os.ftruncate(fd, 16 << 20)
    m = mmap.mmap(fd, 16 << 20)
    m.write(b"x" * (16 << 20))
    m.close()
    fds.append(fd)
print("held MiB:", 16 * len(fds))
"""

SYSV_SHM = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
total = 0
for i in range(64):
    sid = libc.shmget(0, 16 << 20, 0o1000 | 0o600)   # IPC_PRIVATE, IPC_CREAT
    if sid < 0:
        print("shmget errno", ctypes.get_errno())
        break
    addr = libc.shmat(sid, None, 0)
    ctypes.memset(addr, 1, 16 << 20)
    libc.shmdt(ctypes.c_void_p(addr))               # detached, the segment stays
    total += 16
print("filled MiB:", total)
"""

MANY_FILES = """
n = 0
try:
    while n < 310000:
        open(f"f{n}", "w").close()
        n += 1
except OSError as exc:
    print("stopped at", n, exc.errno)
else:
    print("created", n)
"""


@pytest.mark.parametrize("program", [MEMFD, SYSV_SHM], ids=["memfd 48x16MiB", "SysV shm loop"])
def test_shared_memory_counts_against_the_limit(program: str) -> None:
    control = execute(program, timeout_s=20, memory_mb=512, accounting="rlimit")
    assert control.status == "ok" and control.accounting == "rlimit", control  # the old path let it through
    res = execute(program, timeout_s=20, memory_mb=512)
    assert res.accounting == accounting_mode() and res.status == "memory", res


def test_work_dir_inode_cap() -> None:
    res = execute(MANY_FILES, timeout_s=20, memory_mb=512)
    assert res.status == "ok", res
    words = res.stdout.split()
    assert words[:2] == ["stopped", "at"] and int(words[2]) < acct.WORK_INODES and words[3] == "28", res.stdout  # ENOSPC


def test_memory_within_the_limit_still_runs() -> None:
    res = execute("b = bytearray(200 << 20)\nprint(len(b) >> 20)\n", memory_mb=512)
    assert (res.status, res.stdout) == ("ok", "200\n")


def test_leaves_and_mounts_are_reused_empty_and_removed_at_exit() -> None:
    where = acct.hierarchy()
    assert where.memory is not None
    acct.drain()
    before = len([p for p in where.memory.iterdir() if p.is_dir() and p.name.startswith("x")])
    for _ in range(3):
        assert execute("open('left-behind', 'w').write('x')\nimport os\nos.chmod('.', 0o777)\n").status == "ok"
        assert execute("while True: pass", timeout_s=0.5).status == "timeout"
    acct.drain()  # leaves and mounts go back to their pools in a background thread
    leaves = [p for p in where.memory.iterdir() if p.is_dir() and p.name.startswith("x")]
    assert 1 <= len(leaves) <= before + 2  # six sequential executions reuse pooled leaves
    assert all((p / "cgroup.procs").read_text() == "" for p in leaves)
    # a reused work dir starts empty, with its original mode
    res = execute("import os\nprint(sorted(os.listdir('.')), oct(os.stat('.').st_mode & 0o777))\n")
    assert res.stdout == "['main.py'] 0o700\n", res
    # a process that exits removes its leaves, its parent cgroup and its mounts
    code = ("from bonbench_sandbox.execution import execute\nimport os\nprint(os.getpid())\n"
            "assert execute('print(1)').status == 'ok'\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    pid = out.stdout.split()[0]
    assert not (where.memory.parent / f"bonbench-{pid}").exists()
    assert f"bonbench-work-{pid}" not in Path("/proc/mounts").read_text()


def test_cache_key_includes_the_mode() -> None:
    assert Job("print(1)").key() != Job("print(1)", accounting="rlimit").key()


def test_cli_reports_the_mode(tmp_path: Path) -> None:
    prog = tmp_path / "p.py"
    prog.write_text(MEMFD)
    out = subprocess.run([sys.executable, "-m", "bonbench_sandbox.command_line", "run", str(prog), "--timeout", "5",
                          "--memory-mb", "512"], capture_output=True, text=True, timeout=60)
    row = json.loads(out.stdout)
    assert out.returncode == 1 and row["status"] == "memory" and row["accounting"] == accounting_mode()
    bad = subprocess.run([sys.executable, "-m", "bonbench_sandbox.command_line", "run", str(prog),
                          "--accounting", "none"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_bwrap_prefix_from_the_program_is_not_a_sandbox_error() -> None:
    prog = "import sys\nsys.stderr.write('bwrap: Creating new namespace failed\\n')\nsys.exit(1)\n"
    for mode in ("auto", "rlimit"):
        assert execute(prog, accounting=mode).status == "runtime_error"
        assert execute(prog, accounting=mode, unsafe=True).status == "runtime_error"
