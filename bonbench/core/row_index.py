"""Read one problem's rows of a run's JSONL file without reading the others: an index by key.

``RowIndex`` maps each ``problem_id`` of one row file (samples.jsonl, grades/<grader>.jsonl,
scores/<verifier>.jsonl) to the byte offsets of its rows, so that a reader seeks to them and
parses only those rows. The index is built on first use in one pass that parses no row whole
(the key is read from the row's first bytes, where ``records.to_row`` writes it), and kept up to
date cheaply: a file that grew (a run still being written) is indexed from where the last pass
stopped, a file that shrank or was replaced is indexed again.

Rows keep the store's rules (``bonbench.core.store``): a torn final line is left out with a
warning (a live writer's half-written row is picked up by the next ``refresh``), the first row of a
key wins, and a row that turns out not to be JSON when read is a one-line ``BonbenchError`` naming the file and byte.
A line that is not a row with a key is counted (``bad``) and shown to no problem. Memory is eight
bytes per row plus one entry per problem, whatever the rows hold.

This module knows nothing of metrics, graders or verifiers, and never writes.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bonbench.core.errors import BonbenchError

# The key as records.to_row writes it. A quote inside a JSON string is always escaped, so
# `"problem_id": "` can only be the key itself, never text inside a completion.
_KEY = re.compile(rb'"problem_id"\s*:\s*"((?:[^"\\]|\\.)*)"')
_HEAD = 512  # bytes of a row searched for its key before the row is parsed whole


def _problem_of(line: bytes) -> str | None:
    """The ``problem_id`` of one row, or None where the line is not a row with one."""
    found = _KEY.search(line, 0, _HEAD)
    if found is not None:
        try:
            return str(json.loads(b'"' + found.group(1) + b'"'))
        except (UnicodeDecodeError, json.JSONDecodeError):
            pass
    try:
        row = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    pid = row.get("problem_id") if isinstance(row, dict) else None
    return None if pid is None else str(pid)


class RowIndex:
    """problem_id -> byte offsets of its rows in one JSONL file, in file order."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.offsets: dict[str, array] = {}
        self.indexed = 0  # bytes indexed: the file up to its last whole line
        self.torn = False  # whether the bytes after ``indexed`` are a torn line (warned once)
        self.bad = 0  # lines that are not rows with a problem_id
        self._identity: tuple[int, int] | None = None  # (device, inode) of the file indexed

    def refresh(self) -> RowIndex:
        """Index what was appended since the last call; index again a file that shrank or was replaced."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            self.offsets, self.indexed, self.torn, self.bad, self._identity = {}, 0, False, 0, None
            return self
        identity = (stat.st_dev, stat.st_ino)
        if identity != self._identity or stat.st_size < self.indexed:
            self.offsets, self.indexed, self.torn, self.bad, self._identity = {}, 0, False, 0, identity
        if stat.st_size > self.indexed:
            self._scan(stat.st_size)
        return self

    def _scan(self, size: int) -> None:
        torn_before = self.torn
        self.torn = False
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
                pid = _problem_of(line) if line.strip() else None
                if pid is not None:
                    self.offsets.setdefault(pid, array("q")).append(pos)
                elif line.strip():
                    self.bad += 1  # not a row with a key: counted, shown to no problem
                pos += len(line)
                if pos >= size:
                    break
            self.indexed = pos

    def problems(self) -> list[str]:
        """The problems with rows, in the order their first row appears."""
        return list(self.offsets)

    def rows(self, problem_id: str) -> Iterator[dict[str, Any]]:
        """The rows of one problem, in file order (parsed now; nothing is cached)."""
        spots = self.offsets.get(problem_id)
        if not spots:
            return
        with open(self.path, "rb") as fh:
            for offset in spots:
                fh.seek(offset)
                line = fh.readline()
                try:
                    row = json.loads(line)
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
