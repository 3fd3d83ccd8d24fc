"""What a run gives its metrics, and what the run's rules derive from the records: the inputs a
task provides (``run_inputs``, ``task_inputs``), what a kind lacks on it (``missing_inputs``, the
one-line ``refusal``), the metrics every run computes (``always_metrics``) and beside each requested
one (``companions``), whether a metric reads verifier scores (``reads_scores``: a verifier is chosen,
its name stamped, its values dropped when it changes) and which curves a run writes (``curve_keys``).


What it does not do: decide anything a record does not say; the rules' messages and order are
``bonbench.run.rules``'.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from bonbench.api.metric.grammar import MetricSpec, metric_sort_key, spec_of
from bonbench.api.metric.kind import OUTCOME_FORMS, READS, metric_kind, metric_kinds
from bonbench.api.task import Task
from bonbench.core.errors import BonbenchError

# why a task lacks an input: the clause after "but this task" in the one-line refusal
_LACKING = {
    "grades": "is judged by a reward model, so there is nothing to pass or vote on",
    "rewards": "is judged by correctness, so its outcomes are 0/1 grades, not rewards",
    "answers": "has a grader that extracts no answers (it runs programs), so there is nothing to vote on",
    "scores": "has no verifier scores; pass --verifier NAME",
    "logprobs": "has samples without log-probabilities; sample with --backend vllm or hf",
}


def run_inputs(judged_by: str, *, answers: bool = True, scores: bool = True, logprobs: bool = True) -> frozenset[str]:
    """The inputs (``READS`` keys) a run provides: its outcome form (grades for a task judged by
    correctness, rewards for one judged by a reward model) and each other input it has."""
    have = {"rewards" if judged_by == "reward" else "grades"}
    have |= {name for name, present in (("answers", answers), ("scores", scores), ("logprobs", logprobs)) if present}
    return frozenset(have)


def task_inputs(task: Task, *, scores: bool = True, logprobs: bool = True) -> frozenset[str]:
    """What a run of ``task`` gives its metrics: its outcome form, answers when its grader extracts
    them (code graders say ``extracts_answers = False``: every answer is None), and ``scores`` /
    ``logprobs`` as the caller says (the run's rules assume both come: a verifier is chosen for a
    metric that reads scores)."""
    return run_inputs(task.judged_by, answers=bool(getattr(task.grader, "extracts_answers", True)), scores=scores,
                      logprobs=logprobs)


def missing_inputs(kind: str, inputs: Iterable[str]) -> list[str]:
    """What ``kind`` reads that ``inputs`` lack (its outcome form first), in ``READS`` order."""
    record, have = metric_kind(kind), set(inputs)
    lacking = [] if record.forms() & have else sorted(record.forms() - have, key=list(READS).index)[:1]
    return lacking + [r for r in READS if r in record.reads and r not in OUTCOME_FORMS and r not in have]


def applies(kind: str, inputs: Iterable[str]) -> bool:
    return not missing_inputs(kind, inputs)


def refusal(names: Sequence[str], lacking: str, inputs: Iterable[str]) -> BonbenchError:
    """The one line that refuses ``names`` (which read ``lacking``) on a task that lacks it, naming
    the kinds the task can compute."""
    usable = [r.grammar() for r in metric_kinds() if r.computed and applies(r.kind, inputs)]
    what = READS[lacking].split(":")[0]
    alternatives = ", ".join(usable[:-1]) + " or " + usable[-1] if len(usable) > 1 else "".join(usable) or "none"
    return BonbenchError(f"{', '.join(names)} read(s) {what}, but this task {_LACKING[lacking]}; use {alternatives}")


def always_metrics(inputs: Iterable[str]) -> list[MetricSpec]:
    """The metrics every run computes on a task with ``inputs`` (``always_on``), in display order."""
    have = set(inputs)
    return [MetricSpec(r.kind, 1 if r.takes_k else None) for r in metric_kinds()
            if set(r.always_on) & have and applies(r.kind, have)]


def companions(spec: MetricSpec, inputs: Iterable[str]) -> list[MetricSpec]:
    """The metrics computed beside ``spec`` at its k on a task with ``inputs``."""
    have = set(inputs)
    return [MetricSpec(kind, spec.k) for kind in metric_kind(spec.kind).companions
            if applies(kind, have) and metric_kind(kind).takes_k == (spec.k is not None)]


def reads_scores(specs: Iterable[MetricSpec]) -> bool:
    """Whether some metric of ``specs`` reads verifier scores (then the run picks a verifier)."""
    return any("scores" in metric_kind(s.kind).reads for s in specs)


def reads_scores_name(name: str) -> bool:
    """Whether the stored metric ``name`` (groups included) was computed from verifier scores."""
    spec = spec_of(name)
    return spec is not None and "scores" in metric_kind(spec.kind).reads


def curve_keys(specs: Iterable[MetricSpec], inputs: Iterable[str]) -> list[str]:
    """The curves a run writes: every ``default_curve`` kind the run's ``inputs`` allow, then the
    curve of every requested kind that has one, in display order."""
    have = set(inputs)
    keys = [r.kind for r in metric_kinds() if r.default_curve and r.has_curve and applies(r.kind, have)]
    asked = [s for s in specs if metric_kind(s.kind).has_curve and applies(s.kind, have)]
    keys += [s.curve_key for s in sorted(asked, key=lambda s: metric_sort_key(s.name))]
    return list(dict.fromkeys(keys))
