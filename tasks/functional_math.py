"""The ``functional_math`` task: MATH() functional snapshots (Srivastava et al. 2024) next to static MATH.

Functional MATH rewrites each of 1,745 MATH test problems as code that instantiates a textually new
problem (new numbers, new answer) every month; the Q1'24 release ships three snapshots, Oct-2023,
Nov-2023 and Dec-2023. A model that reasons (rather than recalls) should solve the static problem
and every snapshot of it equally well.

Problems: one static problem per MATH test problem (read from ``math/test.jsonl``) with id
``static/<unique_id>``, and, for the 1,745 functionalized ``unique_id``s, one problem per selected
snapshot with id ``<snapshot>/<unique_id>`` (e.g. ``Oct-2023/test/algebra/6.json``).
``-T static=all`` (the default) keeps every MATH test problem that passes the level / subject
filters as a static problem (5,000 without filters): the authors' reasoning gap needs the static
outcome of the problems that have no functional version too. ``-T static=functionalized`` keeps
only the 1,745 functionalized ids (6,980 problems instead of 10,235). Problems are ordered by
``unique_id`` and then variant (static first); ``--limit`` takes a prefix of that order, so only
the last group can be cut (its id then counts as untested / incomplete). ``meta`` carries
``variant`` ("static" or the snapshot), ``snapshot`` (None for static), ``unique_id``,
``functionalized`` (whether the id has snapshots), ``level`` and ``subject``.

Prompts and grading are the math family's (``bonbench_tasks.common``); only the problems differ.

Metrics. The generic metrics (pass@k, maj@k, bon@k over all problem ids) pool static and snapshot
problems; they are not the paper's numbers. The task declares the ``variant`` breakdown
(:func:`variant_of`), so the pipeline also scores every requested metric on each variant's problems
alone (``pass@k[variant=static]``, ``maj@k[variant=Oct-2023]``, ...). ``extra_metrics``
(:class:`FunctionalMetrics`) adds two families that combine the variants of one unique_id; the
per-id outcome of a variant is its mean correctness over the samples (an undecided grade counts as
wrong), and "all correct" is the product of the per-variant values: the probability that one sample
per variant is correct for all of them, exact and unbiased since samples of different problems are
independent; with one (greedy) sample per problem it is the paper's all-solved indicator.

The authors' definition (:func:`authors_metrics`), as their code computes it (ConsequentAI/fneval,
``summarize_evals.py``: ``reasoning_gap``, ``fraction_functionally_tested``,
``COVERAGE_PC_TOO_LOW_IF_BELOW``; ``eval/measure_math.py``: ``Metrics.with_functional``,
``Metrics.consensus``), over every static problem the run graded:

- ``static_accuracy``: mean static accuracy;
- ``combined_accuracy``: per static problem, where its functional version was tested (every
  selected snapshot graded), the probability that the static problem and every snapshot are
  solved; elsewhere the static outcome is kept;
- ``reasoning_gap``: ``100 * (static - combined) / static``;
- ``functional_coverage``: the share of statically solved problems that were tested in functional
  form (with n samples: the static accuracy summed over tested ids over that summed over all).

The gap is withheld (``value`` null, ``withheld`` says why, ``raw_value`` / ``raw_ci95`` keep the
number) and a warning is printed when coverage is 70% or less (their check is
``pc_fn <= COVERAGE_PC_TOO_LOW_IF_BELOW``, i.e. at or below 70), when the static set is only the
functionalized ids (``-T static=functionalized``: the number would be the functional-only gap
below), or when static accuracy is 0.

The functional-only variant (:func:`functional_only_metrics`, bonbench's first definition) is over
the functionalized ids with every variant graded; it drops the problems without a functional
version, which the authors count with their static outcome, so its gap is systematically larger.
Each number has a paired 95% CI from the shared bootstrap over unique_ids (the run's seed and
``n_boot``); a ratio (a gap, the coverage) that of its delta-method linearisation (:func:`_ratio_terms`).

This module does not grade, sample or render prompts itself; it does not download anything (there
is no hub copy of MATH(); the snapshots are read from a local mirror). The MATH() data is GPL-3.0.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bonbench.api.task import Task, register_task
from bonbench.core.data import file_fingerprint, local_file, read_jsonl, resolve_data_dir
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Grade, Problem
from bonbench.metrics.bootstrap import bootstrap_ci
from bonbench.metrics.pass_bon import mean_correct
from bonbench_tasks.common import check_fewshot, level_int, math_conventions, math_style_task, parse_level, parse_subject

TASK_NAME = "functional_math"
VERSION = 1
SNAPSHOTS: tuple[str, ...] = ("Oct-2023", "Nov-2023", "Dec-2023")
STATIC = "static"
N_UNIQUE_IDS = 1745
SNAPSHOT_DIR = "functional_math"
STATIC_FILE = "math/test.jsonl"
N_MATH_TEST = 5000
# -T static=: every MATH test problem as a static problem (the authors' setup), or only the functionalized ids
STATIC_SETS: tuple[str, ...] = ("all", "functionalized")
# the authors withhold the gap when this share of statically solved problems, or less, was tested
# functionally (summarize_evals.py: COVERAGE_PC_TOO_LOW_IF_BELOW = 70, compared with <=)
COVERAGE_THRESHOLD = 0.70


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
            raise BonbenchError(f"functional_math: unknown snapshot {item.strip()!r}; "
                                f"choose from {', '.join(SNAPSHOTS)} (comma-separated)")
        chosen.add(by_lower[key])
    if not chosen:
        raise BonbenchError(f"functional_math: -T snapshots selected none; choose from {', '.join(SNAPSHOTS)}")
    return tuple(s for s in SNAPSHOTS if s in chosen)


def parse_static_set(static: str | None) -> str:
    """``-T static=all`` (default) or ``-T static=functionalized`` (case-insensitive)."""
    key = "all" if static is None or str(static).strip() == "" else str(static).strip().lower()
    if key not in STATIC_SETS:
        raise BonbenchError(f"functional_math: -T static={static!r} is not a static set; choose all (every MATH test "
                            "problem, the authors' reasoning gap) or functionalized (the 1,745 ids with snapshots)")
    return key


def _snapshot_path(root: Path, snapshot: str) -> Path:
    return local_file(root, f"{SNAPSHOT_DIR}/{snapshot}.jsonl", f"functional_math snapshot {snapshot}")


def load_rows(data_dir: str | Path | None) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, dict[str, Any]]], str]:
    """``(static rows by unique_id, {snapshot: rows by unique_id}, fingerprint)`` from a local mirror.

    Static rows are every MATH test row (5,000); the snapshots' unique_ids (1,745) are a subset.
    Raises if any snapshot does not cover the same ids, or an id is not a MATH test id, so that
    functional accuracy is never computed over misaligned groups.
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
            raise BonbenchError(f"functional_math: snapshot {snap} covers different unique_ids than {SNAPSHOTS[0]} "
                                f"(e.g. {diff[0]!r}); re-fetch the snapshot files")
    static: dict[str, dict[str, Any]] = {row["unique_id"]: row for row in read_jsonl(static_path)}
    missing = sorted(ids - set(static))
    if missing:
        raise BonbenchError(f"functional_math: {len(missing)} snapshot ids are not in {static_path} "
                            f"(e.g. {missing[0]!r}); the MATH test file is incomplete")
    fingerprint = file_fingerprint(static_path, *snap_paths.values())
    return static, snaps, fingerprint


def build_problems(static: Mapping[str, Mapping[str, Any]], snaps: Mapping[str, Mapping[str, Mapping[str, Any]]],
                   snapshots: Sequence[str] = SNAPSHOTS, level: int | None = None,
                   subject: str | None = None, static_set: str = "all") -> tuple[Problem, ...]:
    """Problems grouped by unique_id (sorted), static first, then the selected snapshots in order.

    ``static`` holds MATH test rows by unique_id; an id is functionalized when the snapshots have it.
    ``static_set="all"`` keeps every static row that passes the filters (ids without snapshots get
    their static problem only); ``"functionalized"`` keeps the functionalized ids only.
    ``meta["level"]`` is an int 1-5 and ``meta["subject"]`` the display name, as in the math task.
    """
    functionalized = set(next(iter(snaps.values()))) if snaps else set()
    out: list[Problem] = []
    for uid in sorted(static):
        srow = static[uid]
        has_fn = uid in functionalized
        if static_set == "functionalized" and not has_fn:
            continue
        if level is not None and level_int(srow["level"]) != level:
            continue
        if subject is not None and srow["type"] != subject:
            continue
        meta = {"unique_id": uid, "level": level_int(srow["level"]), "subject": srow["type"], "functionalized": has_fn}
        out.append(Problem(id=problem_id(STATIC, uid), input=srow["problem"], target=srow["answer"],
                           meta={**meta, "variant": STATIC, "snapshot": None}))
        for snap in snapshots if has_fn else ():
            row = snaps[snap][uid]
            out.append(Problem(id=problem_id(snap, uid), input=row["problem"], target=row["answer"],
                               meta={**meta, "variant": snap, "snapshot": snap}))
    return tuple(out)


# ----------------------------------------------------------------------------------------------
# metrics


def variant_of(problem: Problem) -> str:
    """The problem's group in the ``variant`` breakdown: ``static`` or its snapshot."""
    return str(problem.meta["variant"])


def _metric(value: float, ci95: tuple[float, float], n_problems: int, **extra: Any) -> dict[str, Any]:
    return {"value": float(value), "ci95": [float(ci95[0]), float(ci95[1])], "n_problems": int(n_problems), **extra}


def _accuracies(grades_by_problem: Mapping[str, Sequence[Grade]], variants: Sequence[str]) -> dict[str, dict[str, float]]:
    """``{unique_id: {variant: mean correctness}}`` over the graded problems of ``variants``
    (``estimators.mean_correct``: an undecided grade counts as wrong, as in the pipeline's outcomes)."""
    by_uid: dict[str, dict[str, float]] = {}
    for pid, grades in grades_by_problem.items():
        try:
            variant, uid = split_problem_id(pid)
        except ValueError:
            continue
        if variant in variants and grades:
            by_uid.setdefault(uid, {})[variant] = float(mean_correct([[1.0 if g.correct else 0.0 for g in grades]])[0])
    return by_uid


def _ratio_terms(a: np.ndarray, b: np.ndarray) -> tuple[float, np.ndarray]:
    """``R = mean(a) / mean(b)`` and the per-id values ``R + (a_i - R * b_i) / mean(b)`` of its
    first-order (delta-method) linearisation: their mean is R and a bootstrap resample moves it as
    it moves R, to first order, so ``bootstrap_ci`` of the terms is the ratio's interval (on 1,745
    ids it agrees with a percentile bootstrap of the ratio itself to ~0.02 points). NaN when
    ``mean(b)`` is 0."""
    mean_b = float(b.mean())
    if mean_b == 0.0:
        return float("nan"), np.full(len(a), np.nan)
    ratio = float(a.mean()) / mean_b
    return ratio, ratio + (a - ratio * b) / mean_b


def authors_metrics(grades_by_problem: Mapping[str, Sequence[Grade]], snapshots: Sequence[str] = SNAPSHOTS, *,
                    n_boot: int, seed: int, functionalized: Collection[str] | None = None,
                    static_set: str = "all") -> dict[str, dict[str, Any]]:
    """Static accuracy, combined accuracy, the reasoning gap and the functional coverage, as the
    authors' code computes them, over every unique_id whose static problem was graded.

    An id was *tested functionally* when it is functionalized (in ``functionalized``; None: any id)
    and every snapshot in ``snapshots`` has grades. Per id i: ``s_i`` its static accuracy;
    ``c_i = s_i * prod(snapshot accuracies)`` if tested, else ``s_i`` (their ``with_functional``:
    a failed static problem stays failed, a solved one takes the functional outcome, one without a
    functional version keeps its static outcome); ``t_i`` 1 if tested. Then static = mean s,
    combined = mean c, gap = ``100 * (static - combined) / static`` and coverage =
    ``mean(t * s) / mean(s)`` (with one sample: statically solved and tested / statically solved,
    their ``fraction_functionally_tested``).

    ``reasoning_gap`` carries ``coverage``, ``n_functional_tested`` and ``static_set``; it is
    withheld (``value`` and ``ci95`` null, ``withheld``: the reason, ``raw_value`` / ``raw_ci95``:
    the number) when coverage is <= 70% (the authors' rule), when ``static_set`` is
    ``"functionalized"`` (no static outcome of the other MATH problems: not the authors' number),
    or when static accuracy is 0. CIs: one ``bootstrap_ci`` matrix over the ids (paired); the gap's
    and the coverage's are those of their linearisations (:func:`_ratio_terms`).
    """
    acc = _accuracies(grades_by_problem, (STATIC, *snapshots))
    ids = sorted(uid for uid, per in acc.items() if STATIC in per)
    nan = float("nan")
    if not ids:
        empty = {name: _metric(nan, (nan, nan), 0) for name in ("static_accuracy", "combined_accuracy", "functional_coverage")}
        gap: dict[str, Any] = {"value": None, "ci95": [None, None], "n_problems": 0,
                               "withheld": "no static problem was graded",
               "raw_value": nan, "raw_ci95": [nan, nan], "coverage": nan, "n_functional_tested": 0, "static_set": static_set}
        return {"static_accuracy": empty["static_accuracy"], "combined_accuracy": empty["combined_accuracy"],
                "reasoning_gap": gap, "functional_coverage": empty["functional_coverage"]}
    fn_ids = set(functionalized) if functionalized is not None else None
    static = np.array([acc[u][STATIC] for u in ids])
    tested = np.array([(fn_ids is None or u in fn_ids) and all(v in acc[u] for v in snapshots) for u in ids])
    combined = static.copy()
    for v in snapshots:
        combined[tested] *= np.array([acc[u][v] for u, t in zip(ids, tested, strict=True) if t])
    s_val, c_val = float(static.mean()), float(combined.mean())
    kept, kept_terms = _ratio_terms(combined, static)  # combined / static
    gap_val, gap_terms = 100.0 * (1.0 - kept), 100.0 * (1.0 - kept_terms)
    coverage, coverage_terms = _ratio_terms(tested * static, static)
    lo, hi = bootstrap_ci(np.column_stack([static, combined, gap_terms, coverage_terms]), n_boot=n_boot, seed=seed)
    m, n_tested = len(ids), int(tested.sum())
    if s_val == 0.0:
        reason = "static accuracy is 0, so the gap is undefined"
    elif static_set == "functionalized":
        reason = ("the static set is the functionalized ids only (-T static=functionalized), so this is the functional-only "
                  "gap; the authors' needs every MATH test problem statically: -T static=all")
    elif coverage <= COVERAGE_THRESHOLD + 1e-12:  # + eps: "at or below 70%" must not hinge on float rounding
        reason = (f"only {100 * coverage:.1f}% of the statically solved problems were tested in functional form; the authors "
                  f"withhold the gap at {100 * COVERAGE_THRESHOLD:.0f}% or less")
    else:
        reason = None
    common = {"n_functional_tested": n_tested, "static_set": static_set}
    gap = {**_metric(gap_val, (lo[2], hi[2]), m), "coverage": coverage,
           "coverage_threshold": COVERAGE_THRESHOLD, **common}
    if reason is not None:
        gap.update({"value": None, "ci95": [None, None], "withheld": reason, "raw_value": gap_val,
                    "raw_ci95": [float(lo[2]), float(hi[2])]})
    return {
        "static_accuracy": _metric(s_val, (lo[0], hi[0]), m, **common),
        "combined_accuracy": _metric(c_val, (lo[1], hi[1]), m, **common),
        "reasoning_gap": gap,
        "functional_coverage": _metric(coverage, (lo[3], hi[3]), m, **common),
    }


def functional_only_metrics(grades_by_problem: Mapping[str, Sequence[Grade]], snapshots: Sequence[str] = SNAPSHOTS, *,
                            n_boot: int, seed: int,
                            functionalized: Collection[str] | None = None) -> dict[str, dict[str, Any]]:
    """Static accuracy, functional accuracy and reasoning gap over the functionalized ids only,
    with paired bootstrap 95% CIs (bonbench's first definition, kept as a named variant).

    A functionalized id (in ``functionalized``; None: any id with a graded snapshot) enters only
    when its static problem and every snapshot in ``snapshots`` have grades (``n_problems`` counts
    those ids; ``n_incomplete`` the graded functionalized ids left out), so all three numbers are
    over the same ids. Functional accuracy is the mean of the per-id products of the static and
    snapshot accuracies; the gap is ``100 * (static - functional) / static``, NaN (value and CI)
    when static accuracy is 0.
    """
    variants = (STATIC, *snapshots)
    acc = _accuracies(grades_by_problem, variants)
    fn_ids = set(functionalized) if functionalized is not None else {
        uid for uid, per in acc.items() if any(v in per for v in snapshots)}
    graded = [uid for uid in acc if uid in fn_ids]
    complete = sorted(uid for uid in graded if all(v in acc[uid] for v in variants))
    n_incomplete = len(graded) - len(complete)
    names = ("static_accuracy_functional_only", "functional_accuracy", "reasoning_gap_functional_only")
    if not complete:
        nan = float("nan")
        return {name: _metric(nan, (nan, nan), 0, n_incomplete=n_incomplete) for name in names}
    static = np.array([acc[u][STATIC] for u in complete])
    # one sample per variant, all correct: the product of independent per-variant accuracies
    functional = np.prod([[acc[u][v] for u in complete] for v in variants], axis=0)
    s_val, f_val = float(static.mean()), float(functional.mean())
    kept, kept_terms = _ratio_terms(functional, static)
    gap_val, gap_terms = 100.0 * (1.0 - kept), 100.0 * (1.0 - kept_terms)
    lo, hi = bootstrap_ci(np.column_stack([static, functional, gap_terms]), n_boot=n_boot, seed=seed)
    m = len(complete)
    return {name: _metric(value, (lo[i], hi[i]), m, n_incomplete=n_incomplete)
            for i, (name, value) in enumerate(zip(names, (s_val, f_val, gap_val), strict=True))}


def functional_metrics(grades_by_problem: Mapping[str, Sequence[Grade]], snapshots: Sequence[str] = SNAPSHOTS, *,
                       n_boot: int, seed: int, functionalized: Collection[str] | None = None,
                       static_set: str = "all") -> dict[str, dict[str, Any]]:
    """Both families: :func:`authors_metrics` (``static_accuracy``, ``combined_accuracy``,
    ``reasoning_gap``, ``functional_coverage``) and :func:`functional_only_metrics`
    (``static_accuracy_functional_only``, ``functional_accuracy``, ``reasoning_gap_functional_only``)."""
    return {**authors_metrics(grades_by_problem, snapshots, n_boot=n_boot, seed=seed, functionalized=functionalized,
                              static_set=static_set),
            **functional_only_metrics(grades_by_problem, snapshots, n_boot=n_boot, seed=seed, functionalized=functionalized)}


class FunctionalMetrics:
    """The task's ``extra_metrics``: :func:`functional_metrics` of a run's grades, and a printed
    warning (``warnings.warn``; the CLI shows ``warning: ...``) when ``reasoning_gap`` is withheld.

    Called by the pipeline with ``{problem_id: [Grade, ...]}`` and the run's ``seed`` and ``n_boot``
    (keyword-only and required, so that no caller gets a bootstrap of its own by default); other
    keywords are ignored. Per-variant pass@k / maj@k / bon@k are not computed here: the task
    declares the ``variant`` breakdown and the pipeline scores each variant with the shared
    estimators.
    """

    def __init__(self, snapshots: Sequence[str], functionalized: Collection[str] | None = None,
                 static_set: str = "all") -> None:
        self.snapshots = tuple(snapshots)
        self.functionalized = frozenset(functionalized) if functionalized is not None else None
        self.static_set = static_set

    def __call__(self, grades_by_problem: Mapping[str, Sequence[Grade]], *, seed: int, n_boot: int,
                 **_: Any) -> dict[str, dict[str, Any]]:
        # unknown keywords (specs, scores_by_problem, ...) are ignored: these metrics need grades only
        out = functional_metrics(grades_by_problem, self.snapshots, n_boot=n_boot, seed=seed,
                                 functionalized=self.functionalized, static_set=self.static_set)
        gap = out["reasoning_gap"]
        if gap.get("withheld"):
            warnings.warn(f"functional_math: reasoning_gap withheld: {gap['withheld']} (raw value {gap['raw_value']:.2f} "
                          "under raw_value in metrics.json; reasoning_gap_functional_only is reported)", stacklevel=2)
        return out


@register_task(TASK_NAME, family="math")
def functional_math_task(data_dir: str | None = None, snapshots: str = ",".join(SNAPSHOTS), level: int | str | None = None,
                         subject: str | None = None, fewshot: int = 4, static: str = "all", percent: str = "number",
                         decimal_comma: bool = False, gold_boxes: str = "all") -> Task:
    """MATH() snapshots next to static MATH; ``snapshots`` (comma list), ``level`` (1-5), ``subject``
    and ``static`` (``all``: every MATH test problem statically, ``functionalized``: the 1,745 ids
    with snapshots) select problems; ``fewshot`` (base prompt exemplars, as in the math task) is hashed;
    ``percent``, ``decimal_comma`` and ``gold_boxes`` are the grader's conventions (as in the math task)."""
    conventions = math_conventions(TASK_NAME, percent, decimal_comma, gold_boxes)
    chosen = parse_snapshots(snapshots)
    lvl, subj, static_set = parse_level(level, TASK_NAME), parse_subject(subject, TASK_NAME), parse_static_set(static)
    check_fewshot(fewshot)
    static_rows, snaps, fingerprint = load_rows(data_dir)
    problems = build_problems(static_rows, snaps, chosen, lvl, subj, static_set)
    if not problems:
        raise BonbenchError(f"no functional_math problems match level={level!r} subject={subject!r}; loosen the filters")
    n_static = sum(p.meta["variant"] == STATIC for p in problems)
    n_fn = sum(p.meta["variant"] == STATIC and p.meta["functionalized"] for p in problems)
    description = (f"Functional MATH() (Srivastava et al. 2024; data GPL-3.0): {n_static} static MATH test problems, "
                   f"{n_fn} of them with snapshots {', '.join(chosen)}; generic metrics pool all variants, see "
                   "static_accuracy / combined_accuracy / reasoning_gap (the authors' definition), "
                   "reasoning_gap_functional_only and metric[variant=<variant>]")
    metrics = FunctionalMetrics(chosen, frozenset(snaps[SNAPSHOTS[0]]), static_set)
    return math_style_task(TASK_NAME, VERSION, problems, fingerprint, int(fewshot), description,
                           breakdowns={"variant": variant_of}, extra_metrics=metrics, conventions=conventions)
