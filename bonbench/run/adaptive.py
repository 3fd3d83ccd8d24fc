"""An adaptive run (``bonbench run --adaptive pilot=P,budget=B --n CAP``, or ``pilot=P,halfwidth=H``;
docs/adaptive.md): what it refuses before anything is written, and its rounds. Round one samples
and grades every problem's pilot (and, under a half-width target on bon@k, scores it with the
run's verifier); the decision (``bonbench.pipeline.adaptive``) is recorded in adaptive.json, or checked
against the recorded one on a resume; round two samples each problem up to its own n. Scoring is
the pipeline's (``stages.evaluate``), which reads each problem's n and design from adaptive.json.

What it does not do: allocate (``bonbench.metrics.adaptive``) or estimate (``bonbench.api.metric.values``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from bonbench.api.metric.grammar import MetricSpec
from bonbench.api.sampler import Sampler
from bonbench.api.task import Task
from bonbench.core.errors import BonbenchError
from bonbench.metrics.adaptive_votes import MAX_TUPLES, Pilot, tuples_needed
from bonbench.pipeline import adaptive, prepared, stages
from bonbench.pipeline.progress import Progress
from bonbench.run import rules
from bonbench.run.request import Plan, RunRequest
from bonbench.run.resolve import build_sampler, build_verifier

TARGETS = ("pass", "maj", "bon")  # the metrics a half-width target can be on (bonbench.metrics.adaptive, adaptive_votes)


def refuse(req: RunRequest, task: Task) -> None:
    """The settings --adaptive does not combine with, refused before the metrics are resolved."""
    if req.adaptive is None:
        return
    for given, fix in ((req.strategy is not None, "drop --strategy (a search's candidates are not independent draws)"),
                       (req.shard is not None, "drop --shard (each problem's n is decided from every other problem's pilot)"),
                       (any(rules.is_greedy(t) for t in req.temperatures), "sample with --temperature > 0"),
                       (task.judged_by == "reward", f"use a task graded right or wrong ({task.name!r} is reward-judged)")):
        if given:
            raise BonbenchError(f"--adaptive does not combine with that setting: {fix}")


def check(req: RunRequest, task: Task, specs: Sequence[MetricSpec], n: int) -> dict[str, Any]:
    """The ``RunConfig.adaptive`` entry of ``req`` ({} without --adaptive), or the one-line refusal
    of a pilot, budget, half-width target or cap that cannot carry the requested metrics."""
    spec = req.adaptive
    if spec is None:
        return {}
    floor, top = max(((s.k or 1, s.name) for s in specs), default=(1, "pass@1"))
    if spec.pilot < floor:
        raise BonbenchError(f"--adaptive pilot={spec.pilot} is below k = {floor} of {top}: each part of the estimate needs "
                            f"k samples; use pilot={floor} or more, or drop {top}")
    if spec.budget is not None and not spec.pilot <= spec.budget <= n:
        raise BonbenchError(f"--adaptive budget={spec.budget} must be between the pilot ({spec.pilot}) and --n {n} (the cap "
                            "per problem): budget is the mean samples per problem, the pilot included")
    if n < spec.pilot + floor:
        raise BonbenchError(f"--n {n} leaves no second stage of k = {floor} after a pilot of {spec.pilot}: use "
                            f"--n {spec.pilot + floor} or more (the cap per problem)")
    # the selection the decision is made over, filters included (the run id hashes no filter otherwise)
    problems = prepared.problem_set_id(prepared.select_problems(task, req.limit))
    if spec.budget is not None:
        return {"pilot": spec.pilot, "budget": spec.budget, "floor": floor, "problem_set": problems}
    target = specs[0] if specs else None
    if target is None or target.kind not in TARGETS or target.k is None or target.param is not None:
        first = "no metric" if target is None else target.name
        raise BonbenchError(f"--adaptive halfwidth= targets the first --metric ({first}), and the pilots predict the CI of "
                            "pass@k, maj@k and bon@k alone: put one of them first in --metric, or use "
                            "--adaptive pilot=P,budget=B")
    if target.kind != "pass" and tuples_needed(spec.pilot, target.k) > MAX_TUPLES:
        raise BonbenchError(f"--adaptive halfwidth= on {target.name} with pilot={spec.pilot} would enumerate "
                            f"{tuples_needed(spec.pilot, target.k)} {target.k}-tuples per problem (at most {MAX_TUPLES}): "
                            f"use a smaller pilot (pilot={target.k} or more), or put a pass@k first in --metric")
    # ``fallback`` only says whether an out-of-reach target stops the run: it is not hashed (core.config);
    # ``confidence`` changes the allocation, so it is, where it is not the default (a run without it keeps its id)
    sure = {} if spec.confidence == 0.5 else {"confidence": spec.confidence}
    return {"pilot": spec.pilot, "halfwidth": spec.halfwidth, "metric": target.name, "floor": floor,
            "problem_set": problems, "fallback": spec.fallback, **sure}


def with_verifier(design: dict[str, Any], verifier: str | None) -> dict[str, Any]:
    """A bon@k half-width target's design with the verifier whose pilot scores decide it (hashed: it
    decides which samples exist); any other design as it is."""
    if not str(design.get("metric", "")).startswith("bon@"):
        return design
    if verifier is None:
        raise BonbenchError(f"--adaptive halfwidth= on {design['metric']} ranks the pilots by a verifier: pass --verifier")
    return {**design, "verifier": verifier}


def sample_rounds(p: Plan, progress: Progress, on_run: Callable[[prepared.PreparedRun], None] | None) -> None:
    """Every run's rounds (module docstring), with one sampler built only when something is missing."""
    built: list[Sampler] = []

    def sampler() -> Sampler:
        if p.sampler is not None:
            return p.sampler
        if not built:
            built.append(build_sampler(p.backend, p.model, seed=p.runs[0].cfg.seed, options=p.options, ray=p.ray))
        return built[0]

    try:
        for run in p.runs:
            if on_run is not None:
                on_run(run)
            first = {q.id: int(run.cfg.adaptive["pilot"]) for q in run.problems}
            if stages.missing_requests(run, run.cfg.prompt_style, n_of=first):
                stages.sample(run, sampler(), progress, n_of=first)
            samples = stages.load_samples(run, n_of=first)
            grades = stages.grade(run, samples, progress)
            correct = {q.id: 0 for q in run.problems}
            for (pid, _), g in grades.items():
                correct[pid] += int(bool(g.correct))
            adaptive.record(run, adaptive.decide(run, correct, _pilots(p, run, samples, grades, progress)))
            total = adaptive.n_of(run)
            if stages.missing_requests(run, run.cfg.prompt_style, n_of=total):
                stages.sample(run, sampler(), progress, n_of=total)
    finally:
        for s in built:
            s.close()


def _pilots(p: Plan, run: prepared.PreparedRun, samples: dict[tuple[str, int], Any], grades: dict[tuple[str, int], Any],
            progress: Progress) -> dict[str, Pilot] | None:
    """The pilots a maj@k or bon@k half-width target is decided from (None for any other design); a
    bon@k target's pilots are scored by the run's verifier first (the scores are kept, as ``verify`` keeps them)."""
    metric = str(run.cfg.adaptive.get("metric", ""))
    if not metric.startswith(("maj@", "bon@")):
        return None
    scores = None
    if metric.startswith("bon@"):
        verifier = build_verifier(str(run.cfg.adaptive["verifier"]), p.data_dir)
        scores = stages.verify(run, verifier, samples, grades, progress)
    return adaptive.pilots_of(run, grades, scores)

