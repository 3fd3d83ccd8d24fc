"""A scored run's rows as columns, written beside problems.json, so that a reader of every sample
(``bonbench recipe``) need not parse the row files.

``columns.npz`` holds, for every sample the scoring used (sorted by problem, then sample_idx): its
problem, sample_idx, generated and prompt tokens, the grade's verdict (1, 0, -1 for None) and
answer (a code into the answers; -1 for None), and for each verifier its score and tokens (NaN
where not counted). ``write_columns`` writes it when a run is scored (``stages.evaluate``, with the
rows it has in memory), atomically, keyed as ``problems.json`` is (``bonbench.pipeline.row_key``: the
row files' sizes, the grader and the verifiers), with the (grader_version, grading_id) of its
verdicts and each verifier's (version, fingerprint) beside the key.
It is written only when each row file holds exactly the rows in memory, one line each (no row of
an older grader or verifier version, no sample beyond n, no duplicate or blank line), so that any
reader keeping a key's first row reads from the files exactly what the columns hold. It reads no
row file to know that: the store counted each file's lines and bytes as it read and appended the
rows (``RunStore.extents``), and the rows in memory came from those lines, so N distinct keys in
a file of N lines, none blank, of the size counted, are each in it once and alone. Scoring a run
with a second verifier keeps the first verifier's columns while their scores file is unchanged.

``read_columns`` returns them only while that key holds for the grader and verifiers asked for
(``row_key.is_current``): a row appended since (a regrade, a resumed or merged run) changes a size,
and the reader reads the rows instead.

What it does not do: compute metrics or costs, or decide what a reader does without the columns.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from bonbench.core.outputs import write_bytes
from bonbench.core.records import Grade, Sample, Score
from bonbench.core.store import Extent
from bonbench.pipeline.row_key import file_sizes, is_current, row_files, rows_key

COLUMNS = "columns.npz"
FORMAT = 2  # 2: the key is row_key.rows_key (1 had its own)
Key = tuple[str, int]


@dataclass(frozen=True)
class RunColumns:
    """Every sample's fields a cost and an estimator need (module docstring), samples in key order."""

    ids: tuple[str, ...]  # the problems, sorted
    code: np.ndarray  # per sample: its problem's position in ``ids``
    idx: np.ndarray  # sample_idx
    n_tokens: np.ndarray  # generated tokens (float; NaN: not counted)
    prompt_tokens: np.ndarray  # the prompt's tokens (float; NaN: not counted)
    correct: np.ndarray  # int8: 1 right, 0 wrong, -1 undecided
    answer: np.ndarray  # int: position in ``answers``, -1 for None
    answers: tuple[str, ...]
    grader: str
    grading: tuple[int, str]  # (grader_version, grading_id) of every verdict
    scores: Mapping[str, tuple[np.ndarray, np.ndarray]]  # verifier -> (score, tokens; NaN: not counted)
    scorers: Mapping[str, tuple[int, str]]  # verifier -> (verifier_version, verifier_fingerprint)


def _count(x: int | None) -> float:
    return math.nan if x is None else float(x)


def from_records(samples: Mapping[Key, Sample], grades: Mapping[Key, Grade],
                 scores: Mapping[str, Mapping[Key, Score]]) -> RunColumns | None:
    """The columns of one scoring's rows; None when grades or scores do not cover exactly the
    samples' keys, or the verdicts were reached under more than one grader setting."""
    keys = sorted(samples)
    if set(grades) != set(samples) or any(set(s) != set(samples) for s in scores.values()) or not keys:
        return None
    tags = {(g.grader, g.grader_version, g.grading_id) for g in grades.values()}
    scorers = {v: {(s.verifier_version, s.verifier_fingerprint) for s in rows.values()} for v, rows in scores.items()}
    if len(tags) != 1 or any(len(t) != 1 for t in scorers.values()):
        return None
    ((grader, version, gid),) = tags
    ids = tuple(sorted({pid for pid, _ in keys}))
    pos = {pid: i for i, pid in enumerate(ids)}
    answers: dict[str, int] = {}
    graded = [grades[k] for k in keys]
    return RunColumns(
        ids, np.array([pos[pid] for pid, _ in keys], dtype=np.int64), np.array([i for _, i in keys], dtype=np.int64),
        np.array([_count(samples[k].n_tokens) for k in keys]), np.array([_count(samples[k].prompt_tokens) for k in keys]),
        np.array([-1 if g.correct is None else int(bool(g.correct)) for g in graded], dtype=np.int8),
        np.array([-1 if g.answer is None else answers.setdefault(g.answer, len(answers)) for g in graded], dtype=np.int64),
        tuple(answers), grader, (int(version), str(gid)),
        {v: (np.array([float(rows[k].score) for k in keys]), np.array([_count(rows[k].tokens) for k in keys]))
         for v, rows in scores.items()},
        {v: next(iter(t)) for v, t in scorers.items()})


def write_columns(root: Path, cols: RunColumns, extents: Mapping[str, Extent]) -> Path | None:
    """Write ``root/columns.npz`` (atomically) when each row file holds exactly ``cols``' rows
    (module docstring), keeping an earlier verifier's columns while they still hold; returns the
    path, or None (nothing written) when the files hold other rows too.

    ``extents`` (``RunStore.extents``: what the store saw of each row file as it read and appended
    the rows in ``cols``) says so without reading a file again: a file is as seen while its size is
    the one seen, and holds exactly ``cols``' rows when it was seen as that many lines, none blank."""
    names = row_files(cols.grader, cols.scores)
    now = file_sizes(root, names)
    sizes: dict[str, int] = {}
    for name in names:
        seen = extents.get(name)
        if seen is None or not seen.lines == seen.rows == cols.idx.size or now.get(name) != seen.size:
            return None
        sizes[name] = seen.size
    old = _load(root / COLUMNS)
    keep: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    scorers = dict(cols.scorers)
    if old is not None and old[1].grader == cols.grader and old[1].grading == cols.grading:
        for v, (score, tokens) in old[1].scores.items():
            # the same samples and grades as now, and its scores file as it was
            if v not in cols.scores and is_current(old[0], {**sizes, **file_sizes(root, row_files(None, [v]))},
                                                   cols.grader, [v]):
                keep[v], scorers[v] = (score, tokens), old[1].scorers[v]
                sizes[f"scores/{v}.jsonl"] = old[0]["sizes"][f"scores/{v}.jsonl"]
    cols = replace(cols, scores={**cols.scores, **keep}, scorers=scorers)
    meta = {"format": FORMAT, "key": rows_key(sizes, cols.grader, cols.scores), "grading": list(cols.grading),
            "scorers": {v: list(t) for v, t in cols.scorers.items()}, "ids": list(cols.ids),
            "answers": list(cols.answers), "verifiers": list(cols.scores)}
    arrays = {"meta": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), "code": cols.code, "idx": cols.idx,
              "n_tokens": cols.n_tokens, "prompt_tokens": cols.prompt_tokens, "correct": cols.correct,
              "answer": cols.answer}
    for i, (score, tokens) in enumerate(cols.scores.values()):
        arrays[f"score{i}"], arrays[f"tokens{i}"] = score, tokens
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds as one array-like: each is one
    return write_bytes(root / COLUMNS, buf.getvalue())


def _load(path: Path) -> tuple[dict[str, Any], RunColumns] | None:
    """The key and columns kept in ``path``, or None (absent, damaged, another format)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(z["meta"].tobytes().decode())
            if meta.get("format") != FORMAT:
                return None
            key = meta["key"]
            verifiers = meta["verifiers"]
            cols = RunColumns(tuple(meta["ids"]), z["code"], z["idx"], z["n_tokens"], z["prompt_tokens"], z["correct"],
                              z["answer"], tuple(meta["answers"]), key["grader"], tuple(meta["grading"]),
                              {v: (z[f"score{i}"], z[f"tokens{i}"]) for i, v in enumerate(verifiers)},
                              {v: tuple(meta["scorers"][v]) for v in verifiers})
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return key, cols


def read_columns(root: Path, grader: str, grading: tuple[Any, Any] | None,
                 verifiers: Sequence[str]) -> RunColumns | None:
    """The run's columns of ``grader`` (its verdicts reached under ``grading``: (grader_version,
    grading_id), None for any) and ``verifiers``, while their key holds (module docstring); else None."""
    got = _load(Path(root) / COLUMNS)
    if got is None:
        return None
    key, cols = got
    if grading is not None and list(grading) != list(cols.grading):
        return None
    if not is_current(key, file_sizes(Path(root), row_files(grader, verifiers)), grader, verifiers):
        return None
    return replace(cols, scores={v: cols.scores[v] for v in verifiers}, scorers={v: cols.scorers[v] for v in verifiers})
