"""Read one problem's rows of a run's JSONL file without reading the others: an index by key.

``RowIndex`` maps each ``problem_id`` of one row file (samples.jsonl, grades/<grader>.jsonl,
scores/<verifier>.jsonl) to the byte offsets and ``sample_idx`` of its rows, so that a reader seeks
to them and parses only those rows. Optionally it also keeps one number of each row (``number``:
samples.jsonl's ``n_tokens``), so that a summary over every row needs no row parsed. The index is
built in one pass that parses no row whole (the key is read from the row's first bytes, where
``records.to_row`` writes it, and the number by its key: a quote inside a JSON string is always
escaped, so ``"n_tokens": `` cannot be text inside a completion), and kept up to date cheaply: a
file that grew (a run still being written) is indexed from where the last pass stopped, and
``changed`` names the problems that got rows; a file that shrank or was replaced is indexed again.
``save`` and ``load`` keep an index in a file of its own (JSON and raw arrays, never pickle), so
that a large run is scanned once, not at every start.

Rows keep the store's rules (``bonbench.core.store``): a torn final line is left out with a
warning (a live writer's half-written row is picked up by the next ``refresh``), the first row of a
key wins, and a row that turns out not to be JSON when read is a one-line ``BonbenchError`` naming
the file and byte. A line that is not a row with a key is counted (``bad``) and shown to no
problem. Memory is 16 bytes per row (24 with a number) plus one entry per problem.

This module knows nothing of metrics, graders or verifiers, and never writes into a run.
"""

from __future__ import annotations

import json
import math
import os
import re
import warnings
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bonbench.core.errors import BonbenchError

_KEY = re.compile(rb'"problem_id"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"sample_idx"\s*:\s*(-?\d+)')
_HEAD = 512  # bytes of a row searched for its key before the row is parsed whole
_FORMAT = 1  # of ``save``'s files
_DECODER = json.JSONDecoder()


def _row(line: bytes) -> Any:
    """One line parsed (``json.loads`` without its per-call encoding checks: rows are UTF-8)."""
    return _DECODER.raw_decode(line.decode("utf-8").strip())[0]


def _key_of(line: bytes) -> tuple[str, int] | None:
    """The ``(problem_id, sample_idx)`` of one row, or None where the line is not a row with both."""
    found = _KEY.search(line, 0, _HEAD)
    if found is not None:
        raw = found.group(1)
        try:
            # most ids hold no escape: their UTF-8 bytes are the id (a JSON decode only where one is)
            pid = raw.decode("utf-8") if b"\\" not in raw else str(json.loads(b'"' + raw + b'"'))
            return pid, int(found.group(2))
        except (UnicodeDecodeError, json.JSONDecodeError):
            pass
    try:
        row = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(row, dict) or row.get("problem_id") is None or not isinstance(row.get("sample_idx"), int):
        return None
    return str(row["problem_id"]), int(row["sample_idx"])


class Rows:
    """One problem's rows in one file: byte offsets, sample indices and (optionally) numbers, in file order."""

    __slots__ = ("idx", "numbers", "offsets")

    def __init__(self) -> None:
        self.offsets = array("q")
        self.idx = array("q")
        self.numbers = array("d")

    def first_numbers(self) -> dict[int, float]:
        """sample_idx -> the number of its first row (the store's rule: the first row of a key wins)."""
        out: dict[int, float] = {}
        for i, x in zip(self.idx, self.numbers, strict=False):
            out.setdefault(i, x)
        return out


class RowIndex:
    """problem_id -> its ``Rows`` in one JSONL file."""

    def __init__(self, path: Path, number: str | None = None) -> None:
        self.path = Path(path)
        self.number = number
        self._number = re.compile(rb'"' + number.encode() + rb'"\s*:\s*(-?[0-9][0-9.eE+-]*)') if number else None
        self.problems: dict[str, Rows] = {}
        self.indexed = 0  # bytes indexed: the file up to its last whole line
        self.torn = False  # whether the bytes after ``indexed`` are a torn line
        self.bad = 0  # lines that are not rows with a problem_id and sample_idx
        self.changed: set[str] | None = None  # problems that got rows in the last refresh (None: all)
        self.identity: tuple[int, int] | None = None  # (device, inode) of the file indexed

    def _reset(self, identity: tuple[int, int] | None) -> None:
        self.problems, self.indexed, self.torn, self.bad, self.identity = {}, 0, False, 0, identity
        self.changed = None

    def refresh(self) -> RowIndex:
        """Index what was appended since the last call; index again a file that shrank or was replaced."""
        self.changed = set()
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            self._reset(None)
            return self
        identity = (stat.st_dev, stat.st_ino)
        if identity != self.identity or stat.st_size < self.indexed:
            self._reset(identity)
        if stat.st_size > self.indexed:
            self._scan(stat.st_size)
        return self

    def _scan(self, size: int) -> None:
        torn_before, self.torn = self.torn, False
        changed = self.changed
        with open(self.path, "rb") as fh:
            fh.seek(self.indexed)
            pos = self.indexed
            for line in fh:
                if not line.endswith(b"\n"):
                    # a torn last line, or a live writer's row not finished yet: left for the next refresh
                    self.torn = bool(line.strip())
                    if self.torn and not torn_before:
                        warnings.warn(f"{self.path}: the last line is torn (an interrupted or unfinished write); "
                                      "showing the rows before it", stacklevel=3)
                    break
                key = _key_of(line) if line.strip() else None
                if key is not None:
                    rows = self.problems.get(key[0])
                    if rows is None:
                        rows = self.problems[key[0]] = Rows()
                    rows.offsets.append(pos)
                    rows.idx.append(key[1])
                    if self._number is not None:
                        found = self._number.search(line)
                        rows.numbers.append(float(found.group(1)) if found else math.nan)
                    if changed is not None:
                        changed.add(key[0])
                elif line.strip():
                    self.bad += 1  # not a row with a key: counted, shown to no problem
                pos += len(line)
                if pos >= size:
                    break
            self.indexed = pos

    def rows(self, problem_id: str) -> Iterator[dict[str, Any]]:
        """The rows of one problem, in file order (parsed now; nothing is cached)."""
        entry = self.problems.get(problem_id)
        if entry is None:
            return
        with open(self.path, "rb") as fh:
            for offset in entry.offsets:
                fh.seek(offset)
                line = fh.readline()
                try:
                    row = _row(line)
                except (UnicodeDecodeError, json.JSONDecodeError):
                    raise BonbenchError(f"{self.path}: the row at byte {offset} is not valid JSON in UTF-8; delete "
                                        "that line (its key will be redone) and rerun") from None
                if isinstance(row, dict):
                    yield row

    def keyed(self, problem_id: str,
              where: Callable[[dict[str, Any]], bool] | None = None) -> dict[int, dict[str, Any]]:
        """sample_idx -> row of one problem, only rows ``where`` accepts; the first row of a key wins
        (the store's rule)."""
        out: dict[int, dict[str, Any]] = {}
        for row in self.rows(problem_id):
            idx = row.get("sample_idx")
            if isinstance(idx, int) and (where is None or where(row)):
                out.setdefault(idx, row)
        return out

    # ---- kept between starts -----------------------------------------------------------------------

    def save(self, path: Path) -> None:
        """Write the index to ``path`` (a header line of JSON, then the arrays' bytes)."""
        ids = list(self.problems)
        parts = [array("q", [len(self.problems[p].offsets) for p in ids])]
        for name in ("offsets", "idx", "numbers"):
            joined = array("d" if name == "numbers" else "q")
            for p in ids:
                joined.extend(getattr(self.problems[p], name))
            parts.append(joined)
        head = {"format": _FORMAT, "number": self.number, "identity": self.identity, "indexed": self.indexed,
                "torn": self.torn, "bad": self.bad, "ids": ids, "sizes": [len(a) * a.itemsize for a in parts]}
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as fh:
            fh.write(json.dumps(head).encode() + b"\n")
            for a in parts:
                fh.write(a.tobytes())
        os.replace(tmp, path)

    def load(self, path: Path) -> bool:
        """Take the index saved in ``path`` when it is whole and of this file (same device and inode,
        not longer than the file now); the next ``refresh`` indexes only what was appended since."""
        try:
            with open(path, "rb") as fh:
                head = json.loads(fh.readline())
                blob = fh.read()
            stat = os.stat(self.path)
        except (OSError, ValueError):
            return False
        if (not isinstance(head, dict) or head.get("format") != _FORMAT or head.get("number") != self.number
                or head.get("identity") != [stat.st_dev, stat.st_ino] or head.get("indexed", math.inf) > stat.st_size
                or sum(head.get("sizes", [-1])) != len(blob)):
            return False
        parts: list[array[Any]] = []
        start = 0
        for kind, size in zip("qqqd", head["sizes"], strict=True):
            a = array(kind)
            a.frombytes(blob[start:start + size])
            parts.append(a)
            start += size
        counts, offsets, idx, numbers = parts
        self._reset((stat.st_dev, stat.st_ino))
        at = 0
        for pid, count in zip(head["ids"], counts, strict=True):
            rows = self.problems[pid] = Rows()
            rows.offsets, rows.idx = offsets[at:at + count], idx[at:at + count]
            rows.numbers = numbers[at:at + count] if self.number else array("d")
            at += count
        self.indexed, self.torn, self.bad = int(head["indexed"]), bool(head["torn"]), int(head["bad"])
        return True
