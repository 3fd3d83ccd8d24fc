"""Read one problem's rows of a run's JSONL file without reading the others: an index by key.

``RowIndex`` maps each ``problem_id`` of one row file (samples.jsonl, grades/<grader>.jsonl,
scores/<verifier>.jsonl) to the byte offsets and ``sample_idx`` of its rows, so that a reader seeks
to them and parses only those rows. It also keeps the few fields of each row that a summary over
every row needs (``bonbench.core.row_scan.FIELDS`` of its ``kind``: samples' ``n_tokens`` and
``prompt_tokens``, grades' verdict, score, answer and grading, scores' score, scoring and tokens),
so that the problems table and the compute recipe parse no row. The index is built in one pass over
the file in blocks of many rows (``row_scan.read_block``: compiled regexes over the block for rows
in the store's layout, ``json`` for any other line), and kept up to date cheaply: a file that grew
(a run still being written) is indexed from where the last pass stopped, and ``changed`` names the
problems that got rows; a file that shrank or was replaced is indexed again. ``refresh(upto=...)``
indexes only so far, so that a caller can read a big file a slice at a time (the viewer shows a big
run as far as it has read). ``save`` and ``load`` keep an index in a file of its own (JSON and raw
arrays, never pickle), so that a large run is scanned once, not at every start.
``RowIndex.of_problem`` finds one problem's rows alone by an exact byte search for the row head the
store writes (no index needed first; a row of another layout is not found, so its caller checks the
count).

Rows keep the store's rules (``bonbench.core.store``): a torn final line is left out with a
warning (a live writer's half-written row is picked up by the next ``refresh``), the first row of a
key wins, and a row that turns out not to be JSON when read is a one-line ``BonbenchError`` naming
the file and byte. A line that is not a row with a key is counted (``bad``) and shown to no
problem. Memory is 16 bytes per row, plus 16 (samples), 17 (grades) or 20 (scores) for its fields,
plus one entry per problem and one per distinct answer.

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
from bonbench.core.row_scan import FIELDS, KINDS, TYPECODES, Block, Codes, parse_row, read_block

_FORMAT = 3  # of ``save``'s files (3: samples' prompt_tokens and scores' tokens kept)
_SCHEMA = re.compile(rb'\{"schema": -?[0-9]+')  # a row's first bytes, before its problem_id (``of_problem``)
_IDX = re.compile(rb"-?[0-9]+")
_BLOCK = 8 << 20  # bytes read at once: large enough that the regexes run long, small enough to bound memory


class Rows:
    """One problem's rows in one file: byte offsets, sample indices and the fields of its kind, in file order."""

    __slots__ = ("columns", "idx", "offsets")

    def __init__(self, kind: str) -> None:
        self.offsets = array("q")
        self.idx = array("q")
        self.columns = {name: array(TYPECODES[name]) for name in FIELDS[kind]}

    @property
    def numbers(self) -> array[Any]:
        """samples.jsonl's ``n_tokens`` of each row."""
        return self.columns["n_tokens"]

    def first_numbers(self) -> dict[int, float]:
        """sample_idx -> the n_tokens of its first row (the store's rule: the first row of a key wins)."""
        out: dict[int, float] = {}
        for i, x in zip(self.idx, self.numbers, strict=True):
            out.setdefault(i, x)
        return out

    def extend(self, block: Block, start: int, stop: int) -> None:
        self.offsets.extend(block.offsets[start:stop])
        self.idx.extend(block.idx[start:stop])
        for name, column in self.columns.items():
            column.extend(block.columns[name][start:stop])


class RowIndex:
    """problem_id -> its ``Rows`` in one JSONL file; ``kind`` (``row_scan.KINDS``): which fields it keeps."""

    def __init__(self, path: Path, kind: str = "key") -> None:
        assert kind in KINDS, kind
        self.path = Path(path)
        self.kind = kind
        self._problems: dict[str, Rows] = {}
        self._kept: tuple[dict[str, Any], bytes] | None = None  # a loaded index not split by problem yet
        self.answers = Codes()  # grades' answers by code (Rows.columns["answer"]; -1: None)
        self.tags = Codes()  # the (version, id) each grade or score was made under (Rows.columns["tag"])
        self.indexed = 0  # bytes indexed: the file up to its last whole line (or up to ``refresh``'s limit)
        self.size = 0  # the file's size at the last refresh
        self.whole = False  # whether the last refresh read to the file's end (what is left is a torn line)
        self.torn = False  # whether the bytes after ``indexed`` are a torn line
        self.bad = 0  # lines that are not rows with a problem_id and sample_idx
        self.changed: set[str] | None = None  # problems that got rows in the last refresh (None: all)
        self.identity: tuple[int, int] | None = None  # (device, inode) of the file indexed

    def _reset(self, identity: tuple[int, int] | None) -> None:
        self._problems, self._kept, self.indexed, self.torn, self.bad, self.identity = {}, None, 0, False, 0, identity
        self.answers, self.tags, self.changed = Codes(), Codes(), None

    @property
    def problems(self) -> dict[str, Rows]:
        """problem_id -> its rows, in the order the file first names them."""
        if self._kept is not None:  # split a loaded index only when asked: a kept table needs only its state
            head, blob = self._kept
            self._kept = None
            self._split(head, blob)
        return self._problems


    def refresh(self, upto: int | None = None) -> RowIndex:
        """Index what was appended since the last call (up to byte ``upto`` at most, whole lines only);
        index again a file that shrank or was replaced."""
        self.changed = set()
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            self._reset(None)
            self.size, self.whole = 0, True
            return self
        identity = (stat.st_dev, stat.st_ino)
        if identity != self.identity or stat.st_size < self.indexed:
            self._reset(identity)
        self.size = stat.st_size
        stop = stat.st_size if upto is None else min(stat.st_size, upto)
        if stop > self.indexed:
            self._scan(stop, stop == stat.st_size)
        self.whole = stop == stat.st_size
        return self

    def _scan(self, stop: int, to_end: bool) -> None:
        torn_before, self.torn = self.torn, False
        with open(self.path, "rb") as fh:
            fh.seek(self.indexed)
            pos = self.indexed
            while pos < stop:
                chunk = fh.read(min(_BLOCK, stop - pos))
                end = chunk.rfind(b"\n") + 1
                while end == 0 and pos + len(chunk) < stop:  # one row longer than a block
                    chunk += fh.read(min(_BLOCK, stop - pos - len(chunk)))
                    end = chunk.rfind(b"\n") + 1
                if end == 0:
                    # a torn last line, or a live writer's row not finished yet: left for the next refresh
                    self.torn = to_end and bool(chunk.strip())
                    if self.torn and not torn_before:
                        warnings.warn(f"{self.path}: the last line is torn (an interrupted or unfinished write); "
                                      "showing the rows before it", stacklevel=4)
                    break
                fh.seek(pos + end)
                self._add(read_block(chunk[:end], pos, self.kind, self.answers, self.tags))
                pos += end
            self.indexed = pos

    def _add(self, block: Block) -> None:
        self.bad += block.bad
        changed = self.changed
        for pid, start, stop in block.runs:
            rows = self.problems.get(pid)
            if rows is None:
                rows = self.problems[pid] = Rows(self.kind)
            rows.extend(block, start, stop)
            if changed is not None:
                changed.add(pid)

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
                    row = parse_row(line)
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

    @classmethod
    def of_problem(cls, path: Path, problem_id: str, kind: str = "key") -> RowIndex:
        """An index of one problem's rows alone, found without reading the file row by row: every line
        that starts as the store writes a row of ``problem_id`` (``{"schema": N, "problem_id": ...,
        "sample_idx": I``), by an exact byte search. A row of another layout is not found, so a caller
        checks the count against what it expects. Only ``rows`` and ``keyed`` answer from it (its
        ``kind`` fields are not read); ``whole`` is False."""
        index = cls(path, kind)
        rows = Rows(kind)
        needle = b', "problem_id": ' + json.dumps(problem_id, ensure_ascii=False).encode("utf-8") + b', "sample_idx": '
        with open(path, "rb") as fh:
            stat = os.fstat(fh.fileno())
            index.identity, index.size = (stat.st_dev, stat.st_ino), stat.st_size
            pos = 0
            while True:  # whole lines, a block at a time (as ``_scan``): memory stays one block
                chunk = fh.read(_BLOCK)
                end = chunk.rfind(b"\n") + 1
                while end == 0 and chunk:  # one row longer than a block
                    more = fh.read(_BLOCK)
                    if not more:
                        break
                    chunk += more
                    end = chunk.rfind(b"\n") + 1
                if end == 0:  # nothing, or a torn last line
                    break
                at = chunk.find(needle, 0, end)
                while at >= 0:
                    start = chunk.rfind(b"\n", 0, at) + 1  # the line's first byte
                    idx = _IDX.match(chunk, at + len(needle))
                    if _SCHEMA.fullmatch(chunk, start, at) and idx:
                        rows.offsets.append(pos + start)
                        rows.idx.append(int(idx.group()))
                    at = chunk.find(needle, at + len(needle), end)
                pos += end
                fh.seek(pos)
        if len(rows.offsets):
            index.problems[problem_id] = rows
        return index

    # ---- kept between starts -----------------------------------------------------------------------

    def save(self, path: Path) -> None:
        """Write the index to ``path`` (a header line of JSON, then the arrays' bytes)."""
        ids = list(self.problems)
        parts = [array("q", [len(self.problems[p].offsets) for p in ids])]
        for name in ("offsets", "idx", *FIELDS[self.kind]):
            joined = array("q" if name in ("offsets", "idx") else TYPECODES[name])
            for p in ids:
                rows = self.problems[p]
                joined.extend(getattr(rows, name) if name in ("offsets", "idx") else rows.columns[name])
            parts.append(joined)
        head = {"format": _FORMAT, "kind": self.kind, "identity": self.identity, "indexed": self.indexed,
                "torn": self.torn, "bad": self.bad, "ids": ids, "answers": self.answers.values,
                "tags": self.tags.values, "sizes": [len(a) * a.itemsize for a in parts]}
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
        if (not isinstance(head, dict) or head.get("format") != _FORMAT or head.get("kind") != self.kind
                or head.get("identity") != [stat.st_dev, stat.st_ino] or head.get("indexed", math.inf) > stat.st_size
                or sum(head.get("sizes", [-1])) != len(blob)):
            return False
        self._reset((stat.st_dev, stat.st_ino))
        # tags were (version, id) pairs: JSON kept them as lists
        self.answers, self.tags = Codes(head["answers"]), Codes([_tuple(t) for t in head["tags"]])
        self.indexed, self.torn, self.bad = int(head["indexed"]), bool(head["torn"]), int(head["bad"])
        self.size = stat.st_size
        self._kept = (head, blob)
        return True

    def _split(self, head: dict[str, Any], blob: bytes) -> None:
        names = ("counts", "offsets", "idx", *FIELDS[self.kind])
        parts: dict[str, array[Any]] = {}
        start = 0
        for name, size in zip(names, head["sizes"], strict=True):
            a = array(TYPECODES.get(name, "q"))
            a.frombytes(blob[start:start + size])
            parts[name] = a
            start += size
        at = 0
        for pid, count in zip(head["ids"], parts["counts"], strict=True):
            rows = self._problems[pid] = Rows(self.kind)
            rows.offsets, rows.idx = parts["offsets"][at:at + count], parts["idx"][at:at + count]
            rows.columns = {name: parts[name][at:at + count] for name in FIELDS[self.kind]}
            at += count


def _tuple(tag: Any) -> Any:
    return tuple(tag) if isinstance(tag, list) else tag
