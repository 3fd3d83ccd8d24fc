"""Frozen records that cross a stage boundary, and their JSON row form.

Pipeline: task -> prompts -> sampler -> samples store -> graders/verifiers -> estimators -> report.
Each arrow carries one of these records in memory and one JSONL row on disk. Every row carries
its join key ``(problem_id, sample_idx)``; nothing is ever joined by file order.

This module holds data only: no I/O, no model code, no grading logic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

SCHEMA_VERSION = 1
OMIT_NONE = "omit_none"  # a field's metadata key: ``to_row`` leaves the field out of the row while it is None


@dataclass(frozen=True)
class Problem:
    """One benchmark item.

    ``input`` is the problem statement as the dataset gives it (prompt renderers turn it into a
    model prompt); ``target`` is the gold answer (math) or test code / serialized tests (code).
    ``meta`` holds small per-problem facts (level, subject, entry point, time limit ...).
    """

    id: str
    input: str
    target: str
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Prompt:
    """A rendered prompt: plain ``text`` for base models, or chat ``messages`` for instruct models."""

    problem_id: str
    text: str | None = None
    messages: tuple[Mapping[str, str], ...] | None = None
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        assert (self.text is None) != (self.messages is None), "a Prompt has text or messages, not both"


@dataclass(frozen=True)
class Sample:
    """One completion of one problem. ``logprob`` is the cumulative log-probability of the
    completion tokens under the sampling policy (None when the backend cannot report it).
    ``n_tokens`` counts the generated tokens and ``prompt_tokens`` the tokens of the prompt the
    policy read for it (None where the backend cannot tell: scripted and imported samples, rows
    written before the field existed); the compute ledger (``pipeline.ledger``) adds them up.
    ``reasoning_tokens`` are the completion tokens of a reasoning model's trace, up to and including
    its last closing think tag (``bonbench.core.reasoning``); the answer's are ``answer_tokens``.
    None where the sampler did not count them (imported samples; rows written before the field).
    """

    problem_id: str
    sample_idx: int
    completion: str
    n_tokens: int
    finish_reason: str
    logprob: float | None = None
    prompt_tokens: int | None = None
    reasoning_tokens: int | None = None

    @property
    def key(self) -> tuple[str, int]:
        return (self.problem_id, self.sample_idx)

    @property
    def answer_tokens(self) -> int | None:
        """The completion tokens after the reasoning trace (None when the trace was not counted)."""
        return None if self.reasoning_tokens is None else self.n_tokens - self.reasoning_tokens

    @property
    def mean_logprob(self) -> float | None:
        if self.logprob is None:
            return None
        return self.logprob / max(self.n_tokens, 1)


@dataclass(frozen=True)
class Grade:
    """A grader's verdict on one sample.

    ``correct`` is the task's notion of correctness (None when the grader could not decide);
    ``score`` a real-valued reward where the task has one (e.g. sentiment); ``answer`` the
    canonical extracted answer that maj@k clusters on (None = abstain). A grader failure is data:
    it goes to ``error``, never raises. ``grading_id`` names the task's grading settings (time
    limits, test sets, tolerances: see ``Task.grade_args``) the verdict was reached under; the
    pipeline stamps it, graders leave it empty, and "" means "no settings" (rows written before
    the field existed read as "").
    """

    problem_id: str
    sample_idx: int
    grader: str
    grader_version: int
    correct: bool | None
    score: float | None = None
    answer: str | None = None
    error: str | None = None
    detail: Mapping[str, Any] | None = None
    grading_id: str = ""

    @property
    def key(self) -> tuple[str, int]:
        return (self.problem_id, self.sample_idx)

    def graded_under(self, grader_version: int, grading_id: str) -> bool:
        """True if this verdict came from that grader version under those grading settings."""
        return self.grader_version == grader_version and self.grading_id == grading_id

    def value(self) -> float:
        """The outcome the estimators read: the real-valued reward when the grader gives one and no
        right/wrong verdict (reward-judged tasks), else 1.0 for correct and 0.0 otherwise."""
        if self.correct is None and self.score is not None:
            return float(self.score)
        return 1.0 if self.correct else 0.0


@dataclass(frozen=True)
class Score:
    """A verifier's (reward model's) score of one sample, used to pick the best of k.

    ``verifier_version`` and ``verifier_fingerprint`` name exactly which verifier produced it (a
    retrained reward model has a new fingerprint; a verifier derived from grades folds the grading
    into its fingerprint); the pipeline stamps them and reuses a row only when both match. Rows
    written before these fields existed read as version 1 with an empty fingerprint.

    A process reward model also stores its per-step scores (``steps``, in step order) and the
    aggregation that made ``score`` of them (``aggregation``: ``min``, ``prod``, ``last``, ``mean``),
    so that another aggregation re-scores without the model. ``tokens`` and ``calls`` are what the
    verifier spent on this sample: the tokens it read and the forward passes (or API calls) it made;
    None where a verifier does not count them (rows written before these fields existed).
    """

    problem_id: str
    sample_idx: int
    verifier: str
    score: float
    verifier_version: int = 1
    verifier_fingerprint: str = ""
    steps: tuple[float, ...] | None = None
    aggregation: str | None = None
    tokens: int | None = None
    calls: int | None = None
    # an LLM judge's rationales (``judge:...?k=K``: one per value of ``steps``); omitted from the row
    # when None, so rows of every other verifier, and of judges before it existed, are unchanged
    rationales: tuple[str, ...] | None = field(default=None, metadata={OMIT_NONE: True})

    @property
    def key(self) -> tuple[str, int]:
        return (self.problem_id, self.sample_idx)

    def scored_by(self, version: int, fingerprint: str) -> bool:
        """True if this score came from that verifier version and fingerprint."""
        return self.verifier_version == version and self.verifier_fingerprint == fingerprint


@dataclass(frozen=True)
class MetricValue:
    """A dataset-level metric with its bootstrap 95% confidence interval. A value that averages Monte
    Carlo estimates says so: ``mc_se`` is its Monte Carlo standard error and ``mc_draws`` the random
    draws per problem; both are None for an exact value."""

    name: str
    value: float
    ci95: tuple[float, float]
    n_problems: int
    n_samples: int | None = None
    mc_se: float | None = None
    mc_draws: int | None = None


@dataclass(frozen=True)
class MetricsPatch:
    """Metrics computed beside the run's own (KL to a reference, win rates, best-of-k KL), in
    metrics.json form: ``metrics[name]`` is ``{"value", "ci95", "n_problems", ...notes}`` and
    ``per_problem[name]`` maps problem id to value. ``pipeline.score`` merges them in its one write."""

    metrics: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    per_problem: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def __add__(self, other: MetricsPatch) -> MetricsPatch:
        return MetricsPatch({**self.metrics, **other.metrics}, {**self.per_problem, **other.per_problem})


def to_row(record: Any) -> dict[str, Any]:
    """The JSON row form of a record (schema version first)."""
    row = {"schema": SCHEMA_VERSION}
    row.update(asdict(record))
    for f in fields(record):
        if f.metadata.get(OMIT_NONE) and row[f.name] is None:
            del row[f.name]
    return row


def from_row(cls: type, row: Mapping[str, Any]) -> Any:
    """Build ``cls`` from a JSON row, ignoring unknown keys; raises KeyError/TypeError on malformed rows."""
    names = {f.name for f in fields(cls)}
    kwargs = {k: v for k, v in row.items() if k in names}
    if "messages" in kwargs and kwargs["messages"] is not None:
        kwargs["messages"] = tuple(kwargs["messages"])
    if "stop" in kwargs:
        kwargs["stop"] = tuple(kwargs["stop"])
    if kwargs.get("steps") is not None:
        kwargs["steps"] = tuple(float(v) for v in kwargs["steps"])
    if kwargs.get("rationales") is not None:
        kwargs["rationales"] = tuple(str(v) for v in kwargs["rationales"])
    return cls(**kwargs)
