"""Supervision of one started sandbox: output capture, wall clock, cancellation, the cgroup join,
reaping of the whole process tree, and the classification of how it ended (``ExecResult``).

`execution.execute` builds the command line and calls `supervise`; this module starts exactly that
command and knows nothing of bubblewrap's arguments, interpreters or limits other than the wall
clock and the output cap.
"""

from __future__ import annotations

import dataclasses
import json
import os
import selectors
import signal as _signal
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import bonbench_sandbox.accounting as _acct

_CHUNK = 1 << 16


class Cancelled(Exception):
    """The execution was stopped because its ``cancel`` event was set (Ctrl-C); it has no result."""


@dataclass(frozen=True)
class ExecResult:
    """What one execution did. ``status`` is "ok" only for exit code 0 within every limit.

    ``exit_code`` is the process exit code, 128+N after death by signal N (as a shell reports it),
    ``None`` when the host killed it (timeout, output flood). ``signal`` is N. bubblewrap itself
    reports death by signal N as exit code 128+N, so a program that calls ``sys.exit(137)`` is
    reported as killed by signal 9.
    """

    status: str
    exit_code: int | None
    stdout: str
    stderr: str
    wall_s: float
    signal: int | None = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    accounting: str = ""  # "cgroup2" | "cgroup1" | "rlimit": what bounded memory (see accounting.py)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> ExecResult:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in row.items() if k in names})



class _Capture:
    """One output stream: keeps the first ``cap`` bytes, counts the rest."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.buf = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        room = self.cap - len(self.buf)
        if room > 0:
            self.buf += chunk[:room]
        self.total += len(chunk)

    @property
    def truncated(self) -> bool:
        return self.total > self.cap

    def text(self) -> str:
        return self.buf.decode("utf-8", errors="replace")


class _ProcessTree:
    """The started process (bwrap, or the launcher in unsafe mode) and everything under it.

    `kill()` SIGKILLs the process group and returns only once the sandbox's processes are gone.
    Killing bwrap's group suffices for containment (``--die-with-parent`` kills the namespace's
    PID 1 and the kernel then kills every process in the PID namespace), but that happens
    asynchronously, and when the program exits normally bwrap returns as soon as *its* child
    exits while orphans (``setsid`` daemons) may still run under PID 1. So the host also holds a
    pidfd on PID 1 (its pid comes from bwrap's ``--info-fd``), kills it, and waits for it: PID 1
    finishes exiting only after everything in its namespace is gone.
    """

    def __init__(self, proc: subprocess.Popen[bytes], leaf: _acct.Leaf | None = None) -> None:
        self.proc = proc
        self.leaf = leaf
        self.init_pidfd: int | None = None
        self._info = bytearray()

    def feed_info(self, chunk: bytes) -> None:
        self._info += chunk

    def info_text(self) -> str:
        return self._info.decode("utf-8", "replace")

    def info_done(self) -> None:
        try:
            pid = int(json.loads(self._info.decode())["child-pid"])
            self.init_pidfd = os.pidfd_open(pid)
        except (ValueError, KeyError, OSError):
            pass  # PID 1 already gone (so its namespace is empty), or bwrap failed before starting it

    def has_exited(self) -> bool:
        # WNOWAIT: look without reaping, so the pid (and process-group id) stays ours until kill().
        try:
            return os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, _signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.init_pidfd is not None:
            fd, self.init_pidfd = self.init_pidfd, None
            try:
                _signal.pidfd_send_signal(fd, _signal.SIGKILL)
                sel = selectors.DefaultSelector()
                try:
                    sel.register(fd, selectors.EVENT_READ)
                    sel.select(timeout=5.0)
                finally:
                    sel.close()
            except OSError:
                pass  # already exited
            finally:
                os.close(fd)

    def reap(self, sweep_group: bool) -> int:
        self.kill()  # before reaping: the group id cannot be reused while the leader is a zombie
        code = self.proc.wait()
        if sweep_group and self.leaf is not None:
            # unsafe mode: the leaf holds every descendant, setsid escapees included
            self.leaf.kill()
        if sweep_group:
            # Unsafe mode has no PID namespace to wait on: SIGKILL is delivered asynchronously and
            # a member may be mid-fork, so repeat until the group is empty (bounded). A pgid stays
            # reserved while any member lives, so this cannot hit an unrelated group until ESRCH.
            end = time.monotonic() + 5.0
            while time.monotonic() < end:
                try:
                    os.killpg(self.proc.pid, _signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    break
                time.sleep(0.005)
        return code


def supervise(full_argv: list[str], priv: dict[str, Any], cwd: str | None, env: dict[str, str] | None,
              stdin_fd: int, pass_fds: tuple[int, ...], info_fd: int | None, timeout_s: float, max_output_bytes: int,
              leaf: _acct.Leaf | None, started_fd: int, cancel: threading.Event | None = None,
              block_fd: int | None = None) -> ExecResult:
    """Start ``full_argv`` (with Popen arguments ``priv``), enforce the wall clock and the output
    caps, watch for cancellation, join ``leaf`` (bwrap: through ``block_fd``; unsafe: /bin/sh),
    reap everything and classify the end (see the module docstring of ``execution``)."""
    start = time.monotonic()
    deadline = start + timeout_s
    try:
        if block_fd is None:  # unsafe mode: /bin/sh joins the leaf as root, before setpriv
            full_argv = _acct.wrap_join(full_argv, leaf)
        proc = subprocess.Popen(full_argv, stdin=stdin_fd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                cwd=cwd, env=env if env is not None else {}, pass_fds=pass_fds,
                                start_new_session=True, **priv)
    except OSError as exc:
        return ExecResult("sandbox_error", None, "", f"cannot start sandbox: {exc}", time.monotonic() - start)
    finally:
        if info_fd is not None:
            os.close(pass_fds[-1])  # our copy of the write end: EOF must come when bwrap closes its own
    tree = _ProcessTree(proc, leaf)
    join_error = None
    if block_fd is not None and leaf is not None and info_fd is not None:
        join_error = _join_leaf(tree, info_fd, leaf, block_fd, deadline, cancel)
        if join_error is not None:
            tree.kill()  # nothing may run outside the leaf
    out, err = _Capture(max_output_bytes), _Capture(max_output_bytes)
    kill_at = 2 * max_output_bytes
    timed_out = flooded = False
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    streams = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    for fd in streams:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    if info_fd is not None:
        sel.register(info_fd, selectors.EVENT_READ)
    # A pidfd becomes readable when the process exits, so exit is noticed without polling.
    pidfd = os.pidfd_open(proc.pid)
    sel.register(pidfd, selectors.EVENT_READ)
    exited_at: float | None = None
    cancelled = False
    try:
        while streams:
            now = time.monotonic()
            if cancel is not None and cancel.is_set():
                cancelled = True
                break
            if exited_at is None and tree.has_exited():
                exited_at = now
                # Orphans left behind (setsid daemons; in unsafe mode also plain children) would
                # hold the pipes open: end them now rather than wait for EOF.
                tree.kill()
            if exited_at is not None and now - exited_at > 0.5:
                break  # unsafe mode only: an escaped grandchild still holds a pipe
            if now >= deadline and exited_at is None:
                timed_out = True
                break
            wait = min(deadline - now, 0.5) if exited_at is None else 0.05
            for key, _ in sel.select(timeout=max(wait, 0.0)):
                fd = key.fd
                if fd == pidfd:
                    sel.unregister(pidfd)
                    continue
                try:
                    chunk = os.read(fd, _CHUNK)
                except BlockingIOError:
                    continue
                if fd == info_fd:
                    if chunk:
                        tree.feed_info(chunk)
                    else:
                        sel.unregister(fd)
                        tree.info_done()
                    continue
                if not chunk:
                    sel.unregister(fd)
                    del streams[fd]
                    continue
                cap = streams[fd]
                cap.feed(chunk)
                if cap.total > kill_at and not flooded:
                    flooded = True
                    tree.kill()
    finally:
        sel.close()
        os.close(pidfd)
        if info_fd is not None and tree.init_pidfd is None:
            # Killed before bwrap's info arrived, or bwrap failed: take it now if it is there.
            try:
                os.set_blocking(info_fd, False)
                tree.feed_info(os.read(info_fd, _CHUNK))
                tree.info_done()
            except OSError:
                pass
        returncode = tree.reap(sweep_group=info_fd is None)
        wall = time.monotonic() - start
        proc.stdout.close()
        proc.stderr.close()
    if cancelled:
        raise Cancelled("execution cancelled")
    if join_error is not None:
        return ExecResult("sandbox_error", None, out.text(), err.text() + f"bonbench-sandbox: {join_error}\n",
                          time.monotonic() - start)
    try:  # the launcher writes one byte here once its limits are set: it, not bwrap, ran the program
        launched = os.read(started_fd, 1) == b"1"
    except BlockingIOError:
        launched = False
    oom = leaf is not None and leaf.oom_killed()
    return _classify(returncode, out, err, wall, timed_out, flooded, launched, oom)


def _join_leaf(tree: _ProcessTree, info_fd: int, leaf: _acct.Leaf, block_fd: int, deadline: float,
               cancel: threading.Event | None = None) -> str | None:
    """Move bubblewrap's PID 1 into ``leaf`` while it waits on ``--block-fd``, then release it.

    PID 1 forks the program only after the release, so every process of the program is born in
    the leaf. The move (a cgroup migration, which waits for an RCU grace period on cgroup v1)
    overlaps with bubblewrap's own set-up instead of delaying the start. The info bytes read here
    stay in ``tree`` for `_ProcessTree.info_done`. Returns an error message, or None. A set
    ``cancel`` ends the wait within a second (a loaded machine can take seconds to start bwrap):
    the caller then sees it and raises `Cancelled`.
    """
    sel = selectors.DefaultSelector()
    try:
        sel.register(info_fd, selectors.EVENT_READ)
        while True:
            try:
                pid = int(json.loads(tree.info_text())["child-pid"])
                break
            except (ValueError, KeyError):
                pass
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "bubblewrap did not start the sandbox in time"
            if cancel is not None and cancel.is_set():
                return "cancelled before the sandbox started"
            if not sel.select(timeout=min(remaining, 1.0)):
                continue
            chunk = os.read(info_fd, _CHUNK)
            if not chunk:
                return None  # bwrap ended before starting the sandbox; its own error is on stderr
            tree.feed_info(chunk)
    finally:
        sel.close()
    try:
        for path in leaf.procs_files:
            with open(path, "w") as fh:
                fh.write(str(pid))
        os.write(block_fd, b"1")
    except OSError as exc:
        return f"cannot move the sandbox into its cgroup: {exc}"
    return None


def _classify(returncode: int, out: _Capture, err: _Capture, wall: float, timed_out: bool,
              flooded: bool, launched: bool = True, oom: bool = False) -> ExecResult:
    stdout, stderr = out.text(), err.text()
    trunc: dict[str, Any] = {"stdout_truncated": out.truncated, "stderr_truncated": err.truncated}
    if timed_out:
        return ExecResult("timeout", None, stdout, stderr, wall, _signal.SIGKILL, **trunc)
    if flooded or out.truncated or err.truncated:
        code: int | None = None if flooded else returncode
        return ExecResult("output_limit", code, stdout, stderr, wall, _signal.SIGKILL if flooded else None, **trunc)
    sig: int | None = None
    code = returncode
    if returncode < 0:  # unsafe mode: Popen reports death by signal N as -N; report it as bwrap does
        sig, code = -returncode, 128 - returncode
    elif 128 < returncode <= 128 + 64:  # bwrap reports death by signal N as 128 + N
        sig = returncode - 128
    if oom:  # the cgroup's limit was hit (even if the main process then exited 0)
        return ExecResult("memory", code, stdout, stderr, wall, sig, **trunc)
    if returncode == 0:
        return ExecResult("ok", 0, stdout, stderr, wall, **trunc)
    tail = stderr[-4000:]
    if not launched:
        # bwrap, the cgroup join or the launcher's limits failed before any program code ran; what
        # the program prints (a line starting with "bwrap:") cannot make it a sandbox error
        status = "sandbox_error"
    elif "MemoryError" in tail or sig == _signal.SIGSEGV and "Cannot allocate memory" in tail:
        status = "memory"
    elif sig == _signal.SIGXFSZ or "[Errno 27]" in tail or "[Errno 28]" in tail:
        status = "file_limit"
    elif sig == _signal.SIGXCPU:
        status = "timeout"
    elif sig is not None:
        status = "killed"
    else:
        status = "runtime_error"
    return ExecResult(status, code, stdout, stderr, wall, sig, **trunc)
