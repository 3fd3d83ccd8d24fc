"""Each problem of a run in one line, written beside metrics.json: what a reader of the run shows first.

``summarize`` turns one problem's grades, verifier scores and sample lengths (by ``sample_idx``)
into its line: sample and graded counts, pass rate (the mean outcome: 1/0, or the reward), right
samples, best outcome, the majority answer class (``bonbench.pipeline.votes.vote_answers``: right
answers vote together, other answers keep their canonical forms), its share, how many classes tie
at the top and whether it is right (None for a tie that holds the right class: maj@k credits it in
part), the verifier's pick (the highest score, the first sample on a tie), its score and whether
it is right, and the mean length in tokens. The run viewer computes its problems table with this
same function from the rows it reads by key, so both ways give the same line.

``write_summary`` writes ``problems.json`` (``SUMMARY``) once a run is scored (``stages.evaluate``),
atomically, with the sizes of the row files it was computed from and the grader and verifier whose
rows it read (``bonbench.pipeline.row_key.rows_key``, the key ``columns.npz`` has too). A reader
uses it only while that key still holds (``row_key.is_current``, for exactly that verifier): any
row appended since (a regrade, a run still being written, a merge) changes a size, and the reader
computes the table from the rows instead. The next scoring writes it anew.

What it does not do: compute metrics (``scoring``), or read row files.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from bonbench.core.outputs import write_json
from bonbench.core.records import Grade, Sample, Score
from bonbench.core.store import RunStore
from bonbench.pipeline.row_key import file_sizes, row_files, rows_key
from bonbench.pipeline.votes import vote_answers

SUMMARY = "problems.json"
FORMAT = 1
FLOATS = ("pass_rate", "pick_score", "mean_tokens", "best", "pick_value", "majority_share")  # NaN is null in the file
Key = tuple[str, int]


class Verdict(NamedTuple):
    """The part of a ``Grade`` a problem's line reads (``vote_answers`` reads ``correct`` and ``answer``)."""

    correct: bool | None
    score: float | None
    answer: str | None

    def value(self) -> float:
        """``Grade.value``'s rule: the reward of a reward-judged grade, else 1/0."""
        if self.correct is None and self.score is not None:
            return float(self.score)
        return 1.0 if self.correct else 0.0


def summarize(problem_id: str, grades: Mapping[int, Verdict], scores: Mapping[int, float],
              lengths: Mapping[int, float]) -> dict[str, Any]:
    """One problem's line from its grades, verifier scores and sample lengths (each by sample_idx)."""
    order = sorted(grades)
    graded = [grades[i] for i in order]
    votes = vote_answers(graded)  # type: ignore[arg-type]  # reads only .correct and .answer
    counts = Counter(v for v in votes if v is not None)
    top = max(counts.values(), default=0)
    tied = [v for v in dict.fromkeys(votes) if v is not None and counts[v] == top]
    majority = tied[0] if tied else None  # on a tie, the first class in sample order
    right_class = next((v for g, v in zip(graded, votes, strict=True) if g.correct is True and v is not None), None)
    # a tie that holds the right class is neither right nor wrong (maj@k credits it in part)
    majority_right = None if majority is None else (right_class in tied and (len(tied) == 1 or None))
    finite = [(x, -i) for i, x in scores.items() if math.isfinite(x)]
    pick = -max(finite)[1] if finite else None  # the highest score, the first sample on a tie
    pick_grade = grades.get(pick) if pick is not None else None
    tokens = [x for x in lengths.values() if math.isfinite(x)]
    values = [g.value() for g in graded]
    return {
        "problem_id": problem_id, "n_samples": len(set(lengths) | set(grades)), "n_graded": len(graded),
        "pass_rate": sum(values) / len(values) if values else math.nan,
        "n_right": sum(g.correct is True for g in graded),
        "majority": majority, "majority_share": top / len(votes) if counts else 0.0,
        "majority_right": majority_right, "majority_ties": len(tied),
        "pick": pick, "pick_score": scores[pick] if pick is not None else math.nan,
        "pick_right": None if pick_grade is None or pick_grade.correct is None else pick_grade.correct,
        "mean_tokens": sum(tokens) / len(tokens) if tokens else math.nan,
        "rewards": bool(graded) and all(g.correct is None and g.score is not None for g in graded),
        "best": max(values, default=math.nan), "pick_value": pick_grade.value() if pick_grade is not None else math.nan,
    }


def summaries(samples: Mapping[Key, Sample], grades: Mapping[Key, Grade],
              scores: Mapping[Key, Score] | None) -> list[dict[str, Any]]:
    """Every problem's line, in the order the samples first name the problems (the samples file's
    order), then any problem that is only graded."""
    by_problem: dict[str, tuple[dict[int, Verdict], dict[int, float], dict[int, float]]] = {}
    for (pid, i), s in samples.items():
        by_problem.setdefault(pid, ({}, {}, {}))[2][i] = math.nan if s.n_tokens is None else float(s.n_tokens)
    for (pid, i), g in grades.items():
        by_problem.setdefault(pid, ({}, {}, {}))[0][i] = Verdict(g.correct, g.score, g.answer)
    for (pid, i), sc in (scores or {}).items():
        if pid in by_problem:
            by_problem[pid][1][i] = float(sc.score)
    return [summarize(pid, *parts) for pid, parts in by_problem.items()]


def write_summary(store: RunStore, lines: Sequence[Mapping[str, Any]], grader: str | None, verifier: str | None) -> Path:
    """Write ``problems.json`` (atomically) with the key of the row files as they are now."""
    verifiers = [verifier] if verifier else []
    sizes = file_sizes(store.root, row_files(grader, verifiers))
    rows = [{k: None if k in FLOATS and isinstance(v, float) and math.isnan(v) else v for k, v in line.items()}
            for line in lines]
    path = store.root / SUMMARY
    # one line: 5,000 problems stay about 1 MB, read in milliseconds (write_json: temp file, fsync, rename)
    write_json(path, {"format": FORMAT, "key": rows_key(sizes, grader, verifiers), "problems": rows}, indent=None)
    return path


def read_lines(doc: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The lines of a read ``problems.json`` (null read back as NaN), or None when it is not one of this format."""
    problems = doc.get("problems")
    if doc.get("format") != FORMAT or not isinstance(problems, list):
        return None
    try:
        return [{**p, **{k: math.nan if p[k] is None else float(p[k]) for k in FLOATS}} for p in problems]
    except (KeyError, TypeError, ValueError):
        return None
