"""A syscall deny-list for sandboxed programs, compiled to classic BPF for bubblewrap's ``--seccomp``.

Namespaces and rlimits decide what a program can *reach*; this filter shrinks the kernel code it
can *call*. Denied calls fail with ``EPERM`` (so a program sees a ``PermissionError``, not a
crash), calls from another ABI (32-bit ``int 0x80`` on x86-64, the x32 ABI) kill the process, and
everything else is allowed. The list follows the syscalls container runtimes deny by default:

* reaching into other processes: ``ptrace``, ``process_vm_readv/writev``, ``kcmp``,
  ``pidfd_getfd``, ``process_madvise``;
* large, often-exploited kernel interfaces a test program never needs: ``bpf``,
  ``perf_event_open``, ``userfaultfd``, ``io_uring_*``, the key-retention calls (``keyctl``,
  ``add_key``, ``request_key``);
* namespace and mount changes: ``mount``, ``umount2``, ``pivot_root``, ``chroot``, ``unshare``,
  ``setns`` and the new mount API (``open_tree`` ... ``mount_setattr``);
* file handles, modules, kexec, reboot, swap, accounting, quotas, the kernel log, the clock,
  NUMA memory policy, and a few obsolete calls.

What it is not: an allow-list (the remaining ~300 syscalls stay reachable), nor argument
filtering (``clone`` with namespace flags is stopped by bubblewrap's ``--disable-userns`` and the
missing capabilities, not here). Tables exist for x86-64 and aarch64 (checked against the kernel
headers by the tests); on other machines `filter_program` returns None and the sandbox runs
without a filter. Classic BPF layout: ``struct sock_filter {u16 code; u8 jt; u8 jf; u32 k}``,
read by the kernel against ``struct seccomp_data {int nr; u32 arch; ...}``.
"""

from __future__ import annotations

import errno
import platform
import struct

DENIED: tuple[str, ...] = (
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise",
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "keyctl", "add_key", "request_key",
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns",
    "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    "open_by_handle_at", "name_to_handle_at",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "reboot", "swapon", "swapoff", "acct", "quotactl", "syslog",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "move_pages", "mbind", "set_mempolicy", "migrate_pages",
    "lookup_dcookie", "iopl", "ioperm", "uselib", "ustat", "sysfs",
)

# Syscall numbers (from <asm/unistd_64.h> and <asm-generic/unistd.h>, Linux 6.1); a name missing
# from an architecture's table does not exist there.
_X86_64 = {
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "pidfd_getfd": 438,
    "process_madvise": 440, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "keyctl": 250, "add_key": 248, "request_key": 249,
    "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "unshare": 272, "setns": 308,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "open_by_handle_at": 304, "name_to_handle_at": 303, "init_module": 175,
    "finit_module": 313, "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320, "reboot": 169,
    "swapon": 167, "swapoff": 168, "acct": 163, "quotactl": 179, "syslog": 103, "settimeofday": 164,
    "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159, "move_pages": 279, "mbind": 237,
    "set_mempolicy": 238, "migrate_pages": 256, "lookup_dcookie": 212, "iopl": 172, "ioperm": 173,
    "uselib": 134, "ustat": 136, "sysfs": 139,
}
_AARCH64 = {
    "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272, "pidfd_getfd": 438,
    "process_madvise": 440, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "keyctl": 219, "add_key": 217, "request_key": 218,
    "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "unshare": 97, "setns": 268,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "open_by_handle_at": 265, "name_to_handle_at": 264, "init_module": 105,
    "finit_module": 273, "delete_module": 106, "kexec_load": 104, "kexec_file_load": 294, "reboot": 142,
    "swapon": 224, "swapoff": 225, "acct": 89, "quotactl": 60, "syslog": 116, "settimeofday": 170,
    "clock_settime": 112, "clock_adjtime": 266, "adjtimex": 171, "move_pages": 239, "mbind": 235,
    "set_mempolicy": 237, "migrate_pages": 238, "lookup_dcookie": 18,
}

#: machine -> (AUDIT_ARCH_* value, syscall table, first syscall number of a foreign ABI or None)
ARCHES: dict[str, tuple[int, dict[str, int], int | None]] = {
    "x86_64": (0xC000003E, _X86_64, 0x40000000),  # x32 ABI calls are nr | __X32_SYSCALL_BIT
    "aarch64": (0xC00000B7, _AARCH64, None),
}

# BPF opcodes and seccomp return values (<linux/filter.h>, <linux/seccomp.h>)
LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
RET_K = 0x06  # BPF_RET | BPF_K
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
RET_KILL_PROCESS = 0x80000000
_OFF_NR, _OFF_ARCH = 0, 4  # offsets in struct seccomp_data


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def filter_program(machine: str | None = None) -> bytes | None:
    """The compiled filter for ``machine`` (default: this one), or None if there is no table for it."""
    arch = ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit_arch, table, foreign_from = arch
    nrs = sorted({table[name] for name in DENIED if name in table})
    deny_ret = RET_ERRNO | errno.EPERM
    prog = [_insn(LD_W_ABS, 0, 0, _OFF_ARCH)]
    # Layout after the arch check: [load nr] [foreign-ABI check] [one JEQ per denied nr] ALLOW DENY KILL.
    # Jump offsets count instructions after the current one, so each compare's distance is fixed.
    body = 1 + (1 if foreign_from is not None else 0) + len(nrs)
    prog.append(_insn(JEQ_K, 0, body + 2, audit_arch))  # other arch -> KILL
    prog.append(_insn(LD_W_ABS, 0, 0, _OFF_NR))
    if foreign_from is not None:
        prog.append(_insn(JGE_K, len(nrs) + 2, 0, foreign_from))  # -> KILL
    for i, nr in enumerate(nrs):
        prog.append(_insn(JEQ_K, len(nrs) - i, 0, nr))  # -> DENY
    prog += [_insn(RET_K, 0, 0, RET_ALLOW), _insn(RET_K, 0, 0, deny_ret), _insn(RET_K, 0, 0, RET_KILL_PROCESS)]
    if len(prog) > 255:  # jt/jf are 8 bits
        raise AssertionError("seccomp deny-list too long for single-hop jumps")
    return b"".join(prog)


def evaluate(program: bytes, nr: int, arch: int) -> int:
    """Run ``program`` on one (syscall number, arch) like the kernel would; for tests and debugging.

    Supports exactly the instructions `filter_program` emits.
    """
    insns = [struct.unpack_from("=HBBI", program, off) for off in range(0, len(program), 8)]
    data = {_OFF_NR: nr & 0xFFFFFFFF, _OFF_ARCH: arch}
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == LD_W_ABS:
            acc = data[k]
        elif code == JEQ_K:
            pc += jt if acc == k else jf
        elif code == JGE_K:
            pc += jt if acc >= k else jf
        elif code == RET_K:
            return k
        else:
            raise ValueError(f"unexpected BPF opcode {code:#x}")
        pc += 1
