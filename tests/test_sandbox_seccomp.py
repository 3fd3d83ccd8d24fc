"""The seccomp deny-list: syscall tables against the kernel headers, the compiled BPF run through
an interpreter for every denied and some allowed calls, and the real filter inside bubblewrap
(with unsafe mode, which has no filter, showing the same calls succeed without it)."""

from __future__ import annotations

import errno
import platform
import re
import shutil
from pathlib import Path

import pytest

from bonbench_sandbox.execution import execute
from bonbench_sandbox.seccomp import ARCHES, DENIED, RET_ALLOW, RET_ERRNO, RET_KILL_PROCESS, evaluate, filter_program

HEADERS = {"x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"), "aarch64": Path("/usr/include/asm-generic/unistd.h")}
AUDIT_ARCH_I386 = 0x40000003
DENY = RET_ERRNO | errno.EPERM
# calls every Python program makes: they must pass
ALLOWED = {"x86_64": {"read": 0, "write": 1, "mmap": 9, "clone": 56, "execve": 59, "exit_group": 231, "openat": 257,
                      "clone3": 435},
           "aarch64": {"read": 63, "write": 64, "openat": 56, "exit_group": 94, "clone": 220, "execve": 221, "mmap": 222,
                       "clone3": 435}}


def _header_numbers(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for m in re.finditer(r"#define __NR(?:3264)?_(\w+)\s+(\d+)", path.read_text()):
        out.setdefault(m.group(1), int(m.group(2)))
    return out


@pytest.mark.parametrize("machine", sorted(ARCHES))
def test_tables_match_kernel_headers(machine: str) -> None:
    if not HEADERS[machine].exists():
        pytest.skip(f"{HEADERS[machine]} not installed (apt-get install linux-libc-dev)")
    kernel = _header_numbers(HEADERS[machine])
    table = ARCHES[machine][1]
    assert {n: kernel.get(n) for n in table} == table
    # a denied name is missing from a table only where the architecture has no such syscall
    assert [n for n in DENIED if n not in table and n in kernel] == []


@pytest.mark.parametrize("machine", sorted(ARCHES))
def test_compiled_filter_decisions(machine: str) -> None:
    audit_arch, table, foreign_from = ARCHES[machine]
    prog = filter_program(machine)
    assert prog is not None
    for name in DENIED:
        if name in table:
            assert evaluate(prog, table[name], audit_arch) == DENY, name
    for name, nr in ALLOWED[machine].items():
        assert evaluate(prog, nr, audit_arch) == RET_ALLOW, name
    denied = set(table.values())
    assert all(evaluate(prog, nr, audit_arch) == RET_ALLOW for nr in range(500) if nr not in denied)
    assert evaluate(prog, 0, AUDIT_ARCH_I386) == RET_KILL_PROCESS  # 32-bit ABI
    if foreign_from is not None:
        assert evaluate(prog, foreign_from | 39, audit_arch) == RET_KILL_PROCESS  # x32 ABI
    assert filter_program("sparc64") is None


PROBE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def call(name, nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(nr, *args)
    print(name, r, ctypes.get_errno(), flush=True)
call("ptrace_traceme", 101, 0, 0, 0, 0)
call("keyctl_get_keyring_id", 250, 0, -3, 0)
call("kcmp_self", 312, os.getpid(), os.getpid(), 0, 0, 0)
call("getppid", 110)
call("x32_getpid", 0x40000000 | 39)
print("survived", flush=True)
"""


@pytest.mark.skipif(shutil.which("bwrap") is None or platform.machine() != "x86_64", reason="needs bubblewrap on x86-64")
def test_filter_applies_inside_the_sandbox() -> None:
    def results(unsafe: bool) -> tuple[str, dict[str, tuple[int, int]]]:
        res = execute(PROBE, timeout_s=10, unsafe=unsafe)
        rows = [line.split() for line in res.stdout.splitlines() if len(line.split()) == 3]
        return res.status, {name: (int(r), int(e)) for name, r, e in rows}

    status, got = results(unsafe=False)
    for name in ("ptrace_traceme", "keyctl_get_keyring_id", "kcmp_self"):
        assert got[name] == (-1, errno.EPERM), (name, got)
    assert got["getppid"][0] >= 0 and got["getppid"][1] == 0
    # the x32 call killed the process: nothing after it ran
    assert "x32_getpid" not in got and status != "ok"
    # without the filter (unsafe mode) the same calls succeed: the assertions above can fail
    _, plain = results(unsafe=True)
    assert plain["ptrace_traceme"] == (0, 0) and plain["kcmp_self"] == (0, 0) and plain["keyctl_get_keyring_id"][0] > 0
