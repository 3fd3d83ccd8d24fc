"""Read a block of a run's row file at once: every row's key, byte offset and the few fields a table needs.

``read_block`` takes whole lines of a samples, grades or scores file (``KINDS``) and returns, for
each row with a key, its byte offset, ``problem_id`` and ``sample_idx`` and the fields of its kind
(``FIELDS``): samples' ``n_tokens`` and ``prompt_tokens``; grades' verdict (``correct``), ``score``,
``answer`` and the (grader_version, grading_id) they were reached under; scores' ``score``,
(verifier_version, verifier_fingerprint) and ``tokens`` (a count not there reads as NaN). Rows in
the layout bonbench's store writes (``json.dumps`` of ``records.to_row``: schema, problem_id,
sample_idx, then the record's fields in order) are read by compiled regexes over the whole block, so
no row is parsed; any other line (another key order, an escape in an id, a row of another writer, a
number the regexes do not know) is parsed with ``json``, so every valid JSON row reads the same
either way.

Why the regexes cannot misread: a raw newline byte only ends a row (JSON escapes one inside a
string), and a quote inside a string is always escaped, so ``"n_tokens": `` is always a key. Each
head match starts at a row's first byte, so its keys are top-level; the samples tail ends with the
row's closing brace and holds only numbers, null and whole strings, so its keys are top-level too,
as are a score's tokens and calls (its last fields but a judge's rationales, a list of strings); a
key there is the row's last of that name, the one ``json`` keeps. A block is read by the regexes
alone only when every line has its head (and for samples its tail): the matches are then the rows,
in order; otherwise each line without a match is parsed. A field that may be missing (a grade's last
field, ``grading_id``; a score's ``verifier_version`` and ``tokens``; a sample's ``prompt_tokens``)
is read as missing only when its key occurs nowhere else in the block (or the line), and a number
the regex took that ``float`` refuses sends the block line by line to ``json``.

What it does not do: open files, keep an index (``row_index``) or decide what a field means.
"""

from __future__ import annotations

import itertools
import json
import math
import operator
import re
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

_STR = rb'"[^"\\\n]*(?:\\.[^"\\\n]*)*"'
_NUM = rb"(?:-?(?:[0-9][0-9.eE+-]*|Infinity)|NaN)"
_HEAD = rb'\n\{"schema": -?[0-9]+, "problem_id": "([^"\\\n]*)", "sample_idx": (-?[0-9]+)'
_HEADS = {
    "key": re.compile(_HEAD + rb"[,}]"),
    "samples": re.compile(_HEAD + rb", "),
    "grades": re.compile(_HEAD + rb', "grader": ' + _STR + rb', "grader_version": (-?[0-9]+), "correct": (true|false|null), '
                         rb'"score": (null|' + _NUM + rb'), "answer": (null|' + _STR + rb")[,}]"),
    "scores": re.compile(_HEAD + rb', "verifier": ' + _STR + rb', "score": (null|' + _NUM + rb")"
                         rb'(?:, "verifier_version": (-?[0-9]+), "verifier_fingerprint": (' + _STR + rb"))?[,}]"),
}
# every samples row ends so (records.Sample's fields after n_tokens are all numbers, null or strings)
_SAMPLE_TAIL = re.compile(rb'"n_tokens": (-?[0-9]+), "finish_reason": (?:null|' + _STR + rb'), "logprob": (?:null|'
                          + _NUM + rb')(?:, "prompt_tokens": (null|-?[0-9]+))?(?:, "reasoning_tokens": (?:null|-?[0-9]+))?'
                          rb"\}\n")
# a score's tokens and calls are its last fields but a judge's rationales (strings); rows written
# before they existed have none (NaN)
_SCORE_TAIL = re.compile(rb', "tokens": (null|-?[0-9]+), "calls": (?:null|-?[0-9]+)'
                         rb'(?:, "rationales": (?:null|\[(?:' + _STR + rb'(?:, ' + _STR + rb')*)?\]))?\}\n')
# a grade's grading_id is its last field; rows written before it existed have none (it reads as "")
_GRADING_ID = re.compile(rb', "grading_id": (' + _STR + rb")\}\n")
KINDS = tuple(_HEADS)
FIELDS = {"key": (), "samples": ("n_tokens", "prompt_tokens"), "grades": ("correct", "score", "answer", "tag"),
          "scores": ("score", "tag", "tokens")}
TYPECODES = {"n_tokens": "d", "prompt_tokens": "d", "correct": "b", "score": "d", "answer": "i", "tag": "i", "tokens": "d"}
_DECODER = json.JSONDecoder()


def parse_row(line: bytes) -> Any:
    """One line parsed (``json.loads`` without its per-call encoding checks: rows are UTF-8)."""
    return _DECODER.raw_decode(line.decode("utf-8").strip())[0]


class Codes:
    """Strings and tags as small integers, so a column of them is an array: answers (None is -1) and
    the (version, id) pairs grades and scores were made under."""

    def __init__(self, values: Sequence[Any] = ()) -> None:
        self.values: list[Any] = list(values)
        self._code = {v: i for i, v in enumerate(self.values)}

    def code(self, value: Any) -> int:
        if value is None:
            return -1
        found = self._code.get(value)
        if found is None:
            found = self._code[value] = len(self.values)
            self.values.append(value)
        return found


@dataclass
class Block:
    """The rows of one block, in file order: ``runs`` of consecutive rows of one problem as
    (problem_id, start, stop) into the columns."""

    offsets: array[int]
    idx: array[int]
    columns: dict[str, array[Any]]
    runs: list[tuple[str, int, int]]
    bad: int  # lines that are not rows with a problem_id and sample_idx


class _Memo(dict[Any, Any]):
    """raw bytes -> ``fn(raw)``, computed once per distinct value (``map(memo.__getitem__, column)`` runs in C)."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        super().__init__()
        self.fn = fn

    def __missing__(self, raw: Any) -> Any:
        value = self[raw] = self.fn(raw)
        return value


def _json_string(raw: bytes) -> str | None:
    """A JSON string literal (or null) as text."""
    return None if raw == b"null" else str(json.loads(raw))


def _number(raw: bytes) -> float:
    return math.nan if raw == b"null" else float(raw)


def _slow_fields(kind: str, row: dict[str, Any], codes: Codes, tags: Codes) -> tuple[Any, ...]:
    """A parsed row's fields of ``kind`` (the rules ``problems`` reads them by)."""
    def num(x: Any) -> float:
        return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else math.nan

    if kind == "samples":
        return num(row.get("n_tokens")), num(row.get("prompt_tokens"))
    if kind == "grades":
        c = row.get("correct")
        answer = row.get("answer")
        tag = (row.get("grader_version"), row.get("grading_id", ""))
        return (-1 if c is None else int(bool(c)), num(row.get("score")),
                codes.code(answer if isinstance(answer, str) else None), tags.code(_hashable(tag)))
    if kind == "scores":
        tag = (row.get("verifier_version", 1), row.get("verifier_fingerprint", ""))
        return num(row.get("score")), tags.code(_hashable(tag)), num(row.get("tokens"))
    return ()


def _hashable(tag: tuple[Any, Any]) -> Any:
    try:
        hash(tag)
    except TypeError:
        return json.dumps(tag, sort_keys=True)  # an odd version or id: it matches no filter, and is kept apart
    return tag


def _fast_fields(kind: str, cols: Sequence[Sequence[Any]], tails: Sequence[Any], grading: Sequence[bytes] | None,
                 codes: Codes, tags: Codes) -> list[array[Any]]:
    """The field columns of the rows the regexes read (``cols``: offsets, pids, idx, then each group's
    column; ``tails``: each sample's (n_tokens, prompt_tokens) or each score's tokens literal, ``b""``
    where it has none; ``grading``: each grade's grading_id literal, ``""`` where it has none)."""
    if kind == "samples":
        n_tokens, prompt = zip(*tails, strict=True) if tails else ((), ())
        return [array("d", map(float, n_tokens)), array("d", map(_Memo(_count).__getitem__, prompt))]
    if kind == "key" or not cols or not cols[0]:
        return [array(TYPECODES[name]) for name in FIELDS[kind]]
    if kind == "grades":
        answers = _Memo(lambda raw: codes.code(_json_string(raw)))
        tag_of = _Memo(lambda pair: tags.code((int(pair[0]), _json_string(pair[1]))))
        truth = {b"true": 1, b"false": 0, b"null": -1}
        return [array("b", map(truth.__getitem__, cols[4])), array("d", map(_Memo(_number).__getitem__, cols[5])),
                array("i", map(answers.__getitem__, cols[6])),
                array("i", map(tag_of.__getitem__, zip(cols[3], grading or [b'""'] * len(cols[0]), strict=True)))]
    scores = array("d", map(float, cols[3])) if b"null" not in cols[3] else array("d", map(_number, cols[3]))
    tag_of = _Memo(lambda pair: tags.code((int(pair[0]) if pair[0] else 1, _json_string(pair[1] or b'""'))))
    return [scores, array("i", map(tag_of.__getitem__, zip(cols[4], cols[5], strict=True))),
            array("d", map(_Memo(_count).__getitem__, tails))]


def _count(raw: bytes) -> float:
    """A token count's literal (``b""``: the row has none) as a number, NaN where not counted."""
    return math.nan if raw in (b"", b"null") else float(raw)


def read_block(block: bytes, base: int, kind: str, codes: Codes, tags: Codes) -> Block:
    """The rows of ``block`` (whole lines, ending with a newline) that starts at byte ``base`` of its file."""
    data = b"\n" + block  # each head match starts at the newline before its row: data's offset = the block's
    found: list[tuple[Any, ...]] = [(m.start(), *m.groups()) for m in _HEADS[kind].finditer(data)]
    lines = block.count(b"\n")
    # a grade's grading_id ends its row, a sample's tail and a score's tokens too: each keyed by where its row ends
    grading = {m.end(): m.group(1) for m in _GRADING_ID.finditer(block)} if kind == "grades" else {}
    tail_at = _tails(block, kind)
    whole = len(found) == lines and (kind != "samples" or len(tail_at) == lines)
    # a field that may be missing is read as missing only where its key is nowhere in the block: every
    # grading_id key is a row's last field, every verifier_version one is in its row's head, every
    # prompt_tokens and (a score's) tokens one in its row's tail
    if kind == "grades":
        whole = whole and block.count(b'"grading_id"') == len(grading)
    if kind == "samples":
        whole = whole and block.count(b'"prompt_tokens"') == sum(1 for t in tail_at.values() if t[1])
    if kind == "scores":
        versions = sum(f[4] is not None for f in found)
        whole = whole and block.count(b'"verifier_version"') == block.count(b'"verifier_fingerprint"') == versions
        whole = whole and block.count(b'"tokens"') == len(tail_at)
    if whole:
        cols = list(zip(*found, strict=True))
        ends = [*cols[0][1:], len(block)] if cols else []  # every line matched: the next row's start ends each row
        tails = list(tail_at.values()) if kind == "samples" else [tail_at.get(e, b"") for e in ends]
        try:
            columns = _fast_fields(kind, cols, tails, [grading.get(e, b'""') for e in ends] if grading else None,
                                   codes, tags)
            return _block(base, cols[:3] if cols else [(), (), ()], dict(zip(FIELDS[kind], columns, strict=True)), 0)
        except ValueError:  # a number the regex took that is not one (a broken line): each line on its own
            pass
    rows, values, bad = _mixed(block, kind, found, codes, tags, grading, tail_at)
    return _columns(kind, base, rows, values, bad)


def _tails(block: bytes, kind: str) -> dict[int, Any]:
    """Where each row's tail ends -> its literals: a sample's (n_tokens, prompt_tokens), a score's
    tokens (``b""`` where the row has none)."""
    if kind == "samples":
        return {m.end(): (m.group(1), m.group(2) or b"") for m in _SAMPLE_TAIL.finditer(block)}
    if kind == "scores":
        return {m.end(): m.group(1) for m in _SCORE_TAIL.finditer(block)}
    return {}


def _sure(kind: str, line: bytes, found: tuple[Any, ...], end: int, grading: dict[int, bytes],
          tail_at: dict[int, Any]) -> bool:
    """Whether the regexes read every field of this line (else json reads it)."""
    if kind == "samples":
        return end in tail_at and (bool(tail_at[end][1]) or b'"prompt_tokens"' not in line)
    if kind == "grades":
        return end in grading or b'"grading_id"' not in line
    if kind == "scores":
        return ((found[4] is not None or (b'"verifier_version"' not in line and b'"verifier_fingerprint"' not in line))
                and (end in tail_at or b'"tokens"' not in line))
    return True


def _mixed(block: bytes, kind: str, found: list[tuple[Any, ...]], codes: Codes, tags: Codes,
           grading: dict[int, bytes], tail_at: dict[int, Any]) -> tuple[list[Any], list[Any], int]:
    """Each line of a block: by its regex match where it has a whole one, else parsed with json."""
    by_start = {f[0]: f for f in found}
    rows: list[Any] = []
    values: list[Any] = []
    start, bad = 0, 0
    while start < len(block):
        end = block.index(b"\n", start) + 1
        f = by_start.get(start)
        got = None
        if f is not None and _sure(kind, block[start:end], f, end, grading, tail_at):
            try:
                got = _fast_fields(kind, [(v,) for v in f], [tail_at.get(end, b"")] if kind in ("samples", "scores") else [],
                                   [grading.get(end, b'""')], codes, tags)
            except ValueError:
                got = None
        if f is not None and got is not None:
            rows.append((start, f[1], f[2]))
            values.append(tuple(c[0] for c in got))
        elif block[start:end].strip():
            try:
                row = parse_row(block[start:end])
            except (UnicodeDecodeError, json.JSONDecodeError):
                row = None
            if isinstance(row, dict) and row.get("problem_id") is not None and isinstance(row.get("sample_idx"), int):
                rows.append((start, str(row["problem_id"]), row["sample_idx"]))
                values.append(_slow_fields(kind, row, codes, tags))
            else:
                bad += 1  # not a row with a key: counted, shown to no problem
        start = end
    return rows, values, bad


def _columns(kind: str, base: int, rows: list[Any], values: list[Any], bad: int) -> Block:
    """Rows read one at a time (``_mixed``) as a ``Block``."""
    columns = {name: array(TYPECODES[name], [v[i] for v in values]) for i, name in enumerate(FIELDS[kind])}
    return _block(base, [[r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]], columns, bad)


def _block(base: int, keys: Sequence[Sequence[Any]], columns: dict[str, array[Any]], bad: int) -> Block:
    """The block of rows whose ``keys`` are (offsets in the block, problem ids, sample indices) and
    whose fields are ``columns``, its runs of one problem found; a run whose id is not UTF-8 is dropped
    (json could not read such a row either)."""
    starts, pids, idx = keys
    n = len(pids)
    # where the problem changes (C loops: no Python step per row)
    bounds = [0, *itertools.compress(range(1, n), map(operator.ne, pids[1:], pids[:-1])), n] if n else [0]
    runs: list[tuple[str, int, int]] = []
    dropped: list[tuple[int, int]] = []
    for a, b in itertools.pairwise(bounds):
        raw = pids[a]
        try:
            runs.append((raw if isinstance(raw, str) else raw.decode("utf-8"), a, b))
        except UnicodeDecodeError:
            dropped.append((a, b))
    if dropped:  # rare: keep the other rows and group again
        keep = [j for j in range(n) if not any(a <= j < b for a, b in dropped)]
        return _block(base, [[k[j] for j in keep] for k in keys],
                      {k: array(c.typecode, [c[j] for j in keep]) for k, c in columns.items()}, bad + n - len(keep))
    return Block(array("q", map(base.__add__, starts)), array("q", map(int, idx)), columns, runs, bad)
