"""Two runs side by side: paired metric differences, the problems that flipped, a problem's samples.

Two runs are comparable when they ran the same task (a checkpoint against its base, two
temperatures, two verifiers): ``comparable`` pairs them. ``paired_metrics`` takes every metric both
metrics.json files keep per problem and pairs it over the problems both runs have:
``mean(B - A)`` with its 95% paired-bootstrap interval (``bonbench.metrics.bootstrap.paired_bootstrap_diff``,
the leaderboard's), marked better or worse when the interval excludes 0, by the metric's direction
(``bonbench.api.metric.readings.metric_info``). ``flips`` lists the problems whose verdict changed
from A to B, either way: solved (some sample right), the verifier's pick right, the majority right.

What it does not do: render (``pages``) or read rows (``problems``: it takes the two tables).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from bonbench.api.metric.readings import metric_info
from bonbench.apps.viewer.problems import ProblemRow, dataset_metrics
from bonbench.apps.viewer.runs import RunView
from bonbench.metrics.bootstrap import paired_bootstrap_diff

VERDICTS = (("solved", "some sample right"), ("pick", "the verifier's pick right"),
            ("majority", "the majority answer right"))


@dataclass(frozen=True)
class MetricDiff:
    """One metric of two runs paired over their shared problems."""

    name: str
    a: float
    b: float
    diff: float  # mean over shared problems of B - A
    lo: float
    hi: float
    n_shared: int
    verdict: str  # "better" / "worse" (the interval excludes 0, by the metric's direction), else ""


@dataclass(frozen=True)
class Flip:
    """A problem whose verdict changed from run A to run B."""

    problem_id: str
    n: int  # its number in the comparison's problem order
    what: str  # solved / pick / majority
    gained: bool  # wrong in A, right in B (else the other way)


def comparable(runs: Sequence[RunView], run: RunView) -> list[RunView]:
    """The other runs of ``run``'s task, in the viewer's order."""
    return [r for r in runs if r.id != run.id and r.task == run.task]


def paired_metrics(a: RunView, b: RunView, n_boot: int = 1000, seed: int = 0) -> list[MetricDiff]:
    """Every metric both runs keep per problem, paired over their shared problems (A's metric order)."""
    pa = a.metrics_file().get("per_problem") or {}
    pb = b.metrics_file().get("per_problem") or {}
    names = [n for n in dataset_metrics(a) if n in set(dataset_metrics(b))]
    out = []
    for name in names:
        shared = [p for p in pa[name] if p in pb[name]]
        x = np.array([np.nan if pb[name][p] is None else float(pb[name][p]) for p in shared], dtype=float)
        y = np.array([np.nan if pa[name][p] is None else float(pa[name][p]) for p in shared], dtype=float)
        diff, lo, hi, _ = paired_bootstrap_diff(x, y, n_boot=n_boot, seed=seed) if shared else (math.nan,) * 4
        direction = metric_info(name).direction
        verdict = ""
        if direction is not None and math.isfinite(lo) and (lo > 0 or hi < 0):
            verdict = "better" if (lo > 0) == (direction == "higher") else "worse"
        out.append(MetricDiff(name, float(np.nanmean(y)) if shared else math.nan,
                              float(np.nanmean(x)) if shared else math.nan, diff, lo, hi, len(shared), verdict))
    return out


def _verdicts(row: ProblemRow) -> dict[str, bool | None]:
    return {"solved": row.n_right > 0 if row.n_graded else None, "pick": row.pick_right,
            "majority": row.majority_right}


def shared_problems(rows_a: Mapping[str, ProblemRow], rows_b: Mapping[str, ProblemRow]) -> list[str]:
    """The problems both runs have, in A's order: the comparison's problem numbers."""
    return [pid for pid in rows_a if pid in rows_b]


FILTERS = ("flipped", "gained", "lost", "solved_flipped", "pick_flipped", "majority_flipped")


def flip_flags(a: ProblemRow, b: ProblemRow) -> tuple[str, ...]:
    """The comparison's filters one shared problem passes: ``<what>_flipped`` for each verdict that
    changed, ``gained`` / ``lost`` when one became right / wrong, ``flipped`` when any changed."""
    before, after = _verdicts(a), _verdicts(b)
    changed = [w for w, _ in VERDICTS if before[w] is not None and after[w] is not None and before[w] != after[w]]
    out = [f"{w}_flipped" for w in changed]
    if any(after[w] for w in changed):
        out.append("gained")
    if any(before[w] for w in changed):
        out.append("lost")
    return ("flipped", *out) if changed else ()


def flips(rows_a: Mapping[str, ProblemRow], rows_b: Mapping[str, ProblemRow]) -> list[Flip]:
    """The shared problems whose solved / pick / majority verdict changed, either way."""
    out = []
    for n, pid in enumerate(shared_problems(rows_a, rows_b)):
        before, after = _verdicts(rows_a[pid]), _verdicts(rows_b[pid])
        for what, _ in VERDICTS:
            if before[what] is not None and after[what] is not None and before[what] != after[what]:
                out.append(Flip(pid, n, what, bool(after[what])))
    return out
