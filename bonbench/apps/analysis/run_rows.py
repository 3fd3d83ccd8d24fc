"""Per-problem values rebuilt from a run's row files (``grades/``, ``scores/``) for analysis.

``per_problem_curves`` rebuilds the per-problem values of any metric kind with a curve (pass@k,
bon@k, maj@k, ...) from grades and scores through the metric registry, which the co-scaling analysis
needs and ``metrics.json`` does not keep; ``run_outcomes`` / ``outcomes_by_verifier`` give each
problem's ``ProblemOutcome``; ``kind_curve`` rebuilds the curve of a kind that reads verifier scores
for a verifier other than the one curves.json was computed with (``bonbench plot --verifier``).

It reads a ``RunData`` that ``bonbench.apps.analysis.rundir.load_run`` loaded, and never writes
anything; what ``metrics.json`` and ``curves.json`` hold is taken from them, not recomputed here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from bonbench.api.metric.grammar import curve_spec
from bonbench.api.metric.kind import metric_kind
from bonbench.api.metric.values import curve_values
from bonbench.apps.analysis.rundir import Curve, RunData
from bonbench.core.errors import BonbenchError
from bonbench.metrics.bootstrap import bootstrap_ci
from bonbench.metrics.estimators import ProblemOutcome
from bonbench.pipeline.votes import vote_answers


def _choose(run: RunData, found: list[str], what: str, wanted: str | None) -> str:
    if wanted is not None:
        if wanted not in found:
            raise BonbenchError(f"{run.path}: no {what} {wanted!r} (have: {', '.join(found) or 'none'})")
        return wanted
    if not found:
        raise BonbenchError(f"{run.path}: no {what} files; per-problem curves need the run's {what} rows")
    # metrics.json names the grader/verifier the metrics were computed with; prefer those.
    preferred = run.meta.get("verifier" if what == "scores" else "grader") or (
        run.config.get("verifier") if what == "scores" else None)
    return preferred if preferred in found else found[0]


def grade_filter(run: RunData, grader: str | None = None) -> tuple[str, tuple[Any, Any] | None]:
    """The grades file analysis reads (``grader``, else the one metrics.json names, else the first)
    and the (grader_version, grading_id) its verdicts must have been reached under, None for any."""
    name = _choose(run, run.graders(), "grades", grader)
    # A grades file may hold verdicts from several grader versions or grading settings (a regrade
    # appends); use the ones metrics.json was computed from when it says which.
    grading = run.meta.get("grading") or {}
    if grading.get("grader") == name:
        # JSON: the int metrics.json was graded under
        return name, (grading.get("grader_version"), grading.get("grading_id", ""))
    return name, None


def _grade_rows(run: RunData, grader: str | None) -> dict[str, dict[int, Any]]:
    """problem_id -> sample_idx -> the grade metrics.json was computed from (when it says which)."""
    name, under = grade_filter(run, grader)
    if under is not None:
        version, gid = under
        rows = run.store().grades(name).read(lambda g: g.graded_under(version, gid))
    else:
        rows = run.store().grades(name).read()
    by_problem: dict[str, dict[int, Any]] = {}
    for (pid, idx), g in rows.items():
        by_problem.setdefault(pid, {})[idx] = g
    return by_problem


def correctness_table(run: RunData, grader: str | None = None) -> dict[str, np.ndarray]:
    """problem_id -> correctness of samples 0..n_i-1 (ungraded/undecided count as incorrect)."""
    return {pid: np.array([1.0 if d[i].correct else 0.0 for i in sorted(d)]) for pid, d in _grade_rows(run, grader).items()}


def per_problem_curves(run: RunData, kind: str, ks: Sequence[int], grader: str | None = None,
                       verifier: str | None = None) -> dict[str, np.ndarray]:
    """problem_id -> estimate of curve ``kind`` (a metric kind with a curve: ``pass``, ``bon``,
    ``maj``, ``gpass:0.5``, ...) at each k of ``ks`` (NaN where k > n).

    Rebuilt from ``grades/`` (0/1 verdicts, and answers in the classes ``bonbench.pipeline.votes.vote_answers``
    gives: right answers vote together; without the task's grader, wrong answers keep their canonical
    forms) and, for a kind that reads verifier scores,
    ``scores/`` through the metric registry (``bonbench.api.metric.values.curve_values``), because
    metrics.json keeps per-problem values only for requested metrics.
    """
    spec = curve_spec(kind)
    if spec is None:
        raise BonbenchError(f"per-problem curves need a metric kind with a curve (pass, bon, maj, ...), not {kind!r}")
    outcomes = run_outcomes(run, grader, verifier, scored="scores" in metric_kind(spec.kind).reads)
    mat = curve_values(outcomes, kind, [int(k) for k in ks], seed=run.seed)
    return {o.problem_id: mat[i] for i, o in enumerate(outcomes)}


def run_outcomes(run: RunData, grader: str | None = None, verifier: str | None = None,
                 scored: bool = False) -> list[ProblemOutcome]:
    """Each problem's ``ProblemOutcome`` (problem-id order, each its own n) rebuilt from the row files:
    0/1 verdicts, answer classes (``vote_answers``) and, with ``scored``, the scores of ``verifier``
    (an unscored sample gets -inf: it can never be picked as best)."""
    name = _choose(run, run.verifiers(), "scores", verifier) if scored else None
    return outcomes_by_verifier(run, [name] if name else [], grader)[name]


def outcomes_by_verifier(run: RunData, verifiers: Sequence[str],
                         grader: str | None = None) -> dict[str | None, list[ProblemOutcome]]:
    """``run_outcomes`` without scores (key None) and with each of ``verifiers``' scores, the grades
    read once."""
    rows = _grade_rows(run, grader)
    ids = sorted(rows)
    plain = []
    for pid in ids:
        idx = sorted(rows[pid])
        plain.append(ProblemOutcome(pid, tuple(1.0 if rows[pid][i].correct else 0.0 for i in idx),
                                    vote_answers([rows[pid][i] for i in idx])))
    out: dict[str | None, list[ProblemOutcome]] = {None: plain}
    for name in verifiers:
        got = run.store().scores(name).read()
        out[name] = [replace(o, scores=tuple(got[(pid, i)].score if (pid, i) in got else -math.inf
                                             for i in sorted(rows[pid])))
                     for pid, o in zip(ids, plain, strict=True)]
    return out


def bon_verifier(run: RunData, wanted: str | None = None) -> str:
    """The verifier whose scores a bon@k analysis of ``run`` uses.

    ``wanted`` (``bonbench plot --verifier``) must have a ``scores/`` file. Otherwise: the verifier
    metrics.json was computed with, if its scores are there; else the only verifier the run was scored
    with (config.json's ``verifiers``, or every scores file for runs that predate that list). Score
    files that are not verifiers (the ``lp-*`` log-probabilities of KL metrics) are not in that list,
    which is why it is preferred. Raises ``BonbenchError`` when none or several remain.
    """
    files = run.verifiers()
    if wanted is not None:
        if wanted not in files:
            raise BonbenchError(f"{run.path}: no scores of verifier {wanted!r} (have: {', '.join(files) or 'none'}); "
                                "pick one with --verifier")
        return wanted
    used = run.meta.get("verifier")
    if used in files:
        return str(used)
    candidates = [v for v in run.scored_with if v in files] if run.scored_with else files
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise BonbenchError(f"{run.path}: no verifier scores; score the run with `bonbench run --verifier NAME` first")
    raise BonbenchError(f"{run.path}: scored with several verifiers ({', '.join(candidates)}); choose one with --verifier")


def kind_curve(run: RunData, kind: str, verifier: str | None = None, *, n_boot: int = 1000,
               seed: int = 0) -> tuple[Curve | None, str | None]:
    """The dataset-level curve ``kind`` of ``run`` and, for a kind that reads verifier scores, the
    verifier it was computed with.

    A kind without scores: curves.json's. One with scores (bon): curves.json's when it was computed
    with the chosen verifier (``bon_verifier``), else rebuilt from the rows for every k up to the
    smallest per-problem n, with the same bootstrap bands as the pipeline
    (``bonbench.metrics.bootstrap.bootstrap_ci``). None when the run has no such curve.
    """
    spec = curve_spec(kind)
    if spec is None or "scores" not in metric_kind(spec.kind).reads:
        return run.curves.get(kind), None
    name = bon_verifier(run, verifier)
    if name == run.meta.get("verifier") and kind in run.curves:
        return run.curves[kind], name
    n_min = min((len(v) for v in correctness_table(run).values()), default=0)
    if n_min == 0:
        return None, name
    ks = list(range(1, n_min + 1))
    mat = np.array(list(per_problem_curves(run, kind, ks, verifier=name).values()))
    lo, hi = bootstrap_ci(mat, n_boot=n_boot, seed=seed)
    return Curve(k=np.array(ks, dtype=float), value=mat.mean(axis=0), lo=np.asarray(lo), hi=np.asarray(hi)), name
