"""An adaptive run's design on disk (``bonbench run --adaptive pilot=P,budget=B``, docs/adaptive.md;
the flag's value is ``bonbench.pipeline.adaptive_spec``): the round's decision made from the stored
pilot grades and kept in the run directory's ``adaptive.json`` (each problem's pilot successes,
second-stage table, weight and total n, and the spend), and each problem's n and design for scoring.

The decision is a pure function of the run's settings and its pilot grades, so a resumed run
recomputes it and refuses, in one line, a stored one that differs (``record``).

What it does not do: sample (``bonbench.run.adaptive`` drives the rounds), allocate or estimate
(``bonbench.metrics.adaptive``), or combine the two parts' values (``bonbench.api.metric.values``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bonbench.core.errors import BonbenchError
from bonbench.core.store import atomic_write_json, read_run_json
from bonbench.metrics.adaptive import TwoStage, allocate
from bonbench.pipeline.prepared import PreparedRun

ADAPTIVE_FILE = "adaptive.json"
ESTIMATE = "w * (value on the pilot) + (1 - w) * (value on the second stage), per problem; CI: bootstrap over problems"


def path(run: PreparedRun) -> Path:
    """Where the run's decision is kept."""
    return run.store.root / ADAPTIVE_FILE


def decide(run: PreparedRun, pilot_correct: Mapping[str, int]) -> dict[str, Any]:
    """The round's decision (adaptive.json's content) from each problem's pilot successes: the second
    stage spends (budget - pilot) samples per problem on average, each at least ``floor`` (the
    largest k requested) and at most n - pilot."""
    design = run.cfg.adaptive
    pilot, budget, floor = int(design["pilot"]), int(design["budget"]), int(design["floor"])
    pids = [p.id for p in run.problems]
    s1 = [int(pilot_correct[pid]) for pid in pids]
    designs = allocate(s1, pilot, (budget - pilot) * len(pids), floor=floor, cap=run.cfg.n - pilot)
    problems: dict[str, dict[str, Any]] = {pid: {"s1": s, "n": d.size(s), "second": list(d.second), "weight": d.weight}
                                           for pid, s, d in zip(pids, s1, designs, strict=True)}
    total = sum(int(p["n"]) for p in problems.values())
    return {"pilot": pilot, "budget": budget, "floor": floor, "cap": run.cfg.n, "problems": problems,
            "spend": {"samples": total, "mean_n": total / max(len(pids), 1), "fixed_n_samples": run.cfg.n * len(pids)}}


def record(run: PreparedRun, decision: dict[str, Any]) -> None:
    """Write the decision, or check the stored one equals it (a resumed run: same pilots, same decisions)."""
    if path(run).exists():
        stored = read_run_json(path(run))
        if stored != json.loads(json.dumps(decision)):
            raise BonbenchError(f"{path(run)} holds other decisions than this run's pilot grades give (edited, or graded "
                                "under other settings); delete the run directory and run again")
        return
    atomic_write_json(path(run), decision)


def stored(run: PreparedRun) -> dict[str, Any]:
    """The run's recorded decision; one line when the pilot round has not finished."""
    if not path(run).exists():
        raise BonbenchError(f"{run.store.root} is an adaptive run whose pilot round has not finished (no {ADAPTIVE_FILE}); "
                            "run `bonbench run` with the same flags to resume it")
    return dict(read_run_json(path(run)))


def n_of(run: PreparedRun) -> dict[str, int]:
    """Each problem's total n (pilot and second stage) as decided."""
    problems = stored(run)["problems"]
    return {p.id: int(problems[p.id]["n"]) for p in run.problems}


def designs(run: PreparedRun) -> dict[str, TwoStage]:
    """Each problem's design as decided, for the estimate (``TwoStage.estimate``)."""
    return designs_of(stored(run))


def designs_of(doc: Mapping[str, Any]) -> dict[str, TwoStage]:
    """Each problem's design in an ``adaptive.json`` document (``stored``'s; an analysis reads the file
    of a run directory it has no ``PreparedRun`` for)."""
    return {pid: TwoStage(int(doc["pilot"]), tuple(int(m) for m in p["second"]), float(p["weight"]))
            for pid, p in doc["problems"].items()}


def summary(run: PreparedRun) -> dict[str, Any]:
    """metrics.json's ``adaptive`` entry: the design and what it spent."""
    doc = stored(run)
    return {"pilot": doc["pilot"], "budget": doc["budget"], "floor": doc["floor"], "cap": doc["cap"],
            **doc["spend"], "estimate": ESTIMATE}


def summary_line(entry: Mapping[str, Any]) -> str:
    """The report's line for metrics.json's ``adaptive`` entry."""
    share = entry["samples"] / entry["fixed_n_samples"] if entry.get("fixed_n_samples") else 0.0
    return (f"adaptive two-stage: pilot {entry['pilot']}, mean n {entry['mean_n']:.2f} of cap {entry['cap']} "
            f"(budget {entry['budget']}, floor {entry['floor']}; {entry['samples']} samples, {share:.0%} of fixed n); "
            f"{entry['estimate']}")
