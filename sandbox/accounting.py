"""Per-execution resource accounting the kernel enforces: a cgroup and an inode-capped work dir.

What it sets up for one execution, where the machine allows it:

* **A cgroup leaf** of its own, holding every process of the sandbox: ``memory`` limit =
  ``memory_mb`` (user memory, shared memory such as memfd and SysV segments, tmpfs pages and the
  kernel objects charged to the cgroup such as inodes and dentries), no swap, and a ``pids`` limit.
  When the limit is hit the kernel's OOM killer ends a process in the leaf, and the execution is
  reported as ``memory``. cgroup v2 is used when the controllers can be delegated below this
  process's cgroup (``memory.max``, ``memory.swap.max``, ``pids.max``, ``cgroup.kill``,
  ``memory.events``); else cgroup v1 when its ``memory`` hierarchy is writable (root on a v1 or
  hybrid host: ``memory.limit_in_bytes``, ``memory.memsw.limit_in_bytes``, ``pids.max``,
  ``memory.oom_control``). The leaf is joined before bubblewrap starts (``/bin/sh`` writes its own
  pid to ``cgroup.procs`` and then execs the rest of the command line), so nothing of the
  sandbox runs outside it.
* **A work-dir tmpfs mounted by the host** (root only) with ``size`` and ``nr_inodes`` caps, bound
  into the sandbox as ``/tmp``; bubblewrap's own ``--tmpfs`` can cap the size but not the inodes.

Fallback (``mode == "rlimit"``: not root, or no writable cgroup hierarchy): only the rlimits
(address space per process, processes per sandbox) and bubblewrap's size-capped tmpfs apply, so
memory is bounded by ``max_procs x memory_mb`` plus the tmpfs, and shared memory, kernel objects
and inode counts are not bounded per execution. The mode is in every ``ExecResult.accounting``.

This module does not start or supervise processes (``execution`` does) and does not choose limits.
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import itertools
import os
import shutil
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

MODES = ("cgroup2", "cgroup1", "rlimit")
WORK_INODES = 4096  # inodes in the work dir: main.py, a few files; 310,000 empty files are refused
_EXTRA_PIDS = 4  # sh/setpriv/bwrap and bwrap's PID 1 live in the leaf too
_MS_NOSUID, _MS_NODEV = 2, 4
_counter = itertools.count()
_lock = threading.Lock()


@dataclass(frozen=True)
class Hierarchy:
    """Where this process may create execution leaves: ``mode`` and the parent directories."""

    mode: str
    memory: Path | None = None  # parent of the memory leaves (v2: of all leaves)
    pids: Path | None = None  # v1 only: parent of the pids leaves
    reason: str = ""


def _own_cgroup(controller: str) -> str | None:
    """This process's cgroup path for a v1 controller, or for v2 when ``controller`` is ""."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, names, path = line.split(":", 2)
        if (controller == "" and names == "") or controller in names.split(","):
            return path
    return None


def _write(path: Path, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _try_v2() -> Hierarchy | None:
    root = Path("/sys/fs/cgroup")
    own = _own_cgroup("")
    if own is None or not (root / "cgroup.controllers").exists():
        return None
    base = root / own.lstrip("/")
    try:
        if not {"memory", "pids"} <= set((base / "cgroup.controllers").read_text().split()):
            return None
        parent = base / f"bonbench-{os.getpid()}"
        parent.mkdir(exist_ok=True)
        # a cgroup with processes cannot hand controllers to children unless it is the root; this
        # write fails with EBUSY then, and the machine falls back to v1 or rlimits
        _write(base / "cgroup.subtree_control", "+memory +pids")
        _write(parent / "cgroup.subtree_control", "+memory +pids")
    except OSError:
        return None
    return Hierarchy("cgroup2", memory=parent)


def _try_v1() -> Hierarchy | None:
    mem_own, pids_own = _own_cgroup("memory"), _own_cgroup("pids")
    mem_root, pids_root = Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup/pids")
    if mem_own is None or not (mem_root / "memory.limit_in_bytes").exists():
        return None
    try:
        mem = mem_root / mem_own.lstrip("/") / f"bonbench-{os.getpid()}"
        mem.mkdir(exist_ok=True)
        pids = None
        if pids_own is not None and (pids_root / "cgroup.procs").exists():
            pids = pids_root / pids_own.lstrip("/") / f"bonbench-{os.getpid()}"
            pids.mkdir(exist_ok=True)
    except OSError:
        return None
    return Hierarchy("cgroup1", memory=mem, pids=pids)


_detected: dict[int, Hierarchy] = {}


def hierarchy() -> Hierarchy:
    """The best accounting this process can use (detected once per process)."""
    pid = os.getpid()
    with _lock:
        if pid not in _detected:
            if os.geteuid() != 0:
                found: Hierarchy | None = None
                reason = "not root: cgroup leaves and work-dir mounts need root"
            else:
                found = _try_v2() or _try_v1()
                reason = "no writable cgroup v2 (memory, pids delegated) or v1 memory hierarchy"
            _detected[pid] = found or Hierarchy("rlimit", reason=reason)
        return _detected[pid]


class Leaf:
    """A cgroup leaf for one execution at a time (v1: a memory leaf and a pids leaf).

    Leaves are reused (`acquire` / `release`): creating and destroying a memory cgroup per
    execution costs the kernel more than the execution's accounting itself. A leaf goes back to
    the pool only once it holds no process; its OOM-kill counter is read before and after each use.
    """

    def __init__(self, where: Hierarchy) -> None:
        assert where.memory is not None
        self.mode = where.mode
        self.where = where
        self.owner = os.getpid()  # a forked child (Ray, multiprocessing) must not use or remove these
        name = f"x{next(_counter)}"
        self.dirs = [where.memory / name] + ([where.pids / name] if where.pids is not None else [])
        self.limits: tuple[int, int] | None = None
        self._oom_base = 0
        made: list[Path] = []
        try:
            for d in self.dirs:
                d.mkdir()
                made.append(d)
        except BaseException:
            for d in reversed(made):
                _rmdir(d)
            raise

    def set_limits(self, memory_mb: int, max_procs: int) -> None:
        if self.limits == (memory_mb, max_procs):
            return
        mem, pids = self.dirs[0], self.dirs[-1]
        limit = str(memory_mb << 20) if memory_mb > 0 else ("max" if self.mode == "cgroup2" else "-1")
        if self.mode == "cgroup2":
            _write(mem / "memory.max", limit)
            _write(mem / "memory.swap.max", "0")
        else:
            # memsw (memory + swap) may never be below the memory limit: raise it first, lower it last
            inf = float("inf")
            current = inf if self.limits is None or self.limits[0] <= 0 else self.limits[0]
            raising = (inf if memory_mb <= 0 else memory_mb) > current
            order = ["memory.memsw.limit_in_bytes", "memory.limit_in_bytes"] if raising else \
                ["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"]
            for name in order:
                try:
                    _write(mem / name, limit)
                except FileNotFoundError:
                    pass  # memsw exists only with swap accounting; without it there is no swap to bound
        if self.mode == "cgroup2" or self.where.pids is not None:
            _write(pids / "pids.max", str(max_procs + _EXTRA_PIDS))
        self.limits = (memory_mb, max_procs)

    @property
    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def _oom_count(self) -> int:
        name = "memory.events" if self.mode == "cgroup2" else "memory.oom_control"
        try:
            for line in (self.dirs[0] / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def begin(self) -> None:
        self._oom_base = self._oom_count()

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of this leaf for exceeding the memory limit."""
        return self._oom_count() > self._oom_base

    def pids(self) -> list[int]:
        out: list[int] = []
        for d in self.dirs:
            try:
                out += [int(p) for p in (d / "cgroup.procs").read_text().split()]
            except (OSError, ValueError):
                pass
        return out

    def _pids_current(self) -> int:
        try:
            return int((self.dirs[-1] / "pids.current").read_text())
        except (OSError, ValueError):
            return 0  # no pids controller here: nothing counts against a limit

    def kill(self) -> None:
        """SIGKILL every process in the leaf (v2: ``cgroup.kill``; v1: each pid listed)."""
        if self.mode == "cgroup2":
            try:
                _write(self.dirs[0] / "cgroup.kill", "1")
            except OSError:
                pass
            return
        for _ in range(100):  # a member may be forking: repeat until the list is empty
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.001)

    def close(self) -> None:
        """Back to the pool when empty (the sandbox's processes take a moment to leave), else removed."""
        for _ in range(200):
            # pids.current too: an exiting task leaves cgroup.procs before it stops counting against
            # pids.max, and the next execution in this leaf would find fork() failing with EAGAIN
            if not self.pids() and self._pids_current() == 0:
                with _lock:
                    _free_leaves.setdefault(self.where, []).append(self)
                return
            time.sleep(0.005)
        self.destroy()

    def destroy(self) -> None:
        self.kill()
        for d in reversed(self.dirs):
            _rmdir(d)


_free_leaves: dict[Hierarchy, list[Leaf]] = {}


def acquire_leaf(where: Hierarchy, memory_mb: int, max_procs: int) -> Leaf:
    """An empty leaf with these limits (from the pool, else new). Give it back with `release`."""
    with _lock:
        free = [x for x in _free_leaves.get(where, []) if x.owner == os.getpid()]
        leaf = free[-1] if free else None
        if leaf is not None:
            _free_leaves[where].remove(leaf)
    if leaf is None:
        leaf = Leaf(where)
    try:
        leaf.set_limits(memory_mb, max_procs)
    except OSError:
        leaf.destroy()  # e.g. a lower limit the kernel cannot reclaim down to: start afresh
        leaf = Leaf(where)
        leaf.set_limits(memory_mb, max_procs)
    leaf.begin()
    return leaf


def _rmdir(path: Path) -> None:
    # a killed process leaves its cgroup a moment after it is reaped; give it a bounded while
    for _ in range(200):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                return
            time.sleep(0.005)


_libc = None


def _mount_fns() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


class WorkMount:
    """A host tmpfs with size and inode caps, owned by uid 65534, for one execution's work dir.

    Mounts are reused (`acquire_mount` / `release`): an unmount waits for the kernel (~1 ms). Before
    reuse every entry is removed and the root's mode, owner and extended attributes are reset; a
    mount that does not come back exactly empty is unmounted instead.
    """

    def __init__(self, size_mb: int, uid: int) -> None:
        base = Path(f"/tmp/bonbench-work-{os.getpid()}")
        with _lock:
            if not base.is_dir():
                base.mkdir(mode=0o711, exist_ok=True)
        self.size_mb, self.uid = size_mb, uid
        self.owner = os.getpid()
        self.path = base / f"w{next(_counter)}"
        self.path.mkdir(mode=0o700)
        opts = f"size={size_mb}m,nr_inodes={WORK_INODES},mode=0700,uid={uid},gid={uid}".encode()
        libc = _mount_fns()
        if libc.mount(b"tmpfs", str(self.path).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, opts) != 0:
            err = ctypes.get_errno()
            self.path.rmdir()
            raise OSError(err, f"cannot mount the work-dir tmpfs: {os.strerror(err)}")

    def _reset(self) -> bool:
        try:
            for entry in os.scandir(self.path):
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
            for name in os.listxattr(self.path):
                os.removexattr(self.path, name)
            os.chown(self.path, self.uid, self.uid)
            os.chmod(self.path, 0o700)
            st = os.stat(self.path)
            return (not os.listdir(self.path) and not os.listxattr(self.path)
                    and (st.st_mode & 0o7777, st.st_uid, st.st_gid) == (0o700, self.uid, self.uid))
        except OSError:
            return False

    def close(self) -> None:
        if self._reset():
            with _lock:
                _free_mounts.setdefault((self.size_mb, self.uid), []).append(self)
            return
        self.destroy()

    def destroy(self) -> None:
        libc = _mount_fns()
        if libc.umount2(str(self.path).encode(), 0) != 0:
            libc.umount2(str(self.path).encode(), 2)  # MNT_DETACH: busy only if something leaked
        try:
            self.path.rmdir()
        except OSError:
            pass


_free_mounts: dict[tuple[int, int], list[WorkMount]] = {}


def acquire_mount(size_mb: int, uid: int) -> WorkMount:
    """An empty work-dir tmpfs of this size (from the pool, else new). Give it back with `release`."""
    with _lock:
        free = [x for x in _free_mounts.get((size_mb, uid), []) if x.owner == os.getpid()]
        mount = free[-1] if free else None
        if mount is not None:
            _free_mounts[(size_mb, uid)].remove(mount)
    return mount if mount is not None else WorkMount(size_mb, uid)


def _destroy_pools() -> None:
    pid = os.getpid()
    with _lock:
        leaves = [leaf for free in _free_leaves.values() for leaf in free if leaf.owner == pid]
        mounts = [m for free in _free_mounts.values() for m in free if m.owner == pid]
        _free_leaves.clear()
        _free_mounts.clear()
    for item in leaves + mounts:
        item.destroy()


_reaper_lock = threading.Condition()
_to_release: list[Leaf | WorkMount] = []
_reaper: threading.Thread | None = None


def release(*items: Leaf | WorkMount | None) -> None:
    """Return leaves and work dirs to their pools in a background thread: a leaf stays busy a
    moment after its last process is reaped, and emptying a work dir takes a few system calls;
    the next execution should wait for neither. The processes are already dead when this is called."""
    global _reaper
    with _reaper_lock:
        _to_release.extend(i for i in items if i is not None)
        if _reaper is None or not _reaper.is_alive():
            _reaper = threading.Thread(target=_reap_forever, name="bonbench-sandbox-reaper", daemon=True)
            _reaper.start()
        _reaper_lock.notify()


def drain(timeout_s: float = 30.0) -> None:
    """Wait until every released leaf and mount is gone (tests; the end of the process)."""
    end = time.monotonic() + timeout_s
    with _reaper_lock:
        while (_to_release or _busy[0]) and time.monotonic() < end:
            _reaper_lock.wait(0.05)


_busy = [0]


def _reap_forever() -> None:
    while True:
        with _reaper_lock:
            while not _to_release:
                _reaper_lock.wait()
            item = _to_release.pop(0)
            _busy[0] += 1
        try:
            item.close()
        except Exception:  # noqa: BLE001 - a leftover empty leaf or mount must not kill the reaper
            pass
        finally:
            with _reaper_lock:
                _busy[0] -= 1
                _reaper_lock.notify_all()


def _at_exit() -> None:
    drain(10.0)
    _destroy_pools()
    for where in _detected.values():  # the per-process parents, empty by now
        for d in (where.memory, where.pids):
            if d is not None:
                _rmdir(d)
    try:
        Path(f"/tmp/bonbench-work-{os.getpid()}").rmdir()
    except OSError:
        pass


atexit.register(_at_exit)


def wrap_join(argv: list[str], leaf: Leaf | None) -> list[str]:
    """``argv`` started inside ``leaf``: /bin/sh writes its pid to each ``cgroup.procs``, then execs."""
    if leaf is None:
        return argv
    files = leaf.procs_files
    # dash exports PWD to what it execs; the environment must stay exactly the one execution set
    script = ("unset PWD && " + " && ".join(f'echo $$ > "${i + 1}"' for i in range(len(files)))
              + f' && shift {len(files)} && exec "$@"')
    return ["/bin/sh", "-c", script, "sh", *files, *argv]
