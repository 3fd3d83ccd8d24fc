"""The ``functional_math`` task: MATH() functional snapshots (Srivastava et al. 2024) next to static MATH.

Functional MATH rewrites each of 1,745 MATH test problems as code that instantiates a textually new
problem (new numbers, new answer) every month; the Q1'24 release ships three snapshots, Oct-2023,
Nov-2023 and Dec-2023. A model that reasons (rather than recalls) should solve the static problem
and every snapshot of it equally well.

Problems: for each of the 1,745 ``unique_id``s, one static problem (the original MATH test item,
read from ``math/test.jsonl``) with id ``static/<unique_id>`` and one problem per selected snapshot
with id ``<snapshot>/<unique_id>`` (e.g. ``Oct-2023/test/algebra/6.json``). Problems are ordered by
``unique_id`` and then variant (static first), so ``--limit`` keeps whole groups. ``meta`` carries
``variant`` ("static" or the snapshot), ``snapshot`` (None for static), ``unique_id``, ``level``
and ``subject``.

Prompts and grading are the ``math`` task's (same few-shot exemplars, chat prompt and MATH grader);
only the problems differ.

Metrics. The generic metrics (pass@k, maj@k, bon@k over all problem ids) treat the static and
snapshot problems as one mixed pool of ``1,745 x (1 + #snapshots)`` independent problems; they are
not the paper's numbers. ``extra_metrics`` adds:

- ``static_accuracy``: mean over unique_ids of the static problem's per-sample accuracy;
- ``functional_accuracy``: mean over unique_ids of the product of per-variant accuracies over the
  static problem and every selected snapshot: the probability that one sample per variant is
  correct for all of them. With one sample per problem this is the paper's rule (a problem counts
  only if every snapshot and the static version are solved); with n samples it is the exact,
  unbiased estimate of that probability, since samples of different problems are independent;
- ``reasoning_gap``: ``100 * (static - functional) / static`` (the paper's percentage drop);
- per-group ``pass@k[<variant>]``, ``maj@k[<variant>]`` (and ``bon@k[<variant>]`` when verifier
  scores are passed) for every k in 1, 2, 4, ... up to n, and n itself.

Each comes with a 95% percentile-bootstrap CI over unique_ids: static and functional values are
resampled together (paired), so the gap's CI accounts for their correlation.

This module does not grade, sample or render prompts itself; it does not download anything (there
is no hub copy of MATH(); the snapshots are read from a local mirror). The MATH() data is GPL-3.0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from bonbench.data import file_fingerprint, local_file, read_jsonl, resolve_data_dir
from bonbench.errors import BonbenchError
from bonbench.prompts import MATH_FEWSHOT
from bonbench.records import Grade, Problem, Score
from bonbench.registry import Task, register_task
# SUBJECTS: MATH folder name (as in unique_id) -> display name (the "type" field)
from bonbench_tasks.math import SUBJECTS, math_style_task

TASK_NAME = "functional_math"
VERSION = 1
SNAPSHOTS: tuple[str, ...] = ("Oct-2023", "Nov-2023", "Dec-2023")
STATIC = "static"
N_UNIQUE_IDS = 1745
SNAPSHOT_DIR = "functional_math"
STATIC_FILE = "math/test.jsonl"



def problem_id(variant: str, unique_id: str) -> str:
    """``static/<unique_id>`` or ``<snapshot>/<unique_id>``."""
    return f"{variant}/{unique_id}"


def split_problem_id(pid: str) -> tuple[str, str]:
    """Inverse of :func:`problem_id`: ``(variant, unique_id)``."""
    variant, sep, unique_id = pid.partition("/")
    if not sep or not unique_id:
        raise ValueError(f"not a functional_math problem id: {pid!r}")
    return variant, unique_id


def parse_snapshots(snapshots: str | Sequence[str] | None) -> tuple[str, ...]:
    """Validate ``-T snapshots=Oct-2023,Nov-2023`` (case-insensitive), keeping the canonical order."""
    if snapshots is None or (isinstance(snapshots, str) and snapshots.strip().lower() in ("", "all")):
        return SNAPSHOTS
    items = snapshots.split(",") if isinstance(snapshots, str) else list(snapshots)
    by_lower = {s.lower(): s for s in SNAPSHOTS}
    chosen = set()
    for item in items:
        key = item.strip().lower()
        if not key:
            continue
        if key not in by_lower:
            raise BonbenchError(f"functional_math: unknown snapshot {item.strip()!r}; choose from {', '.join(SNAPSHOTS)} (comma-separated)")
        chosen.add(by_lower[key])
    if not chosen:
        raise BonbenchError(f"functional_math: -T snapshots selected none; choose from {', '.join(SNAPSHOTS)}")
    return tuple(s for s in SNAPSHOTS if s in chosen)


def parse_level(level: str | int | None) -> int | None:
    """``3``, ``"3"``, ``"level 3"`` or ``"Level 3"`` -> ``3``; None keeps all levels."""
    if level is None or str(level).strip() == "":
        return None
    text = str(level).strip().lower().replace("level", "").strip()
    if text not in {"1", "2", "3", "4", "5"}:
        raise BonbenchError(f"functional_math: -T level={level!r} is not a MATH level; use 1..5 (or 'Level 3')")
    return int(text)


def _level_int(raw: str) -> int | None:
    digits = "".join(ch for ch in str(raw) if ch.isdigit())
    return int(digits) if digits else None


def parse_subject(subject: str | None) -> str | None:
    """A MATH subject by folder name (``number_theory``) or display name (``Number Theory``)."""
    if subject is None or str(subject).strip() == "":
        return None
    key = str(subject).strip().lower().replace("&", "and").replace("-", "_").replace(" ", "_")
    if key in SUBJECTS:
        return SUBJECTS[key]
    raise BonbenchError(f"functional_math: unknown -T subject={subject!r}; choose from {', '.join(SUBJECTS)}")


def _snapshot_path(root: Path, snapshot: str) -> Path:
    return local_file(root, f"{SNAPSHOT_DIR}/{snapshot}.jsonl", f"functional_math snapshot {snapshot}")


def load_rows(data_dir: str | Path | None) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, dict[str, Any]]], str]:
    """``(static rows by unique_id, {snapshot: rows by unique_id}, fingerprint)`` from a local mirror.

    Static rows are the MATH test rows for exactly the unique_ids that have functional snapshots.
    Raises if any snapshot does not cover the same 1,745 ids, so that functional accuracy is never
    computed over misaligned groups.
    """
    root = resolve_data_dir(data_dir)
    if root is None:
        raise BonbenchError(
            "functional_math has no hub copy (MATH() snapshots are only distributed as tarballs in "
            "ConsequentAI/fneval); pass --data-dir (or set BONBENCH_DATA_DIR) to a mirror with "
            "functional_math/{Oct,Nov,Dec}-2023.jsonl and math/test.jsonl, e.g. ../shared/data"
        )
    snap_paths = {s: _snapshot_path(root, s) for s in SNAPSHOTS}
    static_path = local_file(root, STATIC_FILE, "functional_math static MATH test set")
    snaps: dict[str, dict[str, dict[str, Any]]] = {}
    for snap, path in snap_paths.items():
        rows: dict[str, dict[str, Any]] = {}
        for row in read_jsonl(path):
            uid = row["unique_id"]
            if uid in rows:
                raise BonbenchError(f"{path}: unique_id {uid!r} appears twice; the snapshot file is corrupt")
            rows[uid] = row
        snaps[snap] = rows
    ids = set(snaps[SNAPSHOTS[0]])
    for snap, rows in snaps.items():
        if set(rows) != ids:
            diff = sorted(ids ^ set(rows))
            raise BonbenchError(f"functional_math: snapshot {snap} covers different unique_ids than {SNAPSHOTS[0]} (e.g. {diff[0]!r}); re-fetch the snapshot files")
    static: dict[str, dict[str, Any]] = {}
    for row in read_jsonl(static_path):
        if row["unique_id"] in ids:
            static[row["unique_id"]] = row
    missing = sorted(ids - set(static))
    if missing:
        raise BonbenchError(f"functional_math: {len(missing)} snapshot ids are not in {static_path} (e.g. {missing[0]!r}); the MATH test file is incomplete")
    fingerprint = file_fingerprint(static_path, *snap_paths.values())
    return static, snaps, fingerprint


def build_problems(static: Mapping[str, Mapping[str, Any]], snaps: Mapping[str, Mapping[str, Mapping[str, Any]]],
                   snapshots: Sequence[str] = SNAPSHOTS, level: int | None = None,
                   subject: str | None = None) -> tuple[Problem, ...]:
    """Problems grouped by unique_id (sorted), static first, then the selected snapshots in order.

    ``meta["level"]`` is an int 1-5 and ``meta["subject"]`` the display name, as in the math task.
    """
    out: list[Problem] = []
    for uid in sorted(static):
        srow = static[uid]
        if level is not None and _level_int(srow["level"]) != level:
            continue
        if subject is not None and srow["type"] != subject:
            continue
        meta = {"unique_id": uid, "level": _level_int(srow["level"]), "subject": srow["type"]}
        out.append(Problem(id=problem_id(STATIC, uid), input=srow["problem"], target=srow["answer"],
                           meta={**meta, "variant": STATIC, "snapshot": None}))
        for snap in snapshots:
            row = snaps[snap][uid]
            out.append(Problem(id=problem_id(snap, uid), input=row["problem"], target=row["answer"],
                               meta={**meta, "variant": snap, "snapshot": snap}))
    return tuple(out)


# ----------------------------------------------------------------------------------------------
# metrics


def _accuracy(grades: Sequence[Grade]) -> float:
    """Mean correctness over samples; an undecided grade (correct=None) counts as wrong."""
    return float(np.mean([1.0 if g.correct else 0.0 for g in grades]))


def _ci(values: np.ndarray) -> tuple[float, float]:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return (float("nan"), float("nan"))
    lo, hi = np.percentile(finite, [2.5, 97.5])
    return (float(lo), float(hi))


def _metric(value: float, ci95: tuple[float, float], n_problems: int, **extra: Any) -> dict[str, Any]:
    return {"value": float(value), "ci95": [ci95[0], ci95[1]], "n_problems": int(n_problems), **extra}


def _gap(static: np.ndarray, functional: np.ndarray) -> np.ndarray:
    """100 * (s - f) / s elementwise; NaN where the static accuracy is 0 (the gap is undefined)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(static > 0, 100.0 * (static - functional) / np.where(static > 0, static, 1.0), np.nan)


def functional_metrics(grades_by_problem: Mapping[str, Sequence[Grade]], snapshots: Sequence[str] = SNAPSHOTS,
                       n_boot: int = 1000, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Static accuracy, functional accuracy and reasoning gap with paired bootstrap 95% CIs.

    A unique_id enters only when its static problem and every snapshot in ``snapshots`` have at
    least one grade (``n_problems`` counts those ids; ``n_incomplete`` the ids left out), so all
    three numbers are over the same ids. Bootstrap: ``n_boot`` resamples of unique_ids with
    replacement (seeded), percentile interval; the gap's resamples where static accuracy is 0 are
    dropped (the gap is undefined there).
    """
    variants = (STATIC, *snapshots)
    by_uid: dict[str, dict[str, float]] = {}
    for pid, grades in grades_by_problem.items():
        try:
            variant, uid = split_problem_id(pid)
        except ValueError:
            continue
        if variant in variants and grades:
            by_uid.setdefault(uid, {})[variant] = _accuracy(grades)
    complete = sorted(uid for uid, acc in by_uid.items() if all(v in acc for v in variants))
    n_incomplete = len(by_uid) - len(complete)
    if not complete:
        nan = float("nan")
        return {name: _metric(nan, (nan, nan), 0, n_incomplete=n_incomplete)
                for name in ("static_accuracy", "functional_accuracy", "reasoning_gap")}
    static = np.array([by_uid[u][STATIC] for u in complete])
    functional = np.array([float(np.prod([by_uid[u][v] for v in variants])) for u in complete])
    s_val, f_val = float(static.mean()), float(functional.mean())
    gap_val = float(_gap(np.array([s_val]), np.array([f_val]))[0])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(complete), size=(n_boot, len(complete)))
    s_boot, f_boot = static[idx].mean(axis=1), functional[idx].mean(axis=1)
    m = len(complete)
    return {
        "static_accuracy": _metric(s_val, _ci(s_boot), m, n_incomplete=n_incomplete),
        "functional_accuracy": _metric(f_val, _ci(f_boot), m, n_incomplete=n_incomplete),
        "reasoning_gap": _metric(gap_val, _ci(_gap(s_boot, f_boot)), m, n_incomplete=n_incomplete),
    }


def default_ks(n: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to ``n``, and ``n`` itself: the ks reported per variant when none are asked."""
    ks = [1]
    while ks[-1] * 2 <= n:
        ks.append(ks[-1] * 2)
    if ks[-1] != n and n >= 1:
        ks.append(n)
    return tuple(ks)


def variant_metrics(grades_by_problem: Mapping[str, Sequence[Grade]], variants: Sequence[str],
                    specs: Sequence[str] | None = None,
                    scores_by_problem: Mapping[str, Sequence[Score]] | None = None,
                    n_boot: int = 1000, seed: int = 0) -> dict[str, dict[str, Any]]:
    """pass@k / maj@k (and bon@k with verifier scores) per variant, named ``pass@4[Oct-2023]``.

    Each variant's group is the problems with that id prefix (``static/...``, ``Oct-2023/...``);
    its metrics average over that group's unique_ids only. ``specs`` default to pass@k and maj@k at
    :func:`default_ks` of the smallest per-problem sample count, plus bon@k when scores are given;
    explicit specs whose k exceeds the samples available are skipped rather than failing the run.
    """
    from bonbench.estimators import MetricSpec, ProblemOutcome, compute_metrics, parse_metrics

    groups: dict[str, list[ProblemOutcome]] = {}
    for pid in sorted(grades_by_problem):
        grades = sorted(grades_by_problem[pid], key=lambda g: g.sample_idx)
        try:
            variant, _ = split_problem_id(pid)
        except ValueError:
            continue
        if variant not in variants or not grades:
            continue
        scores = None
        if scores_by_problem is not None and pid in scores_by_problem:
            by_idx = {s.sample_idx: s.score for s in scores_by_problem[pid]}
            if all(g.sample_idx in by_idx for g in grades):
                scores = tuple(by_idx[g.sample_idx] for g in grades)
        groups.setdefault(variant, []).append(ProblemOutcome(
            problem_id=pid,
            correct=tuple(1.0 if g.correct else 0.0 for g in grades),
            answers=tuple(g.answer for g in grades),
            scores=scores,
        ))
    out: dict[str, dict[str, Any]] = {}
    for variant in variants:
        outcomes = groups.get(variant)
        if not outcomes:
            continue
        n_min = min(len(o.correct) for o in outcomes)
        has_scores = all(o.scores is not None for o in outcomes)
        if specs is None:
            kinds = ("pass", "maj", "bon") if has_scores else ("pass", "maj")
            wanted = [MetricSpec(kind, k) for kind in kinds for k in default_ks(n_min)]
        else:
            wanted = [s for s in parse_metrics(list(specs))
                      if (s.k is None or s.k <= n_min) and (s.kind != "bon" or has_scores)]
        if not wanted:
            continue
        values, _ = compute_metrics(outcomes, wanted, n_boot=n_boot, seed=seed)
        for name, m in values.items():
            out[f"{name}[{variant}]"] = _metric(m.value, m.ci95, m.n_problems)
    return out


class FunctionalMetrics:
    """The task's ``extra_metrics``: functional/static accuracy, reasoning gap, per-variant metrics.

    Called by the pipeline with ``{problem_id: [Grade, ...]}``; optional keywords ``specs`` (metric
    names such as ``["pass@1", "maj@4"]``) and ``scores_by_problem`` (verifier scores, for bon@k).
    """

    def __init__(self, snapshots: Sequence[str], n_boot: int = 1000, seed: int = 0) -> None:
        self.snapshots = tuple(snapshots)
        self.n_boot = n_boot
        self.seed = seed

    def __call__(self, grades_by_problem: Mapping[str, Sequence[Grade]], specs: Sequence[str] | None = None,
                 scores_by_problem: Mapping[str, Sequence[Score]] | None = None, **_: Any) -> dict[str, dict[str, Any]]:
        # unknown keywords are ignored so that a pipeline passing more context does not break tasks
        out = functional_metrics(grades_by_problem, self.snapshots, n_boot=self.n_boot, seed=self.seed)
        out.update(variant_metrics(grades_by_problem, (STATIC, *self.snapshots), specs=specs,
                                   scores_by_problem=scores_by_problem, n_boot=self.n_boot, seed=self.seed))
        return out


@register_task(TASK_NAME)
def functional_math_task(data_dir: str | None = None, snapshots: str = ",".join(SNAPSHOTS), level: int | None = None,
                         subject: str | None = None, fewshot: int = 4) -> Task:
    """MATH() snapshots next to static MATH; ``snapshots`` (comma list), ``level`` (1-5) and
    ``subject`` select problems, ``fewshot`` (base prompt exemplars, as in the math task) is hashed."""
    chosen = parse_snapshots(snapshots)
    lvl, subj = parse_level(level), parse_subject(subject)
    if not 0 <= int(fewshot) <= len(MATH_FEWSHOT):
        raise BonbenchError(f"fewshot must be between 0 and {len(MATH_FEWSHOT)}, got {fewshot}")
    static, snaps, fingerprint = load_rows(data_dir)
    problems = build_problems(static, snaps, chosen, lvl, subj)
    if not problems:
        raise BonbenchError(f"no functional_math problems match level={level!r} subject={subject!r}; loosen the filters")
    n_ids = len(problems) // (1 + len(chosen))
    description = (f"Functional MATH() (Srivastava et al. 2024; data GPL-3.0): {n_ids} MATH test problems, "
                   f"static + snapshots {', '.join(chosen)}; generic metrics pool all variants, see "
                   "static_accuracy / functional_accuracy / reasoning_gap and metric[variant]")
    return math_style_task(TASK_NAME, VERSION, problems, fingerprint, int(fewshot), description,
                           extra_metrics=FunctionalMetrics(chosen))
