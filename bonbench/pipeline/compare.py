"""Metrics that compare a run with something outside it: ``kl`` to a reference policy, ``winrate`` /
``winrate@k`` against reference answers or another run's samples, and ``kl_bon@k``, the KL of
best-of-k selection (the measured counterpart of the analytic log k - (k-1)/k).

``kl`` and ``kl_bon@k`` carry ``direction: lower`` (``bonbench.metrics.info``); ``kl`` also the
description of its estimator, which can be negative near 0; a ``kl_bon@k`` to the run's own
policy that is the same closed form of n and k on every problem is stored ``closed_form: true``
with no interval.

Each function returns a ``MetricsPatch`` and writes no metrics: ``pipeline.score`` merges the patch
into metrics.json in the one write it makes. The rows these need are stored like any other stage's
(policy and reference log-probabilities as scores, reference answers' rewards as grades), so a
rescore does not recompute them. Formulas: ``bonbench.metrics.winrate`` and math-reference §3.5.

This module does not load models (the runner passes the log-probability scorers in) and does not
print anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from bonbench.api.verifier import Verifier
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Grade, MetricsPatch, Sample
from bonbench.metrics.bootstrap import bootstrap_ci
from bonbench.metrics.winrate import bon_kl, winrate_curve
from bonbench.pipeline.prepared import PreparedRun, grading_id
from bonbench.pipeline.progress import Progress, no_progress
from bonbench.pipeline.stages import grade, load_samples, verify

Key = tuple[str, int]


def _patch(name: str, run: PreparedRun, per_problem: Mapping[str, float], n_boot: int, interval: bool = True,
           **notes: Any) -> MetricsPatch:
    """A one-metric patch: the mean over the run's problems with a bootstrap CI over problems
    (``interval`` False: no CI, ``ci95`` null, for a value that has no sampling noise)."""
    ids = [p.id for p in run.problems]
    values = np.array([per_problem[pid] for pid in ids], dtype=np.float64)
    ci: list[float | None] = [None, None]
    if interval:
        lo, hi = bootstrap_ci(values, n_boot=n_boot, seed=run.cfg.seed)
        ci = [float(lo), float(hi)]
    metric = {"value": float(values.mean()), "ci95": ci, "n_problems": len(ids), **notes}
    return MetricsPatch({name: metric}, {name: {pid: float(v) for pid, v in zip(ids, values, strict=True)}})


def log_ratios(run: PreparedRun, samples: Mapping[Key, Sample], policy: Verifier, reference: Verifier,
               progress: Progress = no_progress) -> dict[Key, float]:
    """log pi(y|x) - log pi_ref(y|x) per sample; both log-probabilities are stored as scores, so a
    rescore reads them back instead of running the models again."""
    pol = verify(run, policy, dict(samples), {}, progress, stage="kl policy")
    ref = verify(run, reference, dict(samples), {}, progress, stage="kl reference")
    return {key: pol[key].score - ref[key].score for key in sorted(samples)}


# what the kl number is, stored with it (metrics.json) so that every table can say it
KL_ESTIMATOR = ("mean over the policy's samples of log pi(y|x) - log pi_ref(y|x): unbiased for KL(pi || pi_ref) >= 0, "
                "but single terms are negative where pi_ref gives a sample more probability, so a KL near 0 can be "
                "estimated below 0")


def kl(run: PreparedRun, ratios: Mapping[Key, float], *, policy: str, reference: str, n_boot: int = 1000) -> MetricsPatch:
    """``kl``: the mean over samples of log pi - log pi_ref, averaged per problem, CI over problems.

    The Monte Carlo estimate of E_pi[log pi - log pi_ref]: unbiased, and unlike KL itself not
    bounded below by 0 (a sample the reference likes more than the policy has a negative log-ratio),
    so a checkpoint that barely moved can show a small negative value whose CI covers 0. The
    non-negative alternative (r - 1 - log r with r = pi_ref / pi) needs E_pi[r] = 1, which the
    sequence scores here do not give (the end-of-sample event is left out of both log-probabilities),
    and its r is heavy-tailed at the tens of nats trained policies reach, so it is not used.
    """
    per: dict[str, list[float]] = {}
    for (pid, _), v in sorted(ratios.items()):
        per.setdefault(pid, []).append(v)
    return _patch("kl", run, {pid: float(np.mean(v)) for pid, v in per.items()}, n_boot, policy=policy, reference=reference,
                  direction="lower", estimator=KL_ESTIMATOR)


def rewards_by_problem(run: PreparedRun, grades: Mapping[Key, Grade], what: str) -> dict[str, list[float]]:
    """Per problem of ``run``, the rewards of ``grades`` in sample order; one line error when a reward is missing."""
    out: dict[str, list[float]] = {}
    for (pid, _), g in sorted(grades.items()):
        if g.score is None:
            raise BonbenchError(f"the {what} of {pid!r} has no reward ({g.error or 'no score'}); "
                                "fix the reward model and rescore")
        out.setdefault(pid, []).append(float(g.score))
    missing = [p.id for p in run.problems if p.id not in out]
    if missing:
        raise BonbenchError(f"no {what} reward for {len(missing)} problems (e.g. {missing[0]!r}); score the reference first")
    return out


def reference_rewards(run: PreparedRun) -> dict[str, list[float]]:
    """Per problem, the reward of the task's reference answer (``Problem.target``, e.g. TL;DR's human
    summary), graded by the run's grader under its settings; stored as grades keyed (problem, 0) in
    ``grades/<grader>.references.jsonl`` so re-scoring does not grade them again."""
    if run.task.judged_by != "reward" or not all(p.target for p in run.problems):
        raise BonbenchError(f"task {run.task.name!r} has no reference answers to win against; "
                            "give --ref-run RUN_DIR (a reference policy's run of the same task) instead")
    grader, gid = run.task.grader, grading_id(run.task)
    table = run.store.grades(f"{grader.name}.references")
    have = table.read(lambda g: g.graded_under(grader.version, gid))
    todo = [Sample(p.id, 0, " " + p.target.strip(), len(p.target.split()), "stop") for p in run.problems if (p.id, 0) not in have]
    if todo:
        new = [replace(g, grading_id=gid) for g in grader.grade({p.id: p for p in run.problems}, todo)]
        table.append(new)
        have.update({g.key: g for g in new})
    return rewards_by_problem(run, have, "reference answer")


def run_rewards(run: PreparedRun, other: PreparedRun) -> dict[str, list[float]]:
    """Per problem, the rewards of ``other``'s samples (a reference policy's run of the same task),
    graded by ``run``'s grader under its settings (graded now where ``other`` lacks such grades).
    Every sample ``other`` has counts, however many per problem."""
    if other.task.name != run.task.name:
        raise BonbenchError(f"--ref-run is a {other.task.name!r} run, not {run.task.name!r}; compare runs of one task")
    ref_run = replace(other, task=run.task, problems=run.problems)
    return rewards_by_problem(run, grade(ref_run, load_samples(ref_run, uneven=True)), "reference run's sample")


def winrates(run: PreparedRun, grades: Mapping[Key, Grade], comparison: Mapping[str, Sequence[float]],
             ks: Sequence[int], against: str, n_boot: int = 1000) -> MetricsPatch:
    """``winrate`` (k = 1) and ``winrate@k``: the exact probability that the reward-best of k samples
    beats one comparison reward (ties 1/2), per problem, with a bootstrap CI over problems."""
    mine = rewards_by_problem(run, grades, "sample")
    ids = [p.id for p in run.problems]
    mat = winrate_curve([mine[pid] for pid in ids], [comparison[pid] for pid in ids], ks)
    patch = MetricsPatch()
    for j, k in enumerate(ks):
        patch += _patch("winrate" if k == 1 else f"winrate@{k}", run, dict(zip(ids, mat[:, j], strict=True)), n_boot,
                        against=against)
    return patch


def bon_kls(run: PreparedRun, grades: Mapping[Key, Grade], ks: Sequence[int], ratios: Mapping[Key, float] | None,
            reference: str, n_boot: int = 1000) -> MetricsPatch:
    """``kl_bon@k`` for every k: the KL of reward-best-of-k selection from the run's samples to the
    reference, i.e. to the run's own policy when ``ratios`` is None, else (with the per-sample
    log pi - log pi_ref) to the reference policy. ``bonbench.metrics.winrate.bon_kl`` per problem."""
    mine = rewards_by_problem(run, grades, "sample")
    lr: dict[str, list[float]] | None = None
    if ratios is not None:
        lr = {}
        for (pid, _), v in sorted(ratios.items()):
            lr.setdefault(pid, []).append(v)
    patch = MetricsPatch()
    for k in ks:
        per = {pid: bon_kl(mine[pid], k, None if lr is None else lr[pid]) for pid in mine}
        values = list(per.values())
        # to the run's own policy with every problem's rewards distinct, each problem gives the same
        # function of n and k: a closed form of the settings, with no sampling interval to show
        closed = lr is None and bool(values) and max(values) - min(values) <= 1e-12 * max(1.0, abs(values[0]))
        patch += _patch(f"kl_bon@{k}", run, per, n_boot, interval=not closed, reference=reference,
                        analytic=float(np.log(k) - (k - 1) / k), direction="lower", closed_form=closed)
    return patch
