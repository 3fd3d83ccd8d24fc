"""Read the rows a recipe table needs fast, exactly as the slow path reads them, or not at all.

``recipe_table`` needs, of one run, each problem's outcomes (grades: verdict and answer class; each
verifier's score) and its ledger (``pipeline.ledger``: prompt and generated tokens per sample, each
verifier's tokens). The slow path builds a record of every row (``records.from_row``, 11-25 us a
row). ``fast_inputs`` takes the same fields from one of two sources, as numpy arrays keyed by
(problem_id, sample_idx), never by file order:

- the run's ``columns.npz`` (``pipeline.run_columns``), written when the run was scored, while the
  row files are as they were then (their sizes, the grading and the verifiers' versions): no row
  is read;
- else the row files, through the one row reader (``core.row_index`` over ``core.row_scan``:
  compiled regexes for rows in the store's layout, ``json`` for any other line, so every valid row
  reads as ``json`` reads it).

It declines (None: the caller takes the slow path, which warns or refuses in its own words) where
the records would not read the files as the arrays say: a torn or unterminated last line, a line
that is not a row, a count the cost needs missing (prompt or generated tokens, a verifier's
tokens), a grade whose verdict is null or missing (the records read the one as undecided and
refuse the other), nothing graded or a problem graded without samples.

The rules are those of the slow path: grades and scores keep a key's first accepted row
(``JsonlTable.read``; grades only those metrics.json was graded under, ``rundir.grade_filter``),
the ledger a score's last row (``ledger.latest_scores``) over the samples' keys, which keep their
first row; a sample graded right votes for the problem's first right answer
(``pipeline.votes.vote_answers``); an unscored sample scores -inf.

What it does not do: compute estimators or keep tables (``recipe_table``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bonbench.apps.analysis.run_rows import grade_filter
from bonbench.apps.analysis.rundir import RunData
from bonbench.core.row_index import RowIndex
from bonbench.metrics.estimators import ProblemOutcome
from bonbench.pipeline.run_columns import read_columns


class _Slow(Exception):
    """Rows the records would read otherwise (or refuse): the slow path reads the run."""


def _index(path: Path, kind: str) -> RowIndex:
    """``path`` indexed with its ``kind``'s fields, or ``_Slow`` where the records read it otherwise: a
    torn or unterminated last line (the records warn, or read a row that lost only its newline) or
    a line that is not a row (the records refuse it, naming the line)."""
    index = RowIndex(path, kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a torn line: the slow path warns in its own words
        index.refresh()
    if index.torn or index.bad or index.indexed != index.size:
        raise _Slow
    return index


def _columns(index: RowIndex, pos: dict[str, int], names: Sequence[str]) -> tuple[np.ndarray, ...]:
    """Every row of ``index`` as arrays, problem by problem in file order: problem codes (``pos``),
    sample_idx and the fields ``names``."""
    problems = list(index.problems.items())
    if not problems:
        return (np.zeros(0, dtype=np.int64),) * (2 + len(names))
    codes = np.repeat([pos[pid] for pid, _ in problems], [len(rows.idx) for _, rows in problems])
    return (codes, *(np.concatenate([np.frombuffer(rows.idx if name == "idx" else rows.columns[name],
                                                   dtype=_DTYPES[name]) for _, rows in problems])
                     for name in ("idx", *names)))


_DTYPES = {"idx": np.int64, "n_tokens": np.float64, "prompt_tokens": np.float64, "correct": np.int8,
           "answer": np.intc, "tag": np.intc, "score": np.float64, "tokens": np.float64}


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
    """The rows read from the row files (``core.row_index``, whose ``row_scan`` reads every valid
    row as ``json`` does), or ``_Slow``."""
    name, under = grade_filter(run)
    grades = _index(run.path / "grades" / f"{name}.jsonl", "grades")
    samples = _index(run.path / "samples.jsonl", "samples")
    scores = {v: _index(run.path / "scores" / f"{v}.jsonl", "scores") for v in verifiers}
    ids = sorted(set(grades.problems).union(samples.problems, *(s.problems for s in scores.values())))
    pos = {pid: i for i, pid in enumerate(ids)}
    s_codes, s_idx, gen, prompt = _columns(samples, pos, ("n_tokens", "prompt_tokens"))
    codes, idx, correct, answer, tag = _columns(grades, pos, ("correct", "answer", "tag"))
    keep = np.ones(codes.size, dtype=bool)
    if under is not None:  # the verdicts metrics.json was graded under (a grade without grading_id: under "")
        wanted = [c for c, t in enumerate(grades.tags.values) if t == (under[0], under[1])]
        keep = np.isin(tag, wanted)
    if (correct[keep] == -1).any():  # a verdict null or missing: the records accept the one, refuse the other
        raise _Slow
    by_verifier = {}
    for v, index in scores.items():
        vc, vi, value, tokens = _columns(index, pos, ("score", "tokens"))
        by_verifier[v] = (vc, vi, value, tokens)
    return _Rows(ids, (s_codes, s_idx, prompt, gen), (codes[keep], idx[keep], correct[keep] == 1, answer[keep]),
                 [*grades.answers.values, None], by_verifier)


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

