"""Build a folder once and share it: the atomic cache of the converted embedded model
(``bonbench.core.models``) and of the offline reward models (``bonbench.plugins.rewards``).

The build runs in a temporary folder next to the final one, writes a completion marker last and is
renamed into place; a folder whose marker
is missing or does not match what the caller expects is never trusted (it is deleted and rebuilt).
A file lock keeps two processes from building the same folder at once; the second one waits and
then reuses the first one's result.

This module knows nothing about what is built; callers pass the build function and the marker
they expect. It does not evict old folders.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeGuard

MARKER = "bonbench-complete.json"
ENV_CACHE = "BONBENCH_CACHE"


def cache_dir(kind: str) -> Path:
    """``$BONBENCH_CACHE/<kind>`` or ``~/.cache/bonbench/<kind>`` (``models``, ``rewards``)."""
    base = os.environ.get(ENV_CACHE)
    root = Path(base).expanduser() if base else Path.home() / ".cache" / "bonbench"
    return root / kind


def rewards_cache_root() -> Path:
    """Where the offline reward models are built (``cache_dir("rewards")``)."""
    return cache_dir("rewards")


def read_marker(folder: Path) -> dict[str, Any] | None:
    """The completion marker of ``folder``, or None when the folder is absent or unfinished."""
    try:
        marker = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) else None


def build_once(final: Path, expected: Mapping[str, Any], build: Callable[[Path], Mapping[str, Any]]) -> dict[str, Any]:
    """Return the marker of ``final``, building the folder first unless its marker agrees with
    ``expected`` on every key.

    ``build(tmp)`` fills a fresh temporary folder and returns extra marker fields (measurements,
    timings); the marker written is ``expected`` plus those fields plus ``seconds``.
    """
    marker = read_marker(final)
    if _agrees(marker, expected):
        return marker
    root = final.parent
    root.mkdir(parents=True, exist_ok=True)
    with _file_lock(root / f".{final.name}.lock"):
        marker = read_marker(final)
        if _agrees(marker, expected):  # another process finished while we waited
            return marker
        if final.exists():
            shutil.rmtree(final)  # unfinished, outdated, or built from other data
        for stale in root.glob(f".{final.name}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)  # safe: we hold the lock, nobody else builds
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=root))
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes it private; the cache is meant to be shared
        try:
            t0 = time.monotonic()
            extra = dict(build(tmp))
            marker = {**dict(expected), **extra, "seconds": round(time.monotonic() - t0, 1)}
            with open(tmp / MARKER, "w") as f:  # the marker last: its presence means "complete"
                json.dump(marker, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return marker


def _agrees(marker: dict[str, Any] | None, expected: Mapping[str, Any]) -> TypeGuard[dict[str, Any]]:
    return marker is not None and all(marker.get(k) == v for k, v in expected.items())


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with open(path, "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
