"""Reward-judged runs on the reward-vs-KL plane, and their best-of-N references (Amini et al.,
"Variational Best-of-N Alignment"; math-reference §3.5).

``plane_points`` places every reward-judged run twice over: the policy itself at (``kl``, ``mean``)
and its best-of-k selection at (``kl_bon@k``, ``max@k``) for every k it was scored at, each with
both 95% CIs. Points are grouped by the policy their KL is measured against: a run scored with
``--ref-model R`` sits on R's plane; a run without one is its own reference (KL 0 for the policy
point), on the plane of ``bonbench.core.config.policy_name`` of its model and sampling settings.
``pareto_front`` keeps the points no other point beats on both axes (lower KL, higher reward).
A fine-tuned checkpoint's points carry its training objective (``method``), so that one method's
checkpoints at several settings form its curve, as in the paper's reward-vs-KL figures.
``bon_reference_rows`` pairs a run's measured ``winrate@k`` and ``kl_bon@k`` with the analytic
k/(k+1) and log k - (k-1)/k. ``bon_curves`` gives each plane the analytic best-of-N curve of its
reference policy: (log N - (N-1)/N, max@N) for N = 1..n from the reference's own run with the most
samples (its exact max@k curve), the frontier best-of-N sampling reaches without training.

Pure functions over ``RunData``: no files are read or written here, nothing is drawn.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bonbench.api.metric.grammar import spec_of
from bonbench.api.metric.kind import metric_kind, metric_kinds
from bonbench.apps.analysis.rundir import Metric, RunData
from bonbench.core.config import policy_name
from bonbench.metrics.winrate import bon_kl_bound, bon_winrate_reference


@dataclass(frozen=True)
class PlanePoint:
    """One point on the reward-vs-KL plane: a policy (``k`` None) or its best-of-k selection."""

    label: str
    run: str  # the run's config hash
    k: int | None
    kl: float
    kl_ci: tuple[float, float]
    reward: float
    reward_ci: tuple[float, float]
    # the training objective of a fine-tuned checkpoint's run ("" for any other model): points of one
    # method at several settings (N, beta) form that method's curve on the plane
    method: str = ""


@dataclass(frozen=True)
class BonReferenceRow:
    """Measured best-of-k figures of one run beside their analytic values for continuous rewards."""

    k: int
    winrate: Metric | None
    winrate_analytic: float
    against: str
    kl_bon: Metric | None
    kl_analytic: float


def _k(name: str, kind: str) -> int | None:
    """The k of ``name`` when it is a dataset metric of ``kind`` (``kl_bon@4`` -> 4), else None."""
    spec = spec_of(name)
    return spec.k if spec is not None and spec.kind == kind and name == spec.name else None


def is_reward_run(run: RunData) -> bool:
    """A run of a reward-judged task: it has a ``mean`` reward and no metric of a kind defined on 0/1
    grades only (pass@k, maj@k: their records say so)."""
    graded = (spec_of(name) for name in run.metrics)
    return "mean" in run.metrics and not any(s is not None and metric_kind(s.kind).forms() == {"grades"} for s in graded)


def reference_of(run: RunData) -> str:
    """The policy this run's KL figures are measured against."""
    kl = run.metrics.get("kl")
    if kl is not None and kl.notes.get("reference"):
        return str(kl.notes["reference"])
    for name, m in run.metrics.items():
        if _k(name, "kl_bon") is not None and m.notes.get("reference"):
            return str(m.notes["reference"])
    return own_policy(run)


def own_policy(run: RunData) -> str:
    """The name of the policy that drew ``run``'s samples, as ``bonbench run`` names a KL reference
    (``config.policy_name``; an imported run whose file did not give its settings is "unknown")."""
    return policy_name(run.model, run.config.get("temperature"), run.config.get("top_p", 1.0))


def _short(run: RunData) -> str:
    return f"{run.model_slug} T={run.temperature:g}" + (f" seed={run.seed}" if run.seed else "")


def method_of(run: RunData) -> str:
    """The objective a run's model was fine-tuned with (``RunData.training``), "" when it is no
    bonbench checkpoint."""
    return str((run.training or {}).get("objective") or "")


def plane_points(runs: Sequence[RunData]) -> dict[tuple[str, str], list[PlanePoint]]:
    """Points per (task, reference policy). A run without ``kl`` is placed at KL 0 only on its own
    policy's plane (where that is exact); its best-of-k points need ``kl_bon@k`` and ``max@k``."""
    planes: dict[tuple[str, str], list[PlanePoint]] = {}
    for run in runs:
        if not is_reward_run(run):
            continue
        ref = reference_of(run)
        own = ref == own_policy(run)
        points = planes.setdefault((run.task, ref), [])
        mean, kl, method = run.metrics["mean"], run.metrics.get("kl"), method_of(run)
        if kl is not None:
            points.append(PlanePoint(_short(run), run.hash, None, kl.value, kl.ci95, mean.value, mean.ci95, method))
        elif own:
            points.append(PlanePoint(_short(run), run.hash, None, 0.0, (0.0, 0.0), mean.value, mean.ci95, method))
        for name, m in run.metrics.items():
            k = _k(name, "kl_bon")
            best = run.metrics.get(f"max@{k}") if k is not None else None
            if k is not None and best is not None and m.notes.get("reference", ref) == ref:
                points.append(PlanePoint(f"{_short(run)} BoN{k}", run.hash, k, m.value, m.ci95, best.value, best.ci95,
                                         method))
    return {key: sorted(pts, key=lambda p: (p.kl, -p.reward)) for key, pts in planes.items() if pts}


def pareto_front(points: Sequence[PlanePoint]) -> list[PlanePoint]:
    """The points not dominated by another (one with KL <= and reward >=, one of them strictly),
    by increasing KL. Ties on both axes keep the first point only."""
    front: list[PlanePoint] = []
    best = -math.inf
    for p in sorted(points, key=lambda p: (p.kl, -p.reward)):
        if p.reward > best:
            front.append(p)
            best = p.reward
    return front


@dataclass(frozen=True)
class BonCurve:
    """The reference policy's best-of-N: N, analytic KL log N - (N-1)/N, and max@N with its 95% CI."""

    run: str
    n: np.ndarray
    kl: np.ndarray
    reward: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


def bon_curves(runs: Sequence[RunData]) -> dict[tuple[str, str], BonCurve]:
    """Per (task, reference policy): the analytic best-of-N curve from the reference's own run (no
    ``kl``: it is the reference) with a ``max`` curve, the run with the most samples when several.
    The KL axis is the continuous-reward value (exact for a.s. distinct rewards, an upper bound with
    ties, math-reference §3.5); the reward axis is the exact max@N estimate from that run's samples."""
    # the curve of best-of-N by reward: the kind whose selection kl_bon@k measures (max@k; its record says so)
    selected = [r.kind for r in metric_kinds() if r.selection_kl and r.has_curve]
    best: dict[tuple[str, str], tuple[RunData, str]] = {}
    for run in runs:
        curve = next((kind for kind in selected if kind in run.curves), None)
        if not is_reward_run(run) or "kl" in run.metrics or curve is None:
            continue
        ref = own_policy(run)
        if reference_of(run) != ref:
            continue
        key = (run.task, ref)
        if key not in best or len(run.curves[curve].k) > len(best[key][0].curves[best[key][1]].k):
            best[key] = (run, curve)
    out = {}
    for key, (run, curve) in best.items():
        c = run.curves[curve]
        n = np.asarray(c.k, dtype=int)
        out[key] = BonCurve(run.hash, n, np.array([bon_kl_bound(int(k)) for k in n]), np.asarray(c.value, dtype=float),
                            np.asarray(c.lo, dtype=float), np.asarray(c.hi, dtype=float))
    return out


def bon_reference_rows(run: RunData) -> list[BonReferenceRow]:
    """Every k at which the run has ``winrate@k`` (``winrate`` is k = 1) or ``kl_bon@k``, by k."""
    ks: set[int] = set()
    for name in run.metrics:
        k = 1 if name == "winrate" else _k(name, "winrate") or _k(name, "kl_bon")
        if k is not None:
            ks.add(k)
    rows = []
    for k in sorted(ks):
        win = run.metrics.get("winrate" if k == 1 else f"winrate@{k}")
        rows.append(BonReferenceRow(k, win, bon_winrate_reference(k), str(win.notes.get("against", "")) if win else "",
                                    run.metrics.get(f"kl_bon@{k}"), bon_kl_bound(k)))
    return rows
