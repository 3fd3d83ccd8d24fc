"""Keep an inference engine's own output (vLLM's INFO/WARNING logs, torch warnings, tqdm bars, C++
prints) out of the user's view, in a log file, unless ``--debug``.

``engine_output(name)`` is a context manager around the noisy part (importing vLLM and building the
engine: ~15 lines of chatter before the first progress bar). It points file descriptors 1 and 2 at
``$BONBENCH_CACHE/logs/<name>-<time>-<pid>.log`` (so output written by C/C++ code or by handlers bound
at import time is caught too, which ``contextlib.redirect_stderr`` would miss) and sends Python
warnings there. Real errors stay visible: an exception leaving the block restores the descriptors
first and prints the log's last lines on stderr with its path, then propagates unchanged; and
``quiet_log_level()`` keeps vLLM's logger at ERROR, not silent.

``BONBENCH_DEBUG=1`` (set by the CLI's ``--debug``) turns all of this off: everything goes to the
terminal as the engine writes it.

This module does not configure engines; ``vllm.py`` asks it for the block. ``debug`` and
``quiet_log_level`` live in ``bonbench.core.engines``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bonbench.core.cache import cache_dir
from bonbench.core.engines import debug
from bonbench.core.errors import BonbenchError

TAIL_LINES = 20


def _log_path(name: str) -> Path:
    folder = cache_dir("logs")
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{name}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.log"


def _tail(path: Path, lines: int = TAIL_LINES) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if line.strip()][-lines:]


@contextlib.contextmanager
def engine_output(name: str) -> Iterator[Path | None]:
    """Send everything written inside the block to a log file (yielded), or nothing with ``--debug``
    (yields None). On an exception, the log's tail goes to stderr before it propagates."""
    if debug():
        yield None
        return
    try:
        path = _log_path(name)
        log = open(path, "ab", buffering=0)
    except OSError:  # no writable cache: better chatter than a failed run
        yield None
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    shown = warnings.showwarning

    def to_log(message: Any, category: type[Warning], filename: str, lineno: int, file: Any = None,
               line: str | None = None) -> None:
        log.write(warnings.formatwarning(message, category, filename, lineno, line).encode("utf-8", "replace"))

    failed = False
    try:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        warnings.showwarning = to_log
        yield path
    except BonbenchError:
        raise  # already one line naming the fix (a broken install, a bad setting): no log tail
    except BaseException:
        failed = True  # a crash inside the engine: its own last words matter
        raise
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        warnings.showwarning = shown
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
        log.close()
        if failed:
            tail = _tail(path)
            if tail:
                print(f"{name} engine log ({path}), last {len(tail)} lines:", file=sys.stderr)
                for line in tail:
                    print(f"  {line}", file=sys.stderr)
