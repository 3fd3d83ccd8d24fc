"""An adaptive run's design on disk (``bonbench run --adaptive pilot=P,budget=B`` or
``pilot=P,halfwidth=H``, docs/adaptive.md; the flag's value is ``bonbench.pipeline.adaptive_spec``):
the round's decision made from the stored pilot grades and kept in the run directory's
``adaptive.json`` (each problem's pilot successes, second-stage table, weight and total n, the spend,
and a half-width target's prediction), and each problem's n and design for scoring.

The decision is a pure function of the run's settings and its pilot grades, so a resumed run
recomputes it and refuses, in one line, a stored one that differs (``record``).

What it does not do: sample (``bonbench.run.adaptive`` drives the rounds), allocate or estimate
(``bonbench.metrics.adaptive``), or combine the two parts' values (``bonbench.api.metric.values``).
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bonbench.core.errors import BonbenchError
from bonbench.core.records import Grade, Score
from bonbench.core.store import atomic_write_json, read_run_json
from bonbench.metrics.adaptive import TwoStage, allocate, allocate_halfwidth
from bonbench.metrics.adaptive_votes import Pilot, allocate_halfwidth_votes
from bonbench.pipeline.prepared import PreparedRun
from bonbench.pipeline.votes import vote_classes

ADAPTIVE_FILE = "adaptive.json"
ESTIMATE = "w * (value on the pilot) + (1 - w) * (value on the second stage), per problem; CI: bootstrap over problems"


def path(run: PreparedRun) -> Path:
    """Where the run's decision is kept."""
    return run.store.root / ADAPTIVE_FILE


def decide(run: PreparedRun, pilot_correct: Mapping[str, int], pilots: Mapping[str, Pilot] | None = None) -> dict[str, Any]:
    """The round's decision (adaptive.json's content) from each problem's pilot successes (and, for a
    half-width target on maj@k or bon@k, each problem's pilot: ``pilots_of``). With a budget, the
    second stage spends (budget - pilot) samples per problem on average; with a half-width target,
    as few as the pilots predict reach it (``target``). Each second stage is at least ``floor`` (the
    largest k requested) and at most n - pilot."""
    design = run.cfg.adaptive
    pilot, floor = int(design["pilot"]), int(design["floor"])
    pids = [p.id for p in run.problems]
    s1 = [int(pilot_correct[pid]) for pid in pids]
    if "halfwidth" in design:
        designs, head = target(run, s1, None if pilots is None else [pilots[pid] for pid in pids])
    else:
        budget = int(design["budget"])
        designs = allocate(s1, pilot, (budget - pilot) * len(pids), floor=floor, cap=run.cfg.n - pilot)
        head = {"budget": budget}
    problems: dict[str, dict[str, Any]] = {pid: {"s1": s, "n": d.size(s), "second": list(d.second), "weight": d.weight}
                                           for pid, s, d in zip(pids, s1, designs, strict=True)}
    total = sum(int(p["n"]) for p in problems.values())
    return {"pilot": pilot, **head, "floor": floor, "cap": run.cfg.n, "problems": problems,
            "spend": {"samples": total, "mean_n": total / max(len(pids), 1), "fixed_n_samples": run.cfg.n * len(pids)}}


def pilots_of(run: PreparedRun, grades: Mapping[tuple[str, int], Grade],
              scores: Mapping[tuple[str, int], Score] | None) -> dict[str, Pilot]:
    """Each problem's pilot as a maj@k or bon@k target's prediction reads it: its samples' verdicts,
    the classes they vote for (the grader's, as maj@k counts them: ``vote_classes``) and, given
    ``scores``, their verifier scores; in sample order."""
    keys: dict[str, list[tuple[str, int]]] = {p.id: [] for p in run.problems}
    for key in sorted(grades):
        keys[key[0]].append(key)
    votes = vote_classes(run.task.grader, {pid: [grades[k] for k in ks] for pid, ks in keys.items()})
    return {pid: Pilot(tuple(1.0 if grades[k].correct else 0.0 for k in ks), votes[pid],
                       () if scores is None else tuple(float(scores[k].score) for k in ks))
            for pid, ks in keys.items()}


def target(run: PreparedRun, s1: list[int], pilots: list[Pilot] | None = None) -> tuple[list[TwoStage], dict[str, Any]]:
    """The designs for a half-width target and adaptive.json's ``target`` entry (the metric, the
    half-width asked for, and the pilots' prediction: under the designs, at the cap, and from the
    spread between problems alone). Out of reach at the cap: a warning says so and each problem gets
    its design (at the cap where the others' pilots put the target out of reach), so every run is
    finished and its estimate exact; with ``fallback=stop``, one line instead. A stop reads every
    pilot, so the runs that go on are a selection; resuming a stopped run with ``fallback=cap`` keeps
    it exact (docs/adaptive.md)."""
    design = run.cfg.adaptive
    pilot, metric, halfwidth = int(design["pilot"]), str(design["metric"]), float(design["halfwidth"])
    kind, k, confidence = metric.split("@")[0], int(metric.split("@")[1]), float(design.get("confidence", 0.5))
    if kind == "pass":
        designs, hw = allocate_halfwidth(s1, pilot, halfwidth, k=k, floor=int(design["floor"]), cap=run.cfg.n - pilot,
                                         confidence=confidence)
    else:  # maj@k, bon@k: the pilots' answers or verifier scores too (bonbench.metrics.adaptive_votes)
        if pilots is None:
            raise ValueError(f"a half-width target on {metric} is decided from the pilots' samples: pass pilots")
        designs, hw = allocate_halfwidth_votes(pilots, kind, halfwidth, k=k, floor=int(design["floor"]),
                                               cap=run.cfg.n - pilot, confidence=confidence)
    if not hw.reaches(halfwidth):
        why = (f"--adaptive halfwidth={halfwidth:g} on {metric} is out of reach: the pilots predict {hw.at_cap:.4f} with "
               f"every problem at --n {run.cfg.n}, and {hw.between:.4f} from the spread between problems alone, which no "
               "n narrows" + ("" if hw.expected is None else f" (the first met with probability {confidence:g})"))
        if design.get("fallback") == "stop":
            raise BonbenchError(f"{why}; resume with fallback=cap to go on from these pilots, up to --n per problem "
                                "(the one way this run's estimate stays exactly unbiased: docs/adaptive.md), or start "
                                f"again with halfwidth={_up(hw.at_cap)} or more, or a larger --n")
        warnings.warn(f"{why}; going on, up to --n {run.cfg.n} per problem (fallback=stop would stop here)",
                      stacklevel=2)
    # at a confidence above the default the entry also says it, with the expected half-width beside
    stated = {} if hw.expected is None else {"confidence": confidence, "expected": hw.expected}
    return designs, {"target": {"metric": metric, "halfwidth": halfwidth, "predicted": hw.predicted, "at_cap": hw.at_cap,
                                "between": hw.between, "reachable": hw.reaches(halfwidth), **stated}}


def _up(x: float) -> str:
    """``x`` rounded up to three significant digits (a half-width the cap reaches)."""
    digits = 2 - math.floor(math.log10(x))
    return f"{math.ceil(x * 10 ** digits) / 10 ** digits:.{max(digits, 0)}f}"


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


def summary(run: PreparedRun, metrics: Mapping[str, Any]) -> dict[str, Any]:
    """metrics.json's ``adaptive`` entry: the design and what it spent; with a half-width target, the
    target and the pilots' prediction beside the half-width achieved (of ``metrics``' CI)."""
    doc = stored(run)
    entry: dict[str, Any] = {k: doc[k] for k in ("pilot", "budget", "floor", "cap") if k in doc}
    if "target" in doc:
        ci = (metrics.get(doc["target"]["metric"]) or {}).get("ci95")
        entry["target"] = {**doc["target"], "achieved": None if ci is None else (float(ci[1]) - float(ci[0])) / 2}
    return {**entry, **doc["spend"], "estimate": ESTIMATE}


def summary_line(entry: Mapping[str, Any]) -> str:
    """The report's line for metrics.json's ``adaptive`` entry."""
    share = entry["samples"] / entry["fixed_n_samples"] if entry.get("fixed_n_samples") else 0.0
    aim = f"budget {entry['budget']}" if "budget" in entry else _aim(entry.get("target") or {})
    return (f"adaptive two-stage: pilot {entry['pilot']}, mean n {entry['mean_n']:.2f} of cap {entry['cap']} "
            f"({aim}, floor {entry['floor']}; {entry['samples']} samples, {share:.0%} of fixed n); "
            f"{entry['estimate']}")


def _aim(target: Mapping[str, Any]) -> str:
    """A half-width target as the report says it: asked for, predicted, achieved, and the between-problem part."""
    achieved = target.get("achieved")
    got = "n/a" if achieved is None else f"{achieved:.4f}"
    sure = f" with probability {target['confidence']:g}" if "confidence" in target else ""
    return (f"target 95% CI half-width {target.get('halfwidth', 0):g} on {target.get('metric')}{sure}: predicted "
            f"{target.get('predicted', 0):.4f}, achieved {got}, between problems alone {target.get('between', 0):.4f}"
            + ("" if target.get("reachable", True) else ", out of reach: sampled to the cap"))
