"""Run one untrusted Python program under bubblewrap with resource limits; classify what happened.

`execute()` is the whole public surface. One call = one fresh sandbox:

* bubblewrap (``bwrap``) with ``--unshare-all --unshare-user``: new user, PID, network, IPC,
  UTS and cgroup namespaces. No network at all (not even loopback to the host).
* When the host runs as root, bwrap itself is started as uid/gid 65534 (nobody) with no
  supplementary groups, so the sandbox is nobody both inside *and* on the host kernel's books:
  ``RLIMIT_NPROC`` is then enforced (root ignores it) and counted per sandbox (per user
  namespace), and an escape from the mount namespace would still only have nobody's rights.
* Filesystem: a read-only root holding ``/usr`` bound read-only (``/bin``, ``/lib``, ``/lib64``
  are symlinks into it), a minimal ``/dev`` (null, zero, full, random, urandom; no tty, no
  ``/dev/shm``, and ``/dev/stdin`` does not exist: use ``sys.stdin`` or ``open(0)``), no ``/proc``,
  and a size-capped tmpfs on ``/tmp`` (4 x ``max_file_mb``, at least 64 MiB), which is
  the working directory and the only writable place. ``/root``, ``/home``, ``/etc``, ``/work`` and
  the repository are simply not there.
* Interpreter: ``/usr/bin/python3`` by default (it lives under the read-only ``/usr``, so no other
  host path has to be exposed). Another interpreter can be passed; its prefix is then bound
  read-only and must be readable by uid 65534. It runs with ``-S`` (no site-packages: programs get
  the standard library only), ``-B`` and ``-X utf8``; ``exit()``/``quit()`` are provided.
* Environment: cleared; only ``PATH``, ``LANG=C.UTF-8``, ``HOME=/tmp``, ``TMPDIR=/tmp`` and
  ``PYTHONHASHSEED=0`` (set iteration order is reproducible across re-runs).
* rlimits set inside by ``launcher.py`` before the program runs: address space, CPU seconds,
  file size, processes (threads count), open files, core dumps = 0.
* Host side: wall-clock deadline enforced by SIGKILL to bwrap's process group; ``--die-with-parent``
  then kills everything in the sandbox, and the PID namespace guarantees that ``setsid``/double-fork
  grandchildren die too. stdout/stderr are read concurrently in chunks; at most
  ``max_output_bytes`` per stream is kept and the program is killed once a stream passes twice that.

* seccomp (``seccomp.py``): a deny-list of ~55 syscalls (ptrace and other cross-process access,
  bpf, perf_event_open, userfaultfd, io_uring, keyrings, mount/namespace changes, modules, kexec,
  clock, ...) fails with EPERM; calls from a foreign ABI (i386, x32) kill the process. x86-64 and
  aarch64; elsewhere no filter is installed.

* Accounting (``accounting.py``): where the machine allows it (root and a writable cgroup v2 or
  v1 hierarchy) every execution runs in its own cgroup leaf, joined before bubblewrap starts, with
  ``memory_mb`` as the limit on all memory its processes cause (shared memory, work-dir files and
  kernel objects included) and a pids limit, and its work dir is a host tmpfs with an inode cap.
  Otherwise (``accounting == "rlimit"``) only the rlimits bound memory: ``max_procs`` ×
  ``memory_mb`` plus the tmpfs, with shared memory and kernel objects unbounded.

Not covered: the filter is a deny-list, so the rest of the kernel's syscall surface is reachable
(a kernel exploit through an allowed call would escape); no CPU share accounting (no cpu
controller); timing side channels and CPU
identification (``cpuid``) are visible; no ``/dev/shm``, so ``multiprocessing`` locks and pools
fail (plain ``os.fork`` and threads work). If the *host* process is SIGKILLed, a running sandbox
lives on until its CPU limit (a sleeping one until it wakes); normal exits and exceptions do kill
it.

``unsafe=True`` drops the namespaces and keeps the rest: rlimits, uid 65534 when root, a private
temporary working directory, a cleared environment and a process-group kill. It does not hide the
filesystem or the network, and a grandchild that calls ``setsid`` escapes the group kill.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bonbench_sandbox.accounting as _acct
from bonbench_sandbox.seccomp import filter_program
from bonbench_sandbox.supervise import ExecResult, supervise

#: Bumped whenever isolation, limits or classification change: it is part of every cache key.
SANDBOX_VERSION = "4"

_EAGAIN_TRIES = 4  # attempts when the sandbox itself could not fork (see execute)
STATUSES = ("ok", "timeout", "memory", "runtime_error", "killed", "output_limit", "file_limit", "sandbox_error")

# The launcher's docstring is left out of the command line (it would only lengthen `ps` output).
_LAUNCHER = "# bonbench_sandbox launcher" + Path(__file__).with_name("launcher.py").read_text().split('"""', 2)[2]
_NOBODY = 65534
_SECCOMP = filter_program()  # None on machines without a syscall table (see seccomp.py)
_SANDBOX_CWD = "/tmp"


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create namespaces here; the message names the fix."""


@dataclass(frozen=True)
class Limits:
    """The resolved limits of one execution (all of them enter the cache key)."""

    timeout_s: float
    memory_mb: int
    cpu_s: int
    max_output_bytes: int
    max_procs: int
    max_file_mb: int
    max_open_files: int
    tmpfs_mb: int


def resolve_limits(
    *,
    timeout_s: float,
    memory_mb: int,
    cpu_s: float | None,
    max_output_bytes: int,
    max_procs: int,
    max_file_mb: int,
    max_open_files: int,
) -> Limits:
    """Validate the user-facing limits and fill the derived ones (CPU seconds, tmpfs size)."""
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    for name, value in (("max_output_bytes", max_output_bytes), ("max_procs", max_procs),
                        ("max_file_mb", max_file_mb), ("max_open_files", max_open_files)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if memory_mb < 0:
        raise ValueError(f"memory_mb must be >= 0 (0 = no address-space limit), got {memory_mb}")
    # Without an explicit CPU budget the CPU limit is a backstop just above the wall clock: it
    # still ends a busy loop if the host process dies before it can enforce the deadline.
    cpu = math.ceil(cpu_s) if cpu_s is not None else math.ceil(timeout_s) + 1
    # The tmpfs holds main.py, the extra files and whatever the program writes; several files of
    # up to max_file_mb each are allowed, but the total is capped because tmpfs is host RAM.
    tmpfs_mb = max(64, 4 * max_file_mb)
    return Limits(float(timeout_s), int(memory_mb), max(1, cpu), int(max_output_bytes), int(max_procs),
                  int(max_file_mb), int(max_open_files), tmpfs_mb)


# --------------------------------------------------------------------------- interpreter


def _world_accessible(path: str) -> bool:
    """True when a process with no relation to the owner (uid 65534) can reach and read ``path``."""
    p = Path(path)
    try:
        for parent in reversed(p.parents):
            if not os.stat(parent).st_mode & 0o001:
                return False
        return bool(os.stat(p).st_mode & 0o004)
    except OSError:
        return False


def _default_python() -> str:
    if os.path.exists("/usr/bin/python3"):
        return "/usr/bin/python3"
    return getattr(sys, "_base_executable", None) or sys.executable


@dataclass(frozen=True)
class Interpreter:
    """The Python that runs inside: its real path, the prefix to bind, and an identity for caching."""

    path: str
    prefix: str | None  # None when it lives under /usr (already bound)
    identity: str


_interp_cache: dict[str, Interpreter] = {}


def resolve_interpreter(python: str | None) -> Interpreter:
    """Find the real binary of ``python`` (default: /usr/bin/python3) and check uid 65534 can use it."""
    requested = python or _default_python()
    cached = _interp_cache.get(requested)
    if cached is not None:
        return cached
    real = os.path.realpath(shutil.which(requested) or requested)
    if not os.path.isfile(real):
        raise SandboxUnavailable(f"python interpreter {requested!r} not found; pass python='/usr/bin/python3'")
    prefix = None if real.startswith("/usr/") else str(Path(real).parent.parent)
    if os.geteuid() == 0 and not _world_accessible(real):
        raise SandboxUnavailable(
            f"python interpreter {real} is not readable by uid {_NOBODY}, which the sandbox runs as; "
            "pass python='/usr/bin/python3' (apt-get install python3) or an interpreter outside /root"
        )
    st = os.stat(real)
    interp = Interpreter(real, prefix, f"{real}:{st.st_size}:{st.st_mtime_ns}")
    _interp_cache[requested] = interp
    return interp


# --------------------------------------------------------------------------- command lines


def _drop_privileges(argv: list[str]) -> tuple[list[str], dict[str, Any]]:
    """The command line and Popen arguments that start ``argv`` as uid/gid 65534 when we are root.

    setpriv (util-linux) is preferred over Popen(user=...): Popen must then fork() instead of
    vfork(), which copies the page tables of the whole host process, measured at 150 ms per
    execution with 3 GiB resident (models loaded) against 1 ms for the extra exec of setpriv.
    ``--no-new-privs`` also stops setuid binaries from regaining root (this matters in unsafe mode,
    where /usr/bin/su and friends are reachable). No Python preexec_fn is used either way: it is
    unsafe with the worker threads of run_many.
    """
    if os.geteuid() != 0:
        return argv, {}
    setpriv = _setpriv_path()
    if setpriv is not None:
        return [setpriv, f"--reuid={_NOBODY}", f"--regid={_NOBODY}", "--clear-groups", "--no-new-privs", "--"] + argv, {}
    return argv, {"user": _NOBODY, "group": _NOBODY, "extra_groups": []}


def _setpriv_path() -> str | None:
    for path in ("/usr/bin/setpriv", "/bin/setpriv"):
        if os.access(path, os.X_OK):
            return path
    return None


def _env(tmp: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": tmp, "TMPDIR": tmp, "PYTHONHASHSEED": "0"}


def _launcher_argv(interp: Interpreter, lim: Limits, started_fd: int) -> list[str]:
    return [interp.path, "-S", "-B", "-X", "utf8", "-c", _LAUNCHER, str(lim.memory_mb), str(lim.cpu_s),
            str(lim.max_file_mb), str(lim.max_procs), str(lim.max_open_files), str(started_fd)]


def _bwrap_argv(bwrap: str, interp: Interpreter, lim: Limits, file_fds: list[tuple[int, str]],
                info_fd: int, seccomp_fd: int | None, started_fd: int, work_mount: str | None,
                block_fd: int | None = None) -> list[str]:
    # --info-fd: bwrap writes the host pid of the namespace's PID 1 there; see _ProcessTree.
    # --block-fd: PID 1 waits there, after its set-up and before it forks the program, until the
    # host has moved it into the execution's cgroup leaf (see _join_leaf).
    block = ["--block-fd", str(block_fd)] if block_fd is not None else []
    argv = [bwrap, "--info-fd", str(info_fd), *block, "--unshare-all", "--unshare-user", "--disable-userns",
            "--die-with-parent", "--new-session",
            "--uid", str(_NOBODY), "--gid", str(_NOBODY),
            "--ro-bind", "/usr", "/usr"]
    for name in ("bin", "lib", "lib64", "sbin"):
        # On merged-/usr systems these are symlinks; on others they are real directories.
        top = f"/{name}"
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    if interp.prefix is not None:
        argv += ["--ro-bind", interp.prefix, interp.prefix]
    # No /proc: programs do not need it, it would show host facts, and mounting it costs time.
    # Only the harmless character devices, not bwrap's --dev (an unsized tmpfs writable by the
    # sandbox user, with /dev/shm and ptys): fewer mounts, and the work dir stays the only
    # writable place. /dev itself is a directory of the read-only root.
    for dev in ("null", "zero", "full", "random", "urandom"):
        argv += ["--dev-bind", f"/dev/{dev}", f"/dev/{dev}"]
    if work_mount is not None:  # the host's tmpfs with an inode cap (accounting.WorkMount)
        argv += ["--bind", work_mount, _SANDBOX_CWD]
    else:
        argv += ["--size", str(lim.tmpfs_mb << 20), "--tmpfs", _SANDBOX_CWD]
    made_dirs: set[str] = set()
    for fd, rel in file_fds:
        for parent in reversed(Path(rel).parents[:-1]):
            d = f"{_SANDBOX_CWD}/{parent}"
            if d not in made_dirs:
                argv += ["--dir", d]
                made_dirs.add(d)
        argv += ["--file", str(fd), f"{_SANDBOX_CWD}/{rel}"]
    # The root is a tmpfs that bwrap built, writable by the sandbox user and unsized: freeze it
    # (non-recursive, so the work dir below stays writable).
    argv += ["--remount-ro", "/", "--chdir", _SANDBOX_CWD, "--clearenv"]
    for k, v in _env(_SANDBOX_CWD).items():
        argv += ["--setenv", k, v]
    if seccomp_fd is not None:
        # bwrap installs it right before exec'ing the launcher: bwrap's own set-up is not filtered
        argv += ["--seccomp", str(seccomp_fd)]
    return argv + ["--"] + _launcher_argv(interp, lim, started_fd)


def _check_files(files: Mapping[str, str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, content in (files or {}).items():
        p = Path(name)
        if p.is_absolute() or ".." in p.parts or not p.parts or name == "main.py":
            raise ValueError(f"files: {name!r} must be a relative path inside the work dir, not main.py")
        out[str(p)] = content
    return out


def _memfd(data: bytes, name: str) -> int:
    # An in-memory file: bwrap copies from it, stdin reads from it; no host disk, no pipe deadlock.
    fd = os.memfd_create(name, 0)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


# --------------------------------------------------------------------------- availability


_check_lock = threading.Lock()
_checked: dict[str, str | None] = {}  # bwrap path + interpreter -> None if fine, else the error


def _bwrap_path() -> str:
    path = shutil.which("bwrap") or ("/usr/bin/bwrap" if os.path.exists("/usr/bin/bwrap") else None)
    if path is None:
        raise SandboxUnavailable(
            "bubblewrap (bwrap) is not installed: run `apt-get install bubblewrap` (or your distribution's "
            "bubblewrap package), or pass unsafe=True / --unsafe-no-sandbox to run without isolation"
        )
    return path


def ensure_available(python: str | None = None) -> None:
    """Raise `SandboxUnavailable` unless a trivial program runs correctly inside bwrap here."""
    bwrap = _bwrap_path()
    interp = resolve_interpreter(python)
    key = f"{bwrap}|{interp.identity}"
    with _check_lock:
        if key not in _checked:
            res = _run(b"import sys; sys.stdout.write('ok')", None, {}, resolve_limits(
                timeout_s=30.0, memory_mb=1024, cpu_s=None, max_output_bytes=1 << 16, max_procs=16,
                max_file_mb=1, max_open_files=64), interp, bwrap, "auto")
            _checked[key] = None if (res.status == "ok" and res.stdout == "ok") else (
                f"status={res.status} exit={res.exit_code} stderr={res.stderr.strip()[-400:]!r}")
        error = _checked[key]
    if error is not None:
        raise SandboxUnavailable(
            f"bubblewrap is installed but its self-check failed ({error}); it needs unprivileged user "
            "namespaces (sysctl kernel.unprivileged_userns_clone=1 / user.max_user_namespaces > 0). "
            "Fix that, or pass unsafe=True / --unsafe-no-sandbox to run without isolation"
        )


# --------------------------------------------------------------------------- running


def execute(
    program: str,
    *,
    stdin: str | None = None,
    timeout_s: float = 10.0,
    memory_mb: int = 1024,
    cpu_s: float | None = None,
    max_output_bytes: int = 1 << 20,
    max_procs: int = 64,
    max_file_mb: int = 16,
    max_open_files: int = 256,
    python: str | None = None,
    unsafe: bool = False,
    files: Mapping[str, str] | None = None,
    accounting: str = "auto",
    cancel: threading.Event | None = None,
) -> ExecResult:
    """Run ``program`` as ``main.py`` in a fresh sandbox and return how it ended.

    ``stdin`` is fed in full (None = empty). ``timeout_s`` is wall clock, enforced by the host;
    ``cpu_s`` defaults to ceil(timeout_s)+1. ``memory_mb`` is the address-space limit per process
    (0 = none). At most ``max_output_bytes`` of each of stdout and stderr is kept (decoded as UTF-8
    with replacement). ``files`` are extra text files placed next to main.py. ``accounting``:
    "auto" = a cgroup leaf and an inode-capped work dir where the machine allows them (see
    `bonbench_sandbox.accounting`), "rlimit" = rlimits only (the fallback, forced; for comparisons).
    Raises `SandboxUnavailable` when bubblewrap cannot be used and ``unsafe`` is False, and
    `Cancelled` (after killing the program) within half a second of ``cancel`` being set.
    """
    if accounting not in ("auto", "rlimit"):
        raise ValueError(f"accounting must be 'auto' or 'rlimit', not {accounting!r}")
    lim = resolve_limits(timeout_s=timeout_s, memory_mb=memory_mb, cpu_s=cpu_s, max_output_bytes=max_output_bytes,
                         max_procs=max_procs, max_file_mb=max_file_mb, max_open_files=max_open_files)
    extra = _check_files(files)
    interp = resolve_interpreter(python)
    stdin_bytes = stdin.encode("utf-8") if stdin is not None else None
    if unsafe:
        return _run(program.encode("utf-8"), stdin_bytes, extra, lim, interp, None, accounting, cancel)
    ensure_available(python)
    for attempt in range(_EAGAIN_TRIES):
        result = _run(program.encode("utf-8"), stdin_bytes, extra, lim, interp, _bwrap_path(), accounting, cancel)
        # bwrap could not fork its PID 1 (EAGAIN: a busy host, or processes of the previous execution
        # still leaving a pooled cgroup): no program code ran, so running it again is safe
        if result.status != "sandbox_error" or "Resource temporarily unavailable" not in result.stderr:
            break
        time.sleep(0.05 * (attempt + 1))
    return result


def accounting_mode(accounting: str = "auto") -> str:
    """The accounting an execution with this setting gets here: "cgroup2", "cgroup1" or "rlimit"."""
    return "rlimit" if accounting == "rlimit" else _acct.hierarchy().mode


def _run(program: bytes, stdin: bytes | None, files: dict[str, str], lim: Limits, interp: Interpreter,
         bwrap: str | None, accounting: str, cancel: threading.Event | None = None) -> ExecResult:
    fds: list[int] = []
    workdir: str | None = None
    where = _acct.hierarchy() if accounting == "auto" else _acct.Hierarchy("rlimit")
    if where.mode != "rlimit" and _setpriv_path() is None:
        # without setpriv the uid drop happens inside Popen, before /bin/sh could join the leaf as root
        where = _acct.Hierarchy("rlimit", reason="setpriv (util-linux) is missing")
    leaf: _acct.Leaf | None = None
    mount: _acct.WorkMount | None = None
    try:
        if where.mode != "rlimit":
            try:
                leaf = _acct.acquire_leaf(where, lim.memory_mb, lim.max_procs)
                if bwrap is not None:
                    mount = _acct.acquire_mount(lim.tmpfs_mb, _NOBODY)
            except OSError as exc:
                return ExecResult("sandbox_error", None, "", f"bonbench-sandbox: accounting set-up failed: {exc}", 0.0,
                                  accounting=where.mode)
        started_r, started_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        fds += [started_r, started_w]
        stdin_fd = _memfd(stdin, "stdin") if stdin is not None else subprocess.DEVNULL
        if stdin is not None:
            fds.append(stdin_fd)
        info_r: int | None = None
        if bwrap is not None:
            file_fds = []
            for rel, data in [("main.py", program)] + [(k, v.encode("utf-8")) for k, v in files.items()]:
                fd = _memfd(data, "file")
                fds.append(fd)
                file_fds.append((fd, rel))
            seccomp_fd = None
            if _SECCOMP is not None:
                seccomp_fd = _memfd(_SECCOMP, "seccomp")
                fds.append(seccomp_fd)
            info_r, info_w = os.pipe2(os.O_CLOEXEC)
            fds.append(info_r)  # info_w is closed by _supervise right after the start
            block: tuple[int, ...] = ()
            if leaf is not None:
                block_r, block_w = os.pipe2(os.O_CLOEXEC)
                fds += [block_r, block_w]
                block = (block_r,)
            argv, cwd, env = _bwrap_argv(bwrap, interp, lim, file_fds, info_w, seccomp_fd, started_w,
                                         str(mount.path) if mount is not None else None,
                                         block[0] if block else None), None, None
            # info_w must stay last: _supervise closes pass_fds[-1] once bwrap has started
            pass_fds = (tuple(fd for fd, _ in file_fds) + ((seccomp_fd,) if seccomp_fd is not None else ())
                        + block + (started_w, info_w))
        else:
            workdir = _make_workdir(program, files)
            argv, cwd, env = _launcher_argv(interp, lim, started_w), workdir, _env(workdir)
            pass_fds = (started_w,)
        full_argv, priv = _drop_privileges(argv)
        result = supervise(full_argv, priv, cwd, env, stdin_fd, pass_fds, info_r, lim.timeout_s, lim.max_output_bytes,
                           leaf, started_r, cancel, block_w if bwrap is not None and leaf is not None else None)
        return dataclasses.replace(result, accounting=where.mode)
    finally:
        _acct.release(leaf, mount)  # in the background: nothing runs in them any more
        for fd in fds:
            os.close(fd)
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)


def _make_workdir(program: bytes, files: dict[str, str]) -> str:
    workdir = tempfile.mkdtemp(prefix="bonbench-sbx-")
    Path(workdir, "main.py").write_bytes(program)
    for rel, content in files.items():
        target = Path(workdir, rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    if os.geteuid() == 0:
        for root, dirs, names in os.walk(workdir):
            for n in [root] + [os.path.join(root, x) for x in dirs + names]:
                os.chown(n, _NOBODY, _NOBODY)
    return workdir
