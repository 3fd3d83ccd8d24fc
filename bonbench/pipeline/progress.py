"""Progress: the callback every stage takes, ``progress(stage, advance, total)``, and its plain-line
form for output that is not a terminal.

A stage calls the callback with ``advance = 0`` when it starts (``total`` is its number of rows) and
with the rows it finished since; the library default (``no_progress``) does nothing. On a terminal
the CLI draws a bar per stage from it. Where stderr is not a terminal (a log file, CI) a bar would
show only its final state, so ``ProgressLines`` writes plain lines instead: one per stage at most
every ``interval_s()`` seconds (``INTERVAL_S``, or ``$BONBENCH_PROGRESS_INTERVAL``), plus each
stage's first (when its first rows are done) and last, with counts, rate and ETA::

    sampling: 120/640 samples (18.8%) 3.2/s ETA 2m43s
    grading: 640/640 samples (100.0%) 41.0/s done in 15s

Sampling, grading, verifying (``bonbench.apps.cli``) and training (``bonbench.apps.trainer.watch``)
all write through it. This module reads no run and draws no bar.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

Progress = Callable[[str, int, int], None]  # (stage, advance, total)

INTERVAL_S = 10.0  # at most one line per stage this often (its first and last line aside)
INTERVAL_ENV = "BONBENCH_PROGRESS_INTERVAL"  # seconds, overriding INTERVAL_S (tests use a short one)
LABELS = {"sample": "sampling", "grade": "grading", "verify": "verifying", "search": "searching"}  # a stage's name as shown
UNITS = {"lora": "steps", "search": "trees"}  # what a stage counts, where it is not samples


def no_progress(stage: str, advance: int, total: int) -> None:
    """The default callback: report nothing."""
    return None


def label(stage: str) -> str:
    """How a stage is named in bars and lines (``grade`` -> ``grading``, ``verify rm:x`` ->
    ``verifying rm:x``)."""
    first, _, rest = stage.partition(" ")
    return " ".join(filter(None, (LABELS.get(first, first), rest)))


def interval_s() -> float:
    """Seconds between two lines of a stage: ``$BONBENCH_PROGRESS_INTERVAL`` when it is a positive
    number, else ``INTERVAL_S``."""
    try:
        value = float(os.environ.get(INTERVAL_ENV, ""))
    except ValueError:
        return INTERVAL_S
    return value if value > 0 else INTERVAL_S


def duration_text(seconds: float) -> str:
    """``45s``, ``2m43s``, ``1h05m``."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s // 60 % 60:02d}m"


def rate_text(per_s: float, unit: str) -> str:
    """``3.2/s``, or ``12.0 s/step`` below one per second (``unit`` is the plural, e.g. ``steps``)."""
    if per_s >= 1.0:
        return f"{per_s:.1f}/s"
    return f"{1.0 / per_s:.1f} s/{unit.removesuffix('s')}"


@dataclass
class _Count:
    t0: float  # when the count was first reported
    done0: int  # how many were done then (a resumed stage's earlier work is not part of the rate)
    done: int = 0
    total: int = 0
    last_line: float | None = None


class ProgressLines:
    """Plain progress lines through ``write`` (one call per line), per key: the first report of a
    key that has done something is a line at once, then at most one per ``interval`` seconds (``interval_s()`` by default),
    and always the line that reaches the total. ``clock`` is injectable for tests.

    Call it as a ``Progress`` (``stage`` is the key, ``advance`` rows more of ``total``), or
    ``update`` a key with its absolute count (``begin`` first sets where the count starts without
    a line, as training does for a resumed run).
    """

    def __init__(self, write: Callable[[str], None], interval: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.write, self.clock = write, clock
        self.interval = interval if interval is not None else interval_s()
        self.counts: dict[str, _Count] = {}

    def __call__(self, stage: str, advance: int, total: int) -> None:
        if total <= 0:
            return  # a stage with nothing to do (every imported sample stored already) says nothing
        count = self.counts.get(stage)
        if count is not None and advance == 0 and count.done >= count.total:
            del self.counts[stage]  # a stage that finished starts again (the next run of several)
            count = None
        self.update(stage, (count.done if count is not None else 0) + advance, total, label(stage),
                    UNITS.get(stage, "samples"))

    def begin(self, key: str, done: int) -> None:
        """Start ``key``'s clock at ``done`` (no line: the caller says what starts)."""
        self.counts[key] = _Count(self.clock(), done, done)

    def update(self, key: str, done: int, total: int, name: str = "", unit: str = "samples", extra: str = "") -> None:
        """``done`` of ``total`` for ``key`` (shown as ``name``, default the key); ``extra`` ends the line."""
        now = self.clock()
        count = self.counts.get(key)
        if count is None:
            count = self.counts[key] = _Count(now, done)
        count.done, count.total = done, total
        finished = done >= total
        if count.last_line is None and done == count.done0 and not finished:
            return  # nothing done yet: no line (a failure at the start stays the one line it prints)
        if count.last_line is not None and not finished and now - count.last_line < self.interval:
            return
        count.last_line = now
        self.write(self._line(name or key, count, total, now, unit, extra))

    def _line(self, name: str, count: _Count, total: int, now: float, unit: str, extra: str) -> str:
        share = f" ({100.0 * count.done / total:.1f}%)" if total > 0 else ""
        parts = [f"{name}: {count.done}/{total} {unit}{share}"]
        elapsed, moved = now - count.t0, count.done - count.done0
        if elapsed > 0 and moved > 0:
            per_s = moved / elapsed
            parts.append(rate_text(per_s, unit))
            parts.append(f"done in {duration_text(elapsed)}" if count.done >= total
                         else f"ETA {duration_text((total - count.done) / per_s)}")
        return " ".join(parts) + (f"  {extra}" if extra else "")
