"""Read the rows a recipe table needs fast, exactly as the slow path reads them, or not at all.

``recipe_table`` needs, of one run, each problem's outcomes (grades: verdict and answer class; each
verifier's score) and its ledger (``pipeline.ledger``: prompt and generated tokens per sample, each
verifier's tokens). The slow path builds a record of every row (``records.from_row``, 11-25 us a
row). ``fast_inputs`` reads the same fields of each whole file with one compiled regex per kind,
in the layout the store writes (``json.dumps`` of ``records.to_row``: schema, problem_id,
sample_idx, then the record's fields in order), and turns them into numpy arrays keyed by
(problem_id, sample_idx), never by file order.

It is all or nothing per run: it returns None, and the caller takes the slow path, unless every line
of every file it reads is one whole row its regex reads, and every key it reads occurs in the file
exactly as often as the rows that carry it (so no nested object or repeated key holds another
value than the one ``json`` sees). A file that does not end with a newline (a torn or unfinished
last line), a blank line, a row in another key order or with an escape in its id, a missing count
the cost needs, a problem graded without samples: None, and the slow path reads (or refuses) it.
Why a match cannot misread: a raw newline only ends a row (JSON escapes one inside a string) and a
quote inside a string is always escaped, so ``"key": `` outside the head and the tail anchored at
the row's end is a key of that row.

The rules are those of the slow path: grades and scores keep a key's first accepted row
(``JsonlTable.read``; grades only those metrics.json was graded under, ``rundir.grade_filter``),
the ledger a score's last row (``ledger.latest_scores``) over the samples' keys, which keep their
first row; a sample graded right votes for the problem's first right answer
(``pipeline.votes.vote_answers``); an unscored sample scores -inf.

What it does not do: compute estimators or keep tables (``recipe_table``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bonbench.apps.analysis.rundir import RunData, grade_filter
from bonbench.metrics.estimators import ProblemOutcome
from bonbench.pipeline.run_columns import read_columns

_INT = rb"-?(?:0|[1-9][0-9]*)"
_NUM = rb"(?:-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|NaN|-?Infinity)"
_STR = rb'"[^"\\\x00-\x1f]*+(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*+)*+"'  # a JSON string, unrolled
_HEAD = rb'^\{"schema": ' + _INT + rb', "problem_id": "([^"\\\x00-\x1f]*)", "sample_idx": (' + _INT + rb")"
_SAMPLE = re.compile(_HEAD + rb', "completion": ' + _STR + rb', "n_tokens": (' + _INT + rb'), "finish_reason": (?:null|' + _STR
                     + rb'), "logprob": (?:null|' + _NUM + rb'), "prompt_tokens": (' + _INT + rb")"
                     rb'(?:, "reasoning_tokens": (?:null|' + _INT + rb"))?\}\n", re.M)
_GRADE = re.compile(_HEAD + rb', "grader": ' + _STR + rb', "grader_version": (' + _INT + rb'), "correct": (true|false|null), '
                    rb'"score": (?:null|' + _NUM + rb'), "answer": (null|' + _STR + rb")(, [^\n]*)?\}\n", re.M)
# a grade's grading_id is its last field: at the end of the rest of its row (without the closing brace)
_GRADING_ID = re.compile(rb', "grading_id": (' + _STR + rb")\Z")
_SCORE = re.compile(_HEAD + rb', "verifier": ' + _STR + rb', "score": (' + _NUM + rb")(?:, [^\n]*?)?"
                    rb', "tokens": (' + _INT + rb'), "calls": (?:null|' + _INT + rb")\}\n", re.M)
# the keys each kind reads: each must occur once per row (grading_id: once per row that has it)
_KEYS = {"samples": (b"problem_id", b"sample_idx", b"n_tokens", b"prompt_tokens"),
         "grades": (b"problem_id", b"sample_idx", b"grader_version", b"correct", b"answer"),
         "scores": (b"problem_id", b"sample_idx", b"score", b"tokens")}


class _Slow(Exception):
    """A file the fast path does not read: the slow path reads the run."""


def _scan(path: Path, pattern: re.Pattern[bytes], kind: str) -> list[tuple[bytes, ...]]:
    """Every row of ``path`` as its regex groups, or ``_Slow`` (module docstring)."""
    data = path.read_bytes() if path.is_file() else b""
    if not data:
        return []
    if not data.endswith(b"\n"):
        raise _Slow
    rows: list[tuple[bytes, ...]] = pattern.findall(data)
    if len(rows) != data.count(b"\n"):
        raise _Slow
    if any(data.count(b'"' + key + b'": ') != len(rows) for key in _KEYS[kind]):
        raise _Slow
    if kind == "grades":  # the rest of each row -> its grading_id literal ("" where it has none)
        ends = {rest: (m.group(1) if (m := _GRADING_ID.search(rest)) else b"") for rest in {r[5] for r in rows}}
        rows = [(*r[:5], ends[r[5]]) for r in rows]
        if data.count(b'"grading_id": ') != sum(1 for r in rows if r[5]):
            raise _Slow
    return rows


class _Ids:
    """Problem ids (raw UTF-8 bytes) as integer codes, in the order of the ids as text."""

    def __init__(self, raw: Sequence[bytes]) -> None:
        try:
            text = {r: r.decode("utf-8") for r in dict.fromkeys(raw)}
        except UnicodeDecodeError:
            raise _Slow from None
        self.ids = sorted(set(text.values()))
        pos = {pid: i for i, pid in enumerate(self.ids)}
        self.code = {r: pos[t] for r, t in text.items()}

    def keys(self, pids: Sequence[bytes], idx: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
        codes = np.fromiter(map(self.code.__getitem__, pids), dtype=np.int64, count=len(pids))
        return codes, _ints(idx)


def _ints(raw: Sequence[bytes]) -> np.ndarray:
    try:
        return np.array(raw, dtype=bytes).astype(np.int64) if raw else np.zeros(0, dtype=np.int64)
    except OverflowError:  # beyond 64 bits: json reads it, so the slow path does
        raise _Slow from None


def _first(codes: np.ndarray, idx: np.ndarray, last: bool = False) -> np.ndarray:
    """Row positions of each key's first (``last``: last) row, in key order (problem, then sample_idx)."""
    if not codes.size:
        return np.zeros(0, dtype=np.int64)
    lo = int(idx.min())
    key = codes * (int(idx.max()) - lo + 1) + (idx - lo)
    if last:
        _, at = np.unique(key[::-1], return_index=True)
        return codes.size - 1 - at
    return np.unique(key, return_index=True)[1]


def _text(raw: bytes) -> str | None:
    return None if raw == b"null" else str(json.loads(raw.decode("utf-8")))


@dataclass(frozen=True)
class _Rows:
    """A run's rows as arrays (file order; grades only those of the accepted grading), before the
    slow path's rules pick each key's row: what both sources (the files, ``columns.npz``) give."""

    ids: list[str]  # problem ids, sorted: the codes index them
    samples: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # codes, sample_idx, prompt, generated tokens
    grades: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # codes, sample_idx, right (bool), answer code
    labels: list[str | None]  # answer code -> answer; the last is None (code -1)
    scores: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]  # codes, sample_idx, score, tokens


def fast_inputs(run: RunData, verifiers: Sequence[str]) -> tuple[dict[str, tuple[float, float]], dict[str, dict[str, float]],
                                                                 dict[str | None, list[ProblemOutcome]]] | None:
    """What ``recipe_table.compute_table`` reads of ``run`` (policy tokens per problem, each verifier's
    tokens per problem, outcomes without and with each verifier's scores), or None (module docstring):
    from the run's ``columns.npz`` while it is current, else from the row files."""
    for source in (_stored, _read):
        try:
            return _inputs(source(run, verifiers))
        except _Slow:
            continue
    return None


def _stored(run: RunData, verifiers: Sequence[str]) -> _Rows:
    """The rows as the scoring kept them (``pipeline.run_columns``), while the files are as they were then."""
    name, under = grade_filter(run)
    cols = read_columns(run.path, name, under, verifiers)
    if cols is None:
        raise _Slow
    codes, idx = cols.code, cols.idx
    return _Rows(list(cols.ids), (codes, idx, cols.prompt_tokens, cols.n_tokens),
                 (codes, idx, cols.correct == 1, cols.answer), [*cols.answers, None],
                 {v: (codes, idx, score, tokens) for v, (score, tokens) in cols.scores.items()})


def _read(run: RunData, verifiers: Sequence[str]) -> _Rows:
    """The rows read from the row files by the regexes (or ``_Slow``)."""
    name, under = grade_filter(run)
    grades = _scan(run.path / "grades" / f"{name}.jsonl", _GRADE, "grades")
    if not grades:  # nothing graded: the slow path says so
        raise _Slow
    samples = _scan(run.path / "samples.jsonl", _SAMPLE, "samples")
    scores = {v: _scan(run.path / "scores" / f"{v}.jsonl", _SCORE, "scores") for v in verifiers}
    ids = _Ids([r[0] for rows in (grades, samples, *scores.values()) for r in rows])
    pid, idx, gen, prompt = (list(c) for c in zip(*samples, strict=True)) if samples else ([], [], [], [])
    s_codes, s_idx = ids.keys(pid, idx)
    policy = (s_codes, s_idx, _ints(prompt).astype(float), _ints(gen).astype(float))
    # grades: the accepted rows
    g_pid, g_idx, g_ver, g_ok, g_ans, g_gid = (list(c) for c in zip(*grades, strict=True))
    codes, idx_ = ids.keys(g_pid, g_idx)
    keep = np.ones(len(grades), dtype=bool)
    if under is not None:
        pairs = list(zip(g_ver, g_gid, strict=True))  # a grade without grading_id was graded under ""
        tags = {t: int(t[0]) == under[0] and (_text(t[1]) if t[1] else "") == under[1] for t in set(pairs)}
        keep = np.fromiter(map(tags.__getitem__, pairs), dtype=bool, count=len(grades))
    truth = {b"true": 1, b"false": 0, b"null": -1}
    right = np.fromiter(map(truth.__getitem__, g_ok), dtype=np.int8, count=len(g_ok)) == 1
    labels: list[str | None] = []
    number: dict[bytes, int] = {b"null": -1}
    for raw in dict.fromkeys(g_ans):
        if raw not in number:
            number[raw] = len(labels)
            labels.append(_text(raw))
    answer = np.fromiter(map(number.__getitem__, g_ans), dtype=np.int64, count=len(g_ans))
    by_verifier = {}
    for v, vrows in scores.items():
        v_pid, v_idx, v_score, v_tok = (list(c) for c in zip(*vrows, strict=True)) if vrows else ([],) * 4
        vc, vi = ids.keys(v_pid, v_idx)
        by_verifier[v] = (vc, vi, np.array(v_score, dtype=bytes).astype(float) if vrows else np.zeros(0),
                          _ints(v_tok).astype(float))
    return _Rows(ids.ids, policy, (codes[keep], idx_[keep], right[keep], answer[keep]), [*labels, None], by_verifier)


def _inputs(rows: _Rows) -> tuple[dict[str, tuple[float, float]], dict[str, dict[str, float]],
                                  dict[str | None, list[ProblemOutcome]]]:
    """The rules of the slow path over ``rows`` (module docstring): each key's first sample and grade,
    a score's first row for the outcomes and its last for the ledger."""
    ids, size = rows.ids, len(rows.ids)
    s_codes, s_idx, s_prompt, s_gen = rows.samples
    at = _first(s_codes, s_idx)
    s_codes, s_idx = s_codes[at], s_idx[at]
    if np.isnan(s_prompt[at]).any() or np.isnan(s_gen[at]).any():  # a count missing: the slow path names it
        raise _Slow
    count = np.bincount(s_codes, minlength=size).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        prompt = np.bincount(s_codes, s_prompt[at], minlength=size) / count
        gen = np.bincount(s_codes, s_gen[at], minlength=size) / count
    g_codes, g_idx, right, answer = rows.grades
    if not g_codes.size:  # nothing graded: the slow path says so
        raise _Slow
    first = _first(g_codes, g_idx)
    codes, idx = g_codes[first], g_idx[first]
    if np.setdiff1d(codes, s_codes).size:  # graded without samples: the slow path names it
        raise _Slow
    starts, stops, plain = _outcomes(ids, codes, right[first], answer[first], rows.labels)
    out: dict[str | None, list[ProblemOutcome]] = {None: plain}
    per_verifier: dict[str, dict[str, float]] = {}
    for v, (vc, vi, value, tokens) in rows.scores.items():
        lo = min((int(a.min()) for a in (vi, idx, s_idx) if a.size), default=0)
        if max((int(a.max()) - lo for a in (vi, idx, s_idx) if a.size), default=0) >= 1 << 32:
            raise _Slow  # sample indices too far apart for one 64-bit key
        head = _first(vc, vi)
        got = _lookup(vc[head] * (1 << 32) + (vi[head] - lo), value[head], codes * (1 << 32) + (idx - lo), -math.inf)
        out[v] = [ProblemOutcome(o.problem_id, o.correct, o.answers, tuple(got[a:b].tolist()))
                  for o, a, b in zip(plain, starts, stops, strict=True)]
        # the ledger: each sample's latest row, over the samples' keys
        last = _first(vc, vi, last=True)
        spent = _lookup(vc[last] * (1 << 32) + (vi[last] - lo), tokens[last], s_codes * (1 << 32) + (s_idx - lo), math.nan)
        seen = ~np.isnan(spent)
        if np.isnan(tokens[last]).any():  # a score without a token count: the slow path names it
            raise _Slow
        n = np.bincount(s_codes[seen], minlength=size)
        total = np.bincount(s_codes[seen], spent[seen], minlength=size)
        per_verifier[v] = {ids[c]: float(total[c] / n[c]) for c in np.flatnonzero(n).tolist()}
    policy = {ids[c]: (float(prompt[c]), float(gen[c])) for c in np.unique(s_codes).tolist()}
    return policy, per_verifier, out


def _outcomes(ids: list[str], codes: np.ndarray, right: np.ndarray, answer: np.ndarray, labels: list[str | None]
              ) -> tuple[list[int], list[int], list[ProblemOutcome]]:
    """Each problem's outcome from its grades (``codes`` sorted by problem, then sample), and where
    its rows start and stop: a sample graded right votes for the problem's first right answer."""
    cut = np.flatnonzero(np.diff(codes)) + 1
    starts, stops = [0, *cut.tolist()], [*cut.tolist(), int(codes.size)]
    problem = np.repeat(np.arange(len(starts)), np.diff([*starts, int(codes.size)]))
    votes_right = right & (answer >= 0)
    first_of, at = np.unique(problem[votes_right], return_index=True)
    first = np.full(len(starts), -1, dtype=np.int64)
    first[first_of] = answer[votes_right][at]
    vote = np.where(votes_right, first[problem], answer)
    correct, votes = right.astype(float).tolist(), list(map(labels.__getitem__, vote.tolist()))
    plain = [ProblemOutcome(ids[c], tuple(correct[a:b]), tuple(votes[a:b]))
             for c, a, b in zip(codes[starts].tolist() if codes.size else [], starts, stops, strict=True)]
    return (starts, stops, plain) if codes.size else ([], [], [])


def _lookup(keys: np.ndarray, values: np.ndarray, wanted: np.ndarray, missing: float) -> np.ndarray:
    """``values`` at ``wanted`` keys (``keys`` sorted and distinct), ``missing`` where absent."""
    if not keys.size:
        return np.full(wanted.shape, missing)
    at = np.clip(np.searchsorted(keys, wanted), 0, keys.size - 1)
    return np.where(keys[at] == wanted, values[at], missing)

