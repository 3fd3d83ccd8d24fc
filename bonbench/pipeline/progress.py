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

Rows may be minutes apart (a sampler's chunk of 64 long samples), so ``tick``, called from a timer
(the CLI's ``Progress`` runs one), also writes the line of every stage under way that has been
silent for ``heartbeat_s()`` (the interval, at least ``HEARTBEAT_MIN_S``), before its first rows
too: no stage is silent for longer, whatever its chunks. A stage that fails within that time (a
server that never answers, a bad file) still prints only its error::

    sampling: 0/640 samples (0.0%) 10s elapsed

Sampling, grading, verifying (``bonbench.apps.cli``) and training (``bonbench.apps.trainer.watch``)
all write through it. This module reads no run and draws no bar.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

Progress = Callable[[str, int, int], None]  # (stage, advance, total)

INTERVAL_S = 10.0  # at most one line per stage this often (its first and last line aside)
INTERVAL_ENV = "BONBENCH_PROGRESS_INTERVAL"  # seconds, overriding INTERVAL_S (tests use a short one)
HEARTBEAT_MIN_S = 1.0  # a silent stage's line comes after the interval, never sooner than this
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
    shown: int | None = None  # the count the last line showed
    name: str = ""  # as the last report showed the key
    unit: str = "samples"
    extra: str = ""


class ProgressLines:
    """Plain progress lines through ``write`` (one call per line), per key: the first report of a
    key that has done something is a line at once, then at most one per ``interval`` seconds (``interval_s()`` by default),
    and always the line that reaches the total. ``clock`` is injectable for tests.

    Call it as a ``Progress`` (``stage`` is the key, ``advance`` rows more of ``total``), or
    ``update`` a key with its absolute count (``begin`` first sets where the count starts without
    a line, as training does for a resumed run). ``tick`` (from a timer thread: every method holds
    one lock, so lines never mix) writes the line of a stage silent for ``heartbeat_s()``.
    """

    def __init__(self, write: Callable[[str], None], interval: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.write, self.clock = write, clock
        self.interval = interval if interval is not None else interval_s()
        self.counts: dict[str, _Count] = {}
        self.lock = threading.RLock()

    def __call__(self, stage: str, advance: int, total: int) -> None:
        if total <= 0:
            return  # a stage with nothing to do (every imported sample stored already) says nothing
        with self.lock:
            count = self.counts.get(stage)
            if count is not None and advance == 0 and count.done >= count.total:
                del self.counts[stage]  # a stage that finished starts again (the next run of several)
                count = None
            self.update(stage, (count.done if count is not None else 0) + advance, total, label(stage),
                        UNITS.get(stage, "samples"))

    def begin(self, key: str, done: int) -> None:
        """Start ``key``'s clock at ``done`` (no line: the caller says what starts)."""
        with self.lock:
            self.counts[key] = _Count(self.clock(), done, done)

    def update(self, key: str, done: int, total: int, name: str = "", unit: str = "samples", extra: str = "") -> None:
        """``done`` of ``total`` for ``key`` (shown as ``name``, default the key); ``extra`` ends the line."""
        with self.lock:
            now = self.clock()
            count = self.counts.get(key)
            if count is None:
                count = self.counts[key] = _Count(now, done)
            count.done, count.total = done, total
            count.name, count.unit, count.extra = name or key, unit, extra
            finished = done >= total
            if count.last_line is None and done == count.done0 and not finished:
                return  # nothing done yet: no line (a failure at the start stays the one line it prints)
            first = done > count.done0 and count.shown in (None, count.done0)  # the first rows: at once, after a tick too
            if count.last_line is not None and not (finished or first) and now - count.last_line < self.interval:
                return
            self._write(count, now)

    def heartbeat_s(self) -> float:
        """How long a stage under way may be silent before ``tick`` writes its line."""
        return max(self.interval, HEARTBEAT_MIN_S)

    def tick(self) -> None:
        """Write the line of every stage under way (begun, not finished) that has written none for
        ``heartbeat_s()`` seconds, or none since it began that long ago: rows may be minutes apart."""
        with self.lock:
            now = self.clock()
            for count in self.counts.values():
                since = count.last_line if count.last_line is not None else count.t0
                if count.total > 0 and count.done < count.total and now - since >= self.heartbeat_s():
                    self._write(count, now)

    def _write(self, count: _Count, now: float) -> None:
        count.last_line, count.shown = now, count.done
        self.write(self._line(count, now))

    def _line(self, count: _Count, now: float) -> str:
        total, unit = count.total, count.unit
        share = f" ({100.0 * count.done / total:.1f}%)" if total > 0 else ""
        parts = [f"{count.name}: {count.done}/{total} {unit}{share}"]
        elapsed, moved = now - count.t0, count.done - count.done0
        if elapsed > 0 and moved > 0:
            per_s = moved / elapsed
            parts.append(rate_text(per_s, unit))
            parts.append(f"done in {duration_text(elapsed)}" if count.done >= total
                         else f"ETA {duration_text((total - count.done) / per_s)}")
        elif elapsed > 0:
            parts.append(f"{duration_text(elapsed)} elapsed")  # nothing done yet (a tick): how long it has run
        return " ".join(parts) + (f"  {count.extra}" if count.extra else "")
