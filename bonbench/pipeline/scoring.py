"""The last stage: metrics from a run's grades (and verifier scores), written to metrics.json and
curves.json.

``score`` computes every requested metric from the joined rows (dataset-wide, per task-defined
group, the task's own extra metrics), merges the metrics other modules computed (a
``MetricsPatch``: ``bonbench.pipeline.compare``'s kl and win rates) and keeps earlier metrics of
the same problems, n and grading. This module reads no samples and runs no grader or verifier
(``bonbench.pipeline.stages`` does).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from bonbench import __version__
from bonbench.api.metric.grammar import MetricSpec
from bonbench.api.metric.inputs import curve_keys, reads_scores_name, task_inputs
from bonbench.api.metric.kind import MONTE_CARLO, metric_kind
from bonbench.api.metric.values import CurveMatrix, compute_metrics, curve_matrices, curves_json
from bonbench.api.task import Task
from bonbench.core.errors import BonbenchError
from bonbench.core.provenance import git_sha
from bonbench.core.records import Grade, MetricsPatch, MetricValue, Problem, Sample, Score
from bonbench.core.store import read_run_json
from bonbench.metrics.adaptive import TwoStage
from bonbench.metrics.bootstrap import bootstrap_ci
from bonbench.metrics.estimators import ProblemOutcome
from bonbench.metrics.names import group_metric_name
from bonbench.pipeline import adaptive
from bonbench.pipeline.prepared import PreparedRun, grading, problem_set_id
from bonbench.pipeline.votes import vote_classes

Key = tuple[str, int]
# metrics computed beside a run's own from its samples and grades (``bonbench.pipeline.compare``)
Extras = Callable[[dict[Key, Sample], dict[Key, Grade]], MetricsPatch]


def reads_logprobs(specs: Sequence[MetricSpec]) -> bool:
    """Whether some metric of ``specs`` reads the samples' log-probabilities."""
    return any("logprobs" in metric_kind(s.kind).reads for s in specs)


def outcomes(run: PreparedRun, grades: dict[Key, Grade], scores: dict[Key, Score] | None,
             logprobs: Mapping[Key, float | None] | None = None) -> list[ProblemOutcome]:
    """Per-problem vectors over each problem's samples (in sample_idx order), joined by key;
    ``logprobs`` (the samples' log-probabilities) only when a metric reads them."""
    by_problem: dict[str, list[Key]] = {}
    for key in sorted(grades):
        by_problem.setdefault(key[0], []).append(key)
    reward = run.task.judged_by == "reward"
    if reward:
        unscored = [k for k, g in grades.items() if g.score is None]
        if unscored:
            g = grades[unscored[0]]
            raise BonbenchError(f"{len(unscored)} grades of reward-judged task {run.task.name!r} have no reward "
                                f"(e.g. {g.key}: {g.error or 'no score'}); fix the reward model and run `bonbench score` again")
    votes = vote_classes(run.task.grader, {p.id: [grades[k] for k in by_problem.get(p.id, [])] for p in run.problems})
    out = []
    for p in run.problems:
        keys = by_problem.get(p.id, [])
        out.append(ProblemOutcome(
            problem_id=p.id,
            # binary tasks: 1.0 / 0.0 from the verdict; reward-judged tasks: the real-valued reward
            correct=tuple(float(grades[k].score) if reward else (1.0 if grades[k].correct else 0.0) for k in keys),  # type: ignore[arg-type]  # unscored: refused above
            answers=votes[p.id],
            scores=None if scores is None else tuple(scores[k].score for k in keys),
            logprobs=_logprobs(p.id, keys, logprobs),
        ))
    return out


def _logprobs(pid: str, keys: Sequence[Key], logprobs: Mapping[Key, float | None] | None) -> tuple[float, ...] | None:
    """A problem's log-probabilities, None when not read or when a sample has none (the metric that
    reads them then names the fix)."""
    if logprobs is None:
        return None
    values = [logprobs.get(k) for k in keys]
    return None if any(v is None for v in values) else tuple(float(v) for v in values)  # type: ignore[arg-type]  # None refused on the line before


def metric_json(m: MetricValue) -> dict[str, Any]:
    """A metric's metrics.json entry: value, ci95, n_problems, and for a Monte Carlo value its
    ``estimate``, ``mc_se`` and ``mc_draws``."""
    out: dict[str, Any] = {"value": m.value, "ci95": list(m.ci95), "n_problems": m.n_problems}
    if m.mc_se is not None:  # a Monte Carlo value says so; an exact one carries nothing (as files always did)
        out.update(estimate=MONTE_CARLO, mc_se=m.mc_se, mc_draws=m.mc_draws)
    return out


def group_metrics(task: Task, problems: Sequence[Problem], outs: Sequence[ProblemOutcome], specs: Sequence[MetricSpec],
                  n_boot: int, seed: int, designs: Mapping[str, TwoStage] | None = None
                  ) -> tuple[dict[str, MetricValue], dict[str, dict[str, float]]]:
    """Every metric of ``specs`` on each group of each of ``task.breakdowns``, named ``metric[breakdown=group]``.

    ``outs[i]`` is the outcome of ``problems[i]``; ``designs`` an adaptive run's by problem id. A
    group's metrics are ``compute_metrics`` on its problems alone with the same ``n_boot`` and
    ``seed``, so they equal scoring that group as a run of its own, CIs included.
    Groups appear in the order of their first problem.
    """
    values: dict[str, MetricValue] = {}
    per_problem: dict[str, dict[str, float]] = {}
    for breakdown, group_of in task.breakdowns.items():
        groups: dict[str, list[ProblemOutcome]] = {}
        for p, o in zip(problems, outs, strict=True):
            assert p.id == o.problem_id, f"outcome {o.problem_id!r} is not problem {p.id!r}'s"
            group = group_of(p)
            if group is not None:
                groups.setdefault(str(group), []).append(o)
        for group, members in groups.items():
            two_stage = None if designs is None else [designs[o.problem_id] for o in members]
            vals, pp = compute_metrics(members, specs, n_boot=n_boot, seed=seed, two_stage=two_stage)
            for name, m in vals.items():
                full = group_metric_name(name, breakdown, group)
                values[full] = replace(m, name=full)
                per_problem[full] = pp[name]
    return values, per_problem


def _task_extras(run: PreparedRun, specs: Sequence[MetricSpec], grades: dict[Key, Grade],
                 scores: dict[Key, Score] | None, n_boot: int) -> dict[str, dict[str, Any]]:
    """The task's own metrics (``Task.extra_metrics``) from its grades and scores grouped by problem."""
    if run.task.extra_metrics is None:
        return {}
    by_problem: dict[str, list[Grade]] = {}
    for (pid, _), g in sorted(grades.items()):
        by_problem.setdefault(pid, []).append(g)
    scores_by_problem: dict[str, list[Score]] | None = None
    if scores is not None:
        scores_by_problem = {}
        for (pid, _), sc in sorted(scores.items()):
            scores_by_problem.setdefault(pid, []).append(sc)
    task_extra = run.task.extra_metrics(by_problem, specs=[s.name for s in specs], scores_by_problem=scores_by_problem,
                                        seed=run.cfg.seed, n_boot=n_boot)
    return {name: metric_json(m) if isinstance(m, MetricValue) else dict(m) for name, m in task_extra.items()}


def _kept(run: PreparedRun, verifier: str | None, scorer: tuple[int, str]) -> dict[str, Any]:
    """The metrics.json to update: the earlier one when it scored the same problems, n, grader
    version and grading settings (without the metrics that read another verifier's scores, which
    are stale), else empty.
    Files written before "grading" existed count as graded by the current version with no settings."""
    doc: dict[str, Any] = {"metrics": {}, "per_problem": {}}
    if not run.store.metrics_path.exists():
        return doc
    old = read_run_json(run.store.metrics_path)
    current = grading(run.task)
    old_grading = old.get("grading") or {}
    same_grading = (old_grading.get("grading_id", "") == current["grading_id"]
                    and old_grading.get("grader_version", current["grader_version"]) == current["grader_version"])
    if old.get("problem_set") != problem_set_id(run.problems) or old.get("n") != run.cfg.n or not same_grading:
        return doc
    stale = [m for m, v in old["metrics"].items() if reads_scores_name(m) and (
        v.get("verifier") != verifier or v.get("verifier_version", 1) != scorer[0]
        or v.get("verifier_fingerprint", "") != scorer[1])]
    for name in stale:
        old["metrics"].pop(name)
        old["per_problem"].pop(name, None)
    return old


def score(run: PreparedRun, specs: Sequence[MetricSpec], grades: dict[Key, Grade],
          scores: dict[Key, Score] | None, verifier: str | None, n_boot: int = 1000,
          scorer: tuple[int, str] = (1, ""), extra: MetricsPatch | None = None,
          facts: Mapping[str, Any] | None = None, logprobs: Mapping[Key, float | None] | None = None) -> dict[str, Any]:
    """Compute metrics (dataset-wide, per task-defined group, task extras) and curves, merge them
    and ``extra`` (``bonbench.pipeline.compare``'s metrics) into metrics.json (same problem set), write curves.json.
    ``facts`` are top-level entries written with them (``bonbench.run.merge``'s ``shards``).

    ``scorer`` is the verifier's (version, fingerprint) (``scorer_id``): every metric that reads
    verifier scores is stamped with them, and such values stored under another verifier, version or
    fingerprint are dropped rather than merged. curves.json holds every default curve the run can
    compute and the curve of every requested kind that has one (``bonbench.api.metric.inputs.curve_keys``).
    """
    read = logprobs if reads_logprobs(specs) else None
    # an adaptive run: each problem's value is its two-stage design's estimate (docs/adaptive.md)
    designs = adaptive.designs(run) if run.cfg.adaptive else None
    two_stage = None if designs is None else [designs[p.id] for p in run.problems]
    if run.cfg.strategy is not None:
        outs = outcomes(run, *_repetition(0, run.cfg.n, grades, scores), read)
        values, per_problem = search_metrics(run, specs, grades, scores, n_boot, read)
        # a search's candidates are one draw of n, not n exchangeable ones: no curve over k < n
        curves: dict[str, CurveMatrix] = {}
    else:
        outs = outcomes(run, grades, scores, read)
        inputs = task_inputs(run.task, scores=scores is not None, logprobs=all(o.logprobs is not None for o in outs))
        keys = curve_keys(specs, inputs)
        curves = curve_matrices(outs, keys, seed=run.cfg.seed, two_stage=two_stage) if keys else {}
        # the metrics take their exact values from the curves (maj@k, bon@k, ...: each computed once)
        values, per_problem = compute_metrics(outs, specs, n_boot=n_boot, seed=run.cfg.seed, two_stage=two_stage,
                                              curves=curves)
    # a search repeated over seeds has its groups' metrics left out (search_metrics' docstring)
    by_group, by_group_pp = group_metrics(run.task, run.problems, outs, specs, n_boot=n_boot, seed=run.cfg.seed,
                                          designs=designs) if run.cfg.seeds == 1 else ({}, {})
    values.update(by_group)
    per_problem = {**per_problem, **by_group_pp}
    metrics = {name: metric_json(m) for name, m in values.items()}
    metrics.update(_task_extras(run, specs, grades, scores, n_boot))
    if extra is not None:
        metrics.update({name: dict(m) for name, m in extra.metrics.items()})
        per_problem.update({name: dict(v) for name, v in extra.per_problem.items()})
    for name in metrics:
        if reads_scores_name(name):
            metrics[name].update({"verifier": verifier, "verifier_version": scorer[0], "verifier_fingerprint": scorer[1]})
    doc = _kept(run, verifier, scorer)
    doc["metrics"].update(metrics)
    doc["per_problem"].update(per_problem)
    doc.update({
        "task": run.task.name, "model": run.cfg.model, "n": run.cfg.n, "verifier": verifier,
        "grader": run.task.grader.name, "grading": grading(run.task), "problem_set": problem_set_id(run.problems),
        "n_problems": len(run.problems),
        "provenance": {"bonbench_version": __version__, "git_sha": git_sha(), "config_hash": run.run_hash,
                       "dataset_fingerprint": run.task.fingerprint,
                       "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
    })
    if run.cfg.strategy is not None:
        doc["search"] = {"strategy": run.cfg.strategy, "options": dict(run.cfg.strategy_options), "n": run.cfg.n,
                         "seeds": run.cfg.seeds, "estimate": SEARCH_ESTIMATE}
    if run.cfg.adaptive:
        doc["adaptive"] = adaptive.summary(run, doc["metrics"])
    doc.update(facts or {})
    run.store.write_metrics(doc)
    run.store.write_curves(curves_json(curves, n_boot=n_boot, seed=run.cfg.seed))
    return doc


SEARCH_ESTIMATE = "mean over the seeds' searches per problem; CI: bootstrap over problems"


def _repetition(r: int, n: int, grades: dict[Key, Grade], scores: dict[Key, Score] | None
                ) -> tuple[dict[Key, Grade], dict[Key, Score] | None]:
    """The grades and scores of repetition ``r`` of a search run (sample indices r*n .. r*n+n-1)."""
    lo, hi = r * n, (r + 1) * n
    return ({k: g for k, g in grades.items() if lo <= k[1] < hi},
            None if scores is None else {k: sc for k, sc in scores.items() if lo <= k[1] < hi})


def search_metrics(run: PreparedRun, specs: Sequence[MetricSpec], grades: dict[Key, Grade], scores: dict[Key, Score] | None,
                   n_boot: int, logprobs: Mapping[Key, float | None] | None
                   ) -> tuple[dict[str, MetricValue], dict[str, dict[str, float]]]:
    """A search run's metrics: each metric on each repetition's n candidates (``--seeds``), its
    per-problem value the mean over the repetitions, its CI the percentile bootstrap over problems
    of those means (``SEARCH_ESTIMATE``). One repetition is ``compute_metrics`` itself. A Monte
    Carlo value's SE is the SE of the mean of independent estimates. Left out with several
    repetitions: the task's per-group metrics (``score`` skips them)."""
    import numpy as np

    reps = run.cfg.seeds
    got = [compute_metrics(outcomes(run, *_repetition(r, run.cfg.n, grades, scores), logprobs), specs,
                           n_boot=n_boot, seed=run.cfg.seed) for r in range(reps)]
    if reps == 1:
        return got[0]
    values: dict[str, MetricValue] = {}
    per_problem: dict[str, dict[str, float]] = {}
    for name, first in got[0][0].items():
        means = {pid: math.fsum(pp[name][pid] for _, pp in got) / reps for pid in got[0][1][name]}
        lo, hi = bootstrap_ci(np.array(list(means.values())), n_boot=n_boot, seed=run.cfg.seed)
        ses = [vals[name].mc_se for vals, _ in got]
        se = None if any(x is None for x in ses) else math.sqrt(math.fsum(x * x for x in ses)) / reps  # type: ignore[operator]  # None excluded
        values[name] = replace(first, value=math.fsum(means.values()) / len(means), ci95=(float(lo), float(hi)), mc_se=se)
        per_problem[name] = means
    return values, per_problem
