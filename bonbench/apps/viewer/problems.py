"""One run's problems as the viewer shows them: the table of every problem, and one problem whole.

``problem_table`` computes one ``ProblemRow`` per problem from the run's rows read by key
(``RunView.index``): the pass rate and the sample count from the grades the metrics were computed
from (metrics.json's ``grading``), the majority answer from the answer classes maj@k counts
(``bonbench.pipeline.votes.vote_answers``: right answers vote together; without the task's grader,
wrong answers keep their canonical forms), the verifier's pick (the highest score, the first sample
on a tie) and whether each is right, the mean length from
samples.jsonl's ``n_tokens``, and the per-problem values of the run's metrics as metrics.json keeps
them (``per_problem``: the exact estimates the report averaged, never recomputed here). It reads
one problem's rows at a time, so memory holds the table, not the rows.

``problem_detail`` gathers every sample of one problem with its grade, score (per-step scores of a
PRM included), vote class and the pick.

What it does not do: render (``pages``), or load the task (``prompts``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bonbench.apps.viewer.runs import RunView
from bonbench.core.records import Grade, Score, from_row
from bonbench.core.row_index import RowIndex
from bonbench.metrics.names import split_metric_name
from bonbench.pipeline.votes import vote_answers

FLAGS = ("solved", "unsolved", "verifier_wrong", "majority_wrong")


@dataclass(frozen=True)
class ProblemRow:
    """One line of the problems table."""

    problem_id: str
    n_samples: int
    n_graded: int
    pass_rate: float  # mean outcome of the graded samples (1/0, or the reward)
    n_right: int
    majority: str | None  # the most voted answer class (None: every sample abstained)
    majority_share: float
    majority_right: bool | None
    pick: int | None  # the verifier's pick (sample_idx)
    pick_score: float
    pick_right: bool | None
    mean_tokens: float
    metrics: Mapping[str, float]  # metrics.json's per-problem values of the dataset metrics

    @property
    def flags(self) -> tuple[str, ...]:
        """The filters this problem passes: solved / unsolved (some sample right or none), and
        verifier_wrong / majority_wrong (a right sample existed, yet the pick or the majority is wrong)."""
        out = ["solved" if self.n_right else "unsolved"]
        if self.n_right and self.pick_right is False:
            out.append("verifier_wrong")
        if self.n_right and self.majority_right is False:
            out.append("majority_wrong")
        return tuple(out)


@dataclass(frozen=True)
class SampleView:
    """One sample of one problem with all that is known of it."""

    sample_idx: int
    completion: str | None  # None: graded or scored, but its sample row is missing
    n_tokens: int | None
    finish_reason: str | None
    logprob: float | None
    grade: Grade | None
    score: Score | None
    vote: str | None
    picked: bool


def _grading_filter(run: RunView, grader: str) -> Callable[[dict[str, Any]], bool] | None:
    """Keep the grades metrics.json was computed from, when it says which (a regrade appends rows)."""
    grading = run.metrics_file().get("grading") or {}
    if grading.get("grader") != grader:
        return None
    version, gid = grading.get("grader_version"), grading.get("grading_id", "")
    return lambda row: row.get("grader_version") == version and row.get("grading_id", "") == gid


def _scoring_filter(run: RunView, verifier: str) -> Callable[[dict[str, Any]], bool] | None:
    """Keep the scores bon@k was computed from (its verifier version and fingerprint), when known."""
    for m in (run.metrics_file().get("metrics") or {}).values():
        if isinstance(m, Mapping) and m.get("verifier") == verifier and "verifier_version" in m:
            version, fp = m["verifier_version"], m.get("verifier_fingerprint", "")
            return lambda row: row.get("verifier_version", 1) == version and row.get("verifier_fingerprint", "") == fp
    return None


@dataclass(frozen=True)
class Sources:
    """Where one run's rows are read from: its row indexes, refreshed once per page, and the filters
    that keep the grades and scores its metrics were computed from."""

    samples: RowIndex | None
    grades: RowIndex | None
    grade_filter: Callable[[dict[str, Any]], bool] | None
    scores: RowIndex | None
    score_filter: Callable[[dict[str, Any]], bool] | None


def sources(run: RunView) -> Sources:
    grader, verifier = run.grader(), run.verifier()
    return Sources(run.index("samples.jsonl"),
                   run.index(f"grades/{grader}.jsonl") if grader else None,
                   _grading_filter(run, grader) if grader else None,
                   run.index(f"scores/{verifier}.jsonl") if verifier else None,
                   _scoring_filter(run, verifier) if verifier else None)


def _records(src: Sources, pid: str) -> tuple[dict[int, Grade], dict[int, Score], dict[int, dict[str, Any]]]:
    """One problem's grades, scores and sample rows by sample_idx."""
    grades = {} if src.grades is None else {
        i: from_row(Grade, row) for i, row in src.grades.keyed(pid, src.grade_filter).items()}
    scores = {} if src.scores is None else {
        i: from_row(Score, row) for i, row in src.scores.keyed(pid, src.score_filter).items()}
    samples = {} if src.samples is None else src.samples.keyed(pid)
    return grades, scores, samples


def _pick(scores: Mapping[int, Score]) -> int | None:
    finite = [(s.score, -i) for i, s in scores.items() if math.isfinite(s.score)]
    return -max(finite)[1] if finite else None


def _majority(votes: Sequence[str | None]) -> tuple[str | None, float]:
    counts = Counter(v for v in votes if v is not None)
    if not counts:
        return None, 0.0
    top = max(counts.values())
    first = next(v for v in votes if v is not None and counts[v] == top)  # a tie: the first in sample order
    return first, top / len(votes)


def _right_class(grades: Sequence[Grade], votes: Sequence[str | None]) -> str | None:
    return next((v for g, v in zip(grades, votes, strict=True) if g.correct is True and v is not None), None)


def problem_ids(src: Sources) -> list[str]:
    """The run's problems: those of its samples (in file order), then any only graded."""
    ids: dict[str, None] = {}
    for index in (src.samples, src.grades):
        if index is not None:
            ids.update(dict.fromkeys(index.problems()))
    return list(ids)


def dataset_metrics(run: RunView) -> list[str]:
    """The per-problem metric columns: metrics.json's per-problem entries without breakdown groups."""
    names = [n for n in (run.metrics_file().get("per_problem") or {}) if split_metric_name(n)[1] is None]
    return [row.name for row in run.metric_rows() if row.name in names]


def problem_row(src: Sources, pid: str, per_problem: Mapping[str, Mapping[str, Any]], columns: Sequence[str]) -> ProblemRow:
    """One problem's line of the table (``columns``: the metrics whose ``per_problem`` values it shows)."""
    grades, scores, samples = _records(src, pid)
    order = sorted(grades)
    graded = [grades[i] for i in order]
    votes = vote_answers(graded)
    majority, share = _majority(votes)
    right_class = _right_class(graded, votes)
    pick = _pick(scores)
    pick_grade = grades.get(pick) if pick is not None else None
    tokens = [float(r["n_tokens"]) for r in samples.values() if isinstance(r.get("n_tokens"), (int, float))]
    values = {}
    for name in columns:
        v = (per_problem.get(name) or {}).get(pid)
        values[name] = math.nan if v is None else float(v)
    return ProblemRow(
        problem_id=pid, n_samples=len(set(samples) | set(grades)), n_graded=len(graded),
        pass_rate=sum(g.value() for g in graded) / len(graded) if graded else math.nan,
        n_right=sum(g.correct is True for g in graded),
        majority=majority, majority_share=share,
        majority_right=None if majority is None or not graded else majority == right_class,
        pick=pick, pick_score=scores[pick].score if pick is not None else math.nan,
        pick_right=None if pick_grade is None or pick_grade.correct is None else pick_grade.correct,
        mean_tokens=sum(tokens) / len(tokens) if tokens else math.nan, metrics=values)


def problem_table(run: RunView) -> tuple[list[str], list[ProblemRow]]:
    """The metric columns and one row per problem."""
    columns = dataset_metrics(run)
    per_problem = run.metrics_file().get("per_problem") or {}
    src = sources(run)
    return columns, [problem_row(src, pid, per_problem, columns) for pid in problem_ids(src)]


def problem_detail(src: Sources, pid: str) -> list[SampleView]:
    """Every sample of one problem (sampled, graded or scored), in sample order."""
    grades, scores, samples = _records(src, pid)
    order = sorted(set(samples) | set(grades) | set(scores))
    graded = [grades[i] for i in order if i in grades]
    vote_of = dict(zip([i for i in order if i in grades], vote_answers(graded), strict=True))
    pick = _pick(scores)
    out = []
    for i in order:
        row = samples.get(i, {})
        completion = row.get("completion")
        out.append(SampleView(
            sample_idx=i, completion=None if completion is None else str(completion),
            n_tokens=row.get("n_tokens"), finish_reason=row.get("finish_reason"), logprob=row.get("logprob"),
            grade=grades.get(i), score=scores.get(i), vote=vote_of.get(i), picked=i == pick))
    return out


def known(src: Sources, pid: str) -> bool:
    """Whether the run has rows of problem ``pid`` (the pages answer 404 otherwise)."""
    return any(index is not None and pid in index.offsets for index in (src.samples, src.grades))
