"""One run's problems as the viewer shows them: the table of every problem, and one problem whole.

``problem_table`` computes one ``ProblemRow`` per problem from the run's rows read by key
(``RunView.index``): the pass rate and the sample count from the grades the metrics were computed
from (metrics.json's ``grading``), the majority answer from the answer classes maj@k counts
(``bonbench.pipeline.votes.vote_answers``: right answers vote together; without the task's grader,
wrong answers keep their canonical forms), the verifier's pick (the highest score, the first sample
on a tie) and whether each is right, the mean length from
samples.jsonl's ``n_tokens``, and the per-problem values of the run's metrics as metrics.json keeps
them (``per_problem``: the exact estimates the report averaged, never recomputed here). It reads
one problem's rows at a time, so memory holds the table, not the rows. The line of a problem is
``bonbench.pipeline.problem_summary.summarize``'s, the function the pipeline writes ``problems.json``
with once a run is scored; ``summary_rows`` reads that file instead of the rows while it is current.

``problem_detail`` gathers every sample of one problem with its grade, score (per-step scores of a
PRM included), vote class and the pick.

What it does not do: render (``pages``), or load the task (``prompts``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from bonbench.apps.viewer.runs import RunView
from bonbench.core.records import Grade, Score
from bonbench.core.row_index import RowIndex
from bonbench.metrics.names import split_metric_name
from bonbench.pipeline.problem_summary import SUMMARY, Verdict, read_lines, summarize
from bonbench.pipeline.row_key import is_current, row_files
from bonbench.pipeline.votes import vote_answers

FLAGS = ("solved", "unsolved", "verifier_wrong", "majority_wrong")
REWARD_FLAGS = ("pick_below_mean",)


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
    majority_right: bool | None  # None: no vote, or a tie at the top that holds the right class
    pick: int | None  # the verifier's pick (sample_idx)
    pick_score: float
    pick_right: bool | None
    mean_tokens: float
    rewards: bool = False  # a reward-judged problem: its grades carry a reward and no verdict
    best: float = math.nan  # the highest outcome of a sample (1/0, or the reward)
    pick_value: float = math.nan  # the outcome of the verifier's pick
    majority_ties: int = 1  # how many classes share the top vote count (1: a clear majority)

    @property
    def flags(self) -> tuple[str, ...]:
        """The filters this problem passes: solved / unsolved (some sample right or none), and
        verifier_wrong / majority_wrong (a right sample existed, yet the pick or the majority is wrong);
        for rewards, pick_below_mean (the verifier's pick earned less than the problem's mean reward)."""
        if self.rewards:
            return ("pick_below_mean",) if self.pick_value < self.pass_rate else ()
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
    other_scores: Mapping[str, float] = field(default_factory=dict)  # every other scores file (lp-*: KL terms)


def _grading(run: RunView, grader: str) -> tuple[Any, str] | None:
    """The grader version and grading id metrics.json was computed from, when it says (a regrade
    appends rows of another version)."""
    grading = run.metrics_file().get("grading") or {}
    return (grading.get("grader_version"), grading.get("grading_id", "")) if grading.get("grader") == grader else None


def _scoring(run: RunView, verifier: str) -> tuple[Any, str] | None:
    """The verifier version and fingerprint bon@k was computed from, when metrics.json says."""
    for m in (run.metrics_file().get("metrics") or {}).values():
        if isinstance(m, Mapping) and m.get("verifier") == verifier and "verifier_version" in m:
            return m["verifier_version"], m.get("verifier_fingerprint", "")
    return None


@dataclass(frozen=True)
class Sources:
    """Where one run's rows are read from: its row indexes, refreshed once per page, and the filters
    that keep the grades and scores its metrics were computed from."""

    samples: RowIndex | None
    grades: RowIndex | None
    scores: RowIndex | None
    grading: tuple[Any, str] | None  # the (grader_version, grading_id) of the grades kept; None: all
    scoring: tuple[Any, str] | None  # the (verifier_version, fingerprint) of the scores kept; None: all
    others: Mapping[str, RowIndex] = field(default_factory=dict)  # the other scores files, for a problem's page

    def grade_filter(self, row: Mapping[str, Any]) -> bool:
        return self.grading is None or (row.get("grader_version"), row.get("grading_id", "")) == self.grading

    def score_filter(self, row: Mapping[str, Any]) -> bool:
        return self.scoring is None or (row.get("verifier_version", 1), row.get("verifier_fingerprint", "")) == self.scoring

    def key(self) -> dict[str, Any]:
        """What a problems table computed from these sources depends on: each file's index state and
        the grading and scoring kept (``cache``)."""
        files = {str(i.path): [i.identity, i.indexed] for i in (self.samples, self.grades, self.scores) if i is not None}
        return {"files": files, "grading": self.grading, "scoring": self.scoring}


def sources(run: RunView) -> Sources:
    """The run's row indexes (refreshed now) and the grades and scores its metrics were computed from."""
    grader, verifier = run.grader(), run.verifier()
    return Sources(run.index("samples.jsonl"),
                   run.index(f"grades/{grader}.jsonl") if grader else None,
                   run.index(f"scores/{verifier}.jsonl") if verifier else None,
                   _grading(run, grader) if grader else None,
                   _scoring(run, verifier) if verifier else None)


def found_sources(run: RunView, row: ProblemRow) -> Sources | None:
    """One problem's rows found by an exact byte search in each row file (``RowIndex.of_problem``),
    for its page before the run's rows are read; None unless they are all the summary line ``row``
    counts (a row in another layout is not found: the caller reads the run instead)."""
    grader, verifier = run.grader(), run.verifier()
    paths = {"samples": run.file("samples.jsonl"), "grades": run.file(f"grades/{grader}.jsonl") if grader else None,
             "scores": run.file(f"scores/{verifier}.jsonl") if verifier else None}
    found = {k: None if p is None else RowIndex.of_problem(p, row.problem_id) for k, p in paths.items()}
    src = Sources(found["samples"], found["grades"], found["scores"], _grading(run, grader) if grader else None,
                  _scoring(run, verifier) if verifier else None)
    pid = row.problem_id
    samples = set() if src.samples is None else set(src.samples.keyed(pid))
    grades = set() if src.grades is None else set(src.grades.keyed(pid, src.grade_filter))
    scores = set() if src.scores is None else set(src.scores.keyed(pid, src.score_filter))
    # every graded sample has its sample row, and the counts are the summary's (a run's own rows always are)
    if not grades <= samples or len(samples) != row.n_samples or len(grades) != row.n_graded or (
            row.pick is not None and row.pick not in scores):
        return None
    others = {v: RowIndex.of_problem(p, row.problem_id) for v in run.row_files("scores") if v != verifier
              and (p := run.file(f"scores/{v}.jsonl")) is not None}
    return replace(src, others=others)


def other_scores(run: RunView, src: Sources) -> Sources:
    """``src`` with the run's other scores files (other verifiers, the log-probabilities of KL metrics)."""
    indexes = {v: run.index(f"scores/{v}.jsonl") for v in run.row_files("scores") if v != run.verifier()}
    return replace(src, others={v: i for v, i in indexes.items() if i is not None})


_GRADE_FIELDS = frozenset(f.name for f in fields(Grade))
_SCORE_FIELDS = frozenset(f.name for f in fields(Score))


def _grade(row: Mapping[str, Any]) -> Grade:
    # records.from_row's rule, with the field names read once: the table builds a Grade per row
    return Grade(**{k: v for k, v in row.items() if k in _GRADE_FIELDS})


def _score(row: Mapping[str, Any]) -> Score:
    kwargs = {k: v for k, v in row.items() if k in _SCORE_FIELDS}
    if kwargs.get("steps") is not None:
        kwargs["steps"] = tuple(float(v) for v in kwargs["steps"])
    if kwargs.get("rationales") is not None:
        kwargs["rationales"] = tuple(str(v) for v in kwargs["rationales"])
    return Score(**kwargs)


def _verdicts(src: Sources, pid: str) -> tuple[dict[int, Grade], dict[int, Score]]:
    """One problem's grades and scores by sample_idx."""
    grades = {} if src.grades is None else {i: _grade(row) for i, row in src.grades.keyed(pid, src.grade_filter).items()}
    scores = {} if src.scores is None else {i: _score(row) for i, row in src.scores.keyed(pid, src.score_filter).items()}
    return grades, scores


def _pick(scores: Mapping[int, Score]) -> int | None:
    finite = [(s.score, -i) for i, s in scores.items() if math.isfinite(s.score)]
    return -max(finite)[1] if finite else None


def problem_ids(src: Sources) -> list[str]:
    """The run's problems: those of its samples (in file order), then any only graded."""
    ids: dict[str, None] = {}
    for index in (src.samples, src.grades):
        if index is not None:
            ids.update(dict.fromkeys(index.problems))
    return list(ids)


def dataset_metrics(run: RunView) -> list[str]:
    """The per-problem metric columns: metrics.json's per-problem entries without breakdown groups."""
    names = [n for n in (run.metrics_file().get("per_problem") or {}) if split_metric_name(n)[1] is None]
    return [row.name for row in run.metric_rows() if row.name in names]


def metric_values(run: RunView, columns: Sequence[str], pids: Sequence[str]) -> list[list[float]]:
    """metrics.json's per-problem values of ``columns`` for each problem of ``pids`` (NaN where it has none)."""
    per_problem = run.metrics_file().get("per_problem") or {}
    tables = [per_problem.get(name) or {} for name in columns]
    return [[math.nan if t.get(pid) is None else float(t[pid]) for t in tables] for pid in pids]


def _first_rows(index: RowIndex | None, pid: str, wanted: tuple[Any, str] | None,
                names: Sequence[str]) -> dict[int, tuple[Any, ...]]:
    """sample_idx -> the ``names`` fields of the first of its rows made under ``wanted`` (a (version, id)
    tag; None: any), from the index's columns: the rule ``RowIndex.keyed`` and ``Sources``' filters
    apply to parsed rows, with no row parsed."""
    rows = index.problems.get(pid) if index is not None else None
    if index is None or rows is None:
        return {}
    tags = set(range(len(index.tags.values))) if wanted is None else {
        code for code, tag in enumerate(index.tags.values) if tag == wanted}
    columns = [rows.columns[n] for n in names]
    if set(rows.columns["tag"]) <= tags and len(set(rows.idx)) == len(rows.idx):  # the usual case: no row to skip
        return dict(zip(rows.idx, zip(*columns, strict=True), strict=True))
    out: dict[int, tuple[Any, ...]] = {}
    for i, tag, *values in zip(rows.idx, rows.columns["tag"], *columns, strict=True):
        if tag in tags and i not in out:
            out[i] = tuple(values)
    return out


def problem_row(src: Sources, pid: str) -> ProblemRow:
    """One problem's line of the table (without the metrics: ``metric_values``), from the indexes'
    columns (no row is parsed), by the rules the pipeline's ``problems.json`` is written with
    (``bonbench.pipeline.problem_summary.summarize``)."""
    answers = src.grades.answers.values if src.grades is not None else []
    truth = {1: True, 0: False, -1: None}
    grades = {i: Verdict(truth[c], None if math.isnan(s) else s, None if a < 0 else answers[a])
              for i, (c, s, a) in _first_rows(src.grades, pid, src.grading, ("correct", "score", "answer")).items()}
    scores = {i: v[0] for i, v in _first_rows(src.scores, pid, src.scoring, ("score",)).items()}
    rows = src.samples.problems.get(pid) if src.samples is not None else None
    lengths = rows.first_numbers() if rows is not None else {}  # the index keeps n_tokens: no sample is parsed
    return ProblemRow(**summarize(pid, grades, scores, lengths))


def summary_current(run: RunView, doc: Mapping[str, Any]) -> bool:
    """Whether the pipeline's ``problems.json`` (read: ``doc``) was written from the row files as they are
    now: same sizes, same grader and verifier as the table would read."""
    grader, verifier = run.grader(), run.verifier()
    verifiers = [verifier] if verifier else []
    sizes = {}
    for name in row_files(grader, verifiers):
        path = run.file(name)  # a file the viewer would not read (a link out) is absent here too
        if path is not None:
            sizes[name] = path.stat().st_size
    return bool(doc) and is_current(doc.get("key"), sizes, grader, verifiers, exactly=True)


def summary_rows(run: RunView) -> list[ProblemRow] | None:
    """The run's table from the pipeline's ``problems.json`` while it is current (``summary_current``);
    else None (the rows must be read)."""
    doc = run.json_file(SUMMARY)
    if not summary_current(run, doc):
        return None
    lines = read_lines(doc)
    try:
        return None if lines is None else [ProblemRow(**line) for line in lines]
    except TypeError:  # a line with fields this viewer does not know
        return None


def problem_table(run: RunView) -> list[ProblemRow]:
    """One row per problem, computed now (``site`` keeps them, ``cache`` between starts)."""
    src = sources(run)
    return [problem_row(src, pid) for pid in problem_ids(src)]


def problem_detail(src: Sources, pid: str) -> list[SampleView]:
    """Every sample of one problem (sampled, graded or scored), in sample order."""
    grades, scores = _verdicts(src, pid)
    samples = {} if src.samples is None else src.samples.keyed(pid)
    order = sorted(set(samples) | set(grades) | set(scores))
    graded = [grades[i] for i in order if i in grades]
    vote_of = dict(zip([i for i in order if i in grades], vote_answers(graded), strict=True))
    pick = _pick(scores)
    others: dict[int, dict[str, float]] = {}
    for name, index in src.others.items():
        for i, row in index.keyed(pid).items():
            if isinstance(row.get("score"), (int, float)):
                others.setdefault(i, {})[name] = float(row["score"])
    out = []
    for i in order:
        row = samples.get(i, {})
        completion = row.get("completion")
        out.append(SampleView(
            sample_idx=i, completion=None if completion is None else str(completion),
            n_tokens=row.get("n_tokens"), finish_reason=row.get("finish_reason"), logprob=row.get("logprob"),
            grade=grades.get(i), score=scores.get(i), vote=vote_of.get(i), picked=i == pick, other_scores=others.get(i, {})))
    return out

