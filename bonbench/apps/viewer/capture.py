"""Warnings met by one thread, kept for its page: ``caught(fn)`` runs ``fn`` and returns the warnings it met.

The viewer renders pages and reads runs in several threads at once. ``warnings.catch_warnings``
swaps the process's warning state on the way in and out, so two threads inside it at once corrupt
each other's; the viewer used to take one lock around it, which made every run's pages and readings
wait for each other. Here one hook is installed for the process (``warnings.showwarning``, and the
``always`` filter, so that a page meets its warning each time, not once per process) and each
thread keeps a stack of lists: a warning goes to its own thread's innermost ``caught``, or where
warnings went before when its thread captures none.

What it does not do: print or deduplicate warnings across pages (``site`` does).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any

_sinks = threading.local()  # each thread's stack of lists its warnings go to (``caught``)
_installing = threading.Lock()


def _show(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: str | None = None) -> None:
    """``warnings.showwarning`` while a viewer runs: a warning goes to its thread's innermost ``caught``
    list, or where warnings went before (``forward``) when its thread captures none."""
    stack = getattr(_sinks, "stack", None)
    if stack:
        stack[-1].append(str(message))
    else:
        _show.forward(message, category, filename, lineno, file, line)  # type: ignore[attr-defined]  # set by _install


def _install() -> None:
    # once per process (again if a test harness restored its own): every warning is shown ("always",
    # so a page meets its warning each time, not once per process), through _show
    with _installing:
        if warnings.showwarning is not _show:
            _show.forward = warnings.showwarning  # type: ignore[attr-defined]  # the hook's one attribute
            warnings.showwarning = _show
        if not warnings.filters or warnings.filters[0][0] != "always":
            warnings.simplefilter("always")


def caught(fn: Callable[[], Any]) -> tuple[Any, list[str]]:
    """``fn()`` and the distinct warnings it met in this thread. Unlike ``warnings.catch_warnings``,
    which swaps the process's warning state on the way in and out (one thread at a time), this keeps
    one hook installed and a list per thread, so threads capture at once."""
    _install()
    stack = _sinks.__dict__.setdefault("stack", [])
    stack.append([])
    try:
        value = fn()
    finally:
        lines = stack.pop()
    return value, list(dict.fromkeys(lines))
