"""The leaderboard: checkpoints (model slugs) x (task, metric), optionally as differences to a base.

Rows are models, columns are ``(task, metric)``; a cell shows ``value ± half-width of the 95% CI``.
With a base model each other cell also shows ``Δ = model - base`` with a 95% paired-bootstrap
interval over the problems both runs scored (their ids' intersection; the count is in the cell),
and ▲ / ▼ when that interval lies entirely above / below 0 (a two-sided 95% test). Where either run
lacks per-problem values the difference falls back to a normal approximation from the two CIs
(marked ``≈``).

Which run fills a (model, task) cell when several exist (different settings, n, problems or seeds):

1. with ``--base``: the base's run is the one ``--base-run`` names for that task, else its only
   run, else the one run whose comparison key (``comparison_key``: sampling settings, n, problem
   set, dataset) the most other models' runs share. Never "the latest": that would switch the row
   every checkpoint is paired against whenever the base is re-scored. When no run or several runs
   tie, the leaderboard refuses in one line listing the candidates and asking for ``--base-run``.
   Every other model's cell is its latest run with the base run's comparison key, else its latest
   run with the base's sampling settings (``rundir.SAMPLING_KEYS``), else its latest run, marked †;
2. without ``--base``: the latest run (provenance timestamp, else metrics.json mtime).

Search runs (``bonbench run --strategy``) get rows of their own: a model's row holds its sampling
runs, and each (model, strategy with its options) its search runs (``row_name``), so a search never
fills, or replaces, the cells of the model's sampling; a search row's cells are its metrics at k = N
(the only ones a search run is scored with). For every task where a chosen run is a search, a column
gives each row's tokens per problem from the compute ledger (``compute_axis.tokens_per_problem``:
policy prompt + generated + the tokens the verifiers read), so the rows are compared at their cost.

Each choice is listed under the table. This module reads runs and writes two files; it does not
rescore anything.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from bonbench.api.metric.grammar import metric_sort_key
from bonbench.api.metric.readings import footnotes, mc_note, metric_info
from bonbench.apps.analysis.baseline import load_gate_run
from bonbench.apps.analysis.compute_axis import tokens_per_problem
from bonbench.apps.analysis.rundir import RunData, load_run
from bonbench.core.config import model_slug, strategy_label
from bonbench.core.errors import BonbenchError
from bonbench.core.store import find_run_dirs
from bonbench.metrics.bootstrap import Z95, paired_bootstrap_diff
from bonbench.metrics.info import LOWER

UP, DOWN, MISMATCH = "▲", "▼", "†"


@dataclass(frozen=True)
class Cell:
    value: float
    lo: float
    hi: float
    n_problems: int
    diff: float | None = None
    diff_lo: float | None = None
    diff_hi: float | None = None
    p_improve: float | None = None
    n_shared: int | None = None
    paired: bool = True
    settings_match: bool = True
    mc_se: float | None = None  # a Monte Carlo value's standard error (None: exact)

    @property
    def marker(self) -> str:
        if self.diff_lo is None or self.diff_hi is None:
            return ""
        if self.diff_lo > 0:
            return UP
        if self.diff_hi < 0:
            return DOWN
        return ""


@dataclass(frozen=True)
class Selection:
    model: str
    task: str
    run: RunData
    rule: str
    n_candidates: int


@dataclass
class Leaderboard:
    models: list[str]
    columns: list[tuple[str, str]]
    cells: dict[tuple[str, str, str], Cell]
    selections: list[Selection]
    base: str | None = None
    notes: list[str] = field(default_factory=list)
    # (row, task) -> tokens per problem of the chosen run (None: not all counted), for the tasks with a search row
    compute: dict[tuple[str, str], float | None] = field(default_factory=dict)


def row_name(run: RunData) -> str:
    """A run's leaderboard row (module docstring): its model, or for a search run the model and the
    strategy with every option (``core.config.strategy_label``)."""
    if not run.config.get("strategy"):
        return run.model_slug
    return f"{run.model_slug} · {strategy_label(run.config)}"


def _latest(runs: Sequence[RunData]) -> RunData:
    return max(runs, key=lambda r: (r.created, str(r.path)))


def comparison_key(run: RunData) -> str:
    """What two runs must share for their cells to be the same comparison: sampling settings, n,
    the problem set and the dataset (seeds may differ: they are replicas)."""
    ids = run.meta.get("problem_set") or sorted({pid for vals in run.per_problem.values() for pid in vals})
    return json.dumps([run.sampling_settings(), run.n, ids, run.dataset_fingerprint], sort_keys=True, default=str)


def _describe(run: RunData) -> str:
    n_problems = run.meta.get("n_problems") or max((m.n_problems for m in run.metrics.values()), default=0)
    return (f"{run.path} (T={run.temperature:g}, n={run.n}, seed={run.seed}, {n_problems} problems, "
            f"scored {run.created:%Y-%m-%d %H:%M})")


def _base_run(base_slug: str, task: str, runs: Sequence[RunData], others: Sequence[tuple[str, RunData]]) -> tuple[RunData, str]:
    """The base's run for ``task`` among ``runs`` when nothing pins it: see the module docstring."""
    if len(runs) == 1:
        return runs[0], "base: its only run"
    support = {}
    for r in runs:
        key = comparison_key(r)
        support[r.path] = len({m for m, o in others if comparison_key(o) == key})
    best = max(support.values())
    tied = [r for r in runs if support[r.path] == best]
    if best > 0 and len(tied) == 1:
        return tied[0], f"base: the run whose settings, n and problems {best} other model(s) share"
    why = "none matches another model's settings, n and problems" if best == 0 else \
        f"{len(tied)} match {best} other model(s) equally"
    raise BonbenchError(f"the base {base_slug} has {len(runs)} runs of task {task} and {why}: "
                        + "; ".join(_describe(r) for r in sorted(tied if best else runs, key=lambda r: str(r.path)))
                        + "; pick one with --base-run RUN_DIR")


def _select(groups: Mapping[tuple[str, str], list[RunData]], base_slug: str | None,
            pinned: Mapping[str, RunData] | None = None) -> list[Selection]:
    out: list[Selection] = []
    base_runs: dict[str, RunData] = {}
    pinned = pinned or {}
    if base_slug is not None:
        for (model, task), runs in groups.items():
            if model == base_slug:
                if task in pinned:
                    base_runs[task], rule = pinned[task], "base: the run --base-run names"
                else:
                    others = [(m, r) for (m, t), rs in groups.items() if t == task and m != base_slug for r in rs]
                    base_runs[task], rule = _base_run(base_slug, task, runs, others)
                out.append(Selection(model, task, base_runs[task], rule, len(runs)))
    for (model, task), runs in sorted(groups.items()):
        if model == base_slug:
            continue
        base_run = base_runs.get(task)
        if base_run is None:
            out.append(Selection(model, task, _latest(runs), "latest run", len(runs)))
            continue
        same = [r for r in runs if comparison_key(r) == comparison_key(base_run)]
        close = [r for r in runs if r.sampling_settings() == base_run.sampling_settings()]
        if same:
            out.append(Selection(model, task, _latest(same), "latest run with the base run's settings, n and problems",
                                 len(runs)))
        elif close:
            out.append(Selection(model, task, _latest(close), "latest run with the base's sampling settings "
                                 "(n or problems differ)", len(runs)))
        else:
            out.append(Selection(model, task, _latest(runs), f"latest run; {MISMATCH} no run matches the base's settings",
                                 len(runs)))
    return out


def _diff(run_pp: Mapping[str, float] | None, base_pp: Mapping[str, float] | None, run_cell: Cell, base_cell: Cell,
          n_boot: int, seed: int) -> tuple[float, float, float, float | None, int, bool]:
    if run_pp and base_pp:
        shared = sorted(set(run_pp) & set(base_pp))
        if len(shared) >= 2:
            a = np.array([run_pp[i] for i in shared])
            b = np.array([base_pp[i] for i in shared])
            d, lo, hi, p_le0 = paired_bootstrap_diff(a, b, n_boot=n_boot, seed=seed)
            return d, lo, hi, p_le0, len(shared), True
    # no per-problem values on one side: independent normal approximation from the reported CIs
    se = math.hypot((run_cell.hi - run_cell.lo) / (2 * Z95), (base_cell.hi - base_cell.lo) / (2 * Z95))
    d = run_cell.value - base_cell.value
    return d, d - Z95 * se, d + Z95 * se, None, 0, False


def _pin_base_runs(base_runs: Sequence[Path], base_slug: str | None, wanted: set[str]) -> dict[str, RunData]:
    """The base's run per task that ``--base-run`` names (checked: the base's, scored, one per task)."""
    pinned: dict[str, RunData] = {}
    if base_runs and base_slug is None:
        raise BonbenchError("--base-run names the base's run: add --base MODEL")
    for path in base_runs:
        run = load_gate_run(path)  # a checkpoint folder is refused naming `bonbench run` to evaluate it
        if run.model_slug != base_slug:
            raise BonbenchError(f"--base-run {path} is a run of {run.model_slug}, not of the base {base_slug}; "
                                f"pass a run under runs/<task>/{base_slug}/")
        if run.config.get("strategy"):  # a search has a row of its own (module docstring), never the base's
            raise BonbenchError(f"--base-run {path} is a search run, whose row is {row_name(run)}, not the base's: "
                                "pin a sampling run of the base")
        if run.task in pinned:
            raise BonbenchError(f"--base-run names two runs for task {run.task}; keep one per task")
        if wanted and run.task not in wanted:
            continue
        if not run.metrics:
            raise BonbenchError(f"--base-run {path} has no scores; run `bonbench score {path}` first")
        pinned[run.task] = run
    return pinned


def _columns(groups: Mapping[tuple[str, str], list[RunData]], chosen: Mapping[tuple[str, str], Selection],
             metrics: Sequence[str] | None) -> list[tuple[str, str]]:
    """(task, metric) columns: the requested metrics, else every metric a chosen run has, in display order."""
    columns: list[tuple[str, str]] = []
    for task in sorted({t for _, t in groups}):
        present = {m for (mod, t), s in chosen.items() if t == task for m in s.run.metrics}
        wanted = [m for m in metrics if m in present] if metrics else sorted(present, key=metric_sort_key)
        columns.extend((task, m) for m in wanted)
    if metrics:
        missing = [m for m in metrics if not any(c[1] == m for c in columns)]
        if missing:
            raise BonbenchError(f"no run has metric(s) {', '.join(missing)}; check --metric (e.g. pass@1)")
    return columns


def _compare_to_base(chosen: Mapping[tuple[str, str], Selection], columns: Sequence[tuple[str, str]],
                     cells: dict[tuple[str, str, str], Cell], closed: set[tuple[str, str, str]], base_slug: str,
                     n_boot: int, seed: int) -> None:
    """Fill each measured cell's difference to the base's cell of the same task and metric (in place)."""
    for (model, task), sel in chosen.items():
        base_sel = chosen.get((base_slug, task))
        if model == base_slug or base_sel is None:
            continue
        for t, metric in columns:
            key, bkey = (model, task, metric), (base_slug, task, metric)
            if t != task or key not in cells or bkey not in cells or key in closed:
                continue
            d, lo, hi, p, n_shared, paired = _diff(sel.run.per_problem.get(metric), base_sel.run.per_problem.get(metric),
                                                   cells[key], cells[bkey], n_boot, seed)
            cells[key] = replace(cells[key], diff=d, diff_lo=lo, diff_hi=hi, p_improve=p, n_shared=n_shared, paired=paired,
                                 settings_match=sel.run.sampling_settings() == base_sel.run.sampling_settings())


def build_leaderboard(results_dir: Path, *, base: str | None = None, tasks: Sequence[str] | None = None,
                      metrics: Sequence[str] | None = None, n_boot: int = 2000, seed: int = 0,
                      base_runs: Sequence[Path] = ()) -> Leaderboard:
    """Collect every scored run under ``results_dir`` into a leaderboard (see the module docstring).
    ``base_runs``: run directories of the base, at most one per task, that pin its run there."""
    wanted = set(tasks or ())
    runs = [load_run(d) for d in find_run_dirs(results_dir, scored=True)]
    if wanted:
        runs = [r for r in runs if r.task in wanted]
    if not runs:
        what = f" for task(s) {', '.join(tasks)}" if tasks else ""
        raise BonbenchError(f"no scored runs under {results_dir}{what}; run `bonbench run ...` first")
    groups: dict[tuple[str, str], list[RunData]] = {}
    for r in runs:
        groups.setdefault((row_name(r), r.task), []).append(r)
    base_slug = None
    if base is not None:
        base_slug = model_slug(base)
        if not any(m == base_slug for m, _ in groups):
            have = sorted({m for m, _ in groups})
            searched = sorted({m for (m, _), rs in groups.items() if rs[0].model_slug == base_slug})
            if searched:  # its search rows compare with a sampling row; none of the base's is one
                others = [m for m in have if m not in searched]
                raise BonbenchError(f"--base {base!r} has only search runs under {results_dir} ({'; '.join(searched)}), "
                                    "and the base row is a model's sampling runs: run it without --strategy "
                                    f"(`bonbench run --model {base} ...`) or pick another --base"
                                    + (f" (other models: {', '.join(others)})" if others else ""))
            raise BonbenchError(f"--base {base!r} has no runs under {results_dir} (models: {', '.join(have)})")
    selections = _select(groups, base_slug, _pin_base_runs(base_runs, base_slug, wanted))
    chosen = {(s.model, s.task): s for s in selections}
    columns = _columns(groups, chosen, metrics)

    models = sorted({m for m, _ in groups}, key=lambda m: (m != base_slug, m))
    cells: dict[tuple[str, str, str], Cell] = {}
    closed: set[tuple[str, str, str]] = set()
    for (model, task), sel in chosen.items():
        for t, metric in columns:
            if t != task or metric not in sel.run.metrics:
                continue
            m = sel.run.metrics[metric]
            if metric_info(metric, m.notes, sel.run.per_problem.get(metric)).closed_form:
                closed.add((model, task, metric))  # no interval and no Δ: not a measurement of the model
                cells[(model, task, metric)] = Cell(m.value, math.nan, math.nan, m.n_problems)
            else:
                mc = mc_note(m.notes)
                cells[(model, task, metric)] = Cell(m.value, m.ci95[0], m.ci95[1], m.n_problems,
                                                    mc_se=mc[0] if mc is not None else None)
    notes: list[str] = []
    if base_slug is not None:
        _compare_to_base(chosen, columns, cells, closed, base_slug, n_boot, seed)
        notes.append(f"Δ = model - {base_slug} on the problems both runs scored (n = shared problems); "
                     f"{UP}/{DOWN}: the 95% paired-bootstrap interval of Δ ({n_boot} resamples) excludes 0; "
                     f"≈: no per-problem values, normal approximation from the two CIs; "
                     f"{MISMATCH}: sampling settings differ from the base run.")
        lower = sorted({m for _, m in columns if metric_info(m).direction == LOWER})
        if lower:
            notes.append(f"Lower is better for {', '.join(lower)}: there {UP} (a significant increase) is a move away from "
                         "the reference, shown red in the HTML page.")
    if any(c.mc_se is not None for c in cells.values()):
        notes.append("MC SE: the Monte Carlo standard error of a value estimated from random k-subsets (its kind "
                     "says so in `bonbench list metrics`), beside the bootstrap CI over problems.")
    notes += _verifier_notes(chosen, columns)
    notes += footnotes(m for _, m in columns)
    compute = _compute(chosen)
    if compute:
        notes.append("A row named model · strategy(options) holds that model's search runs, apart from its sampling row; "
                     "a search's metrics are at k = N, its budget. tokens/problem: the chosen run's compute ledger per "
                     "problem (policy prompt + generated tokens + the tokens its verifiers read).")
    return Leaderboard(models=models, columns=columns, cells=cells, selections=selections, base=base_slug, notes=notes,
                       compute=compute)


def _compute(chosen: Mapping[tuple[str, str], Selection]) -> dict[tuple[str, str], float | None]:
    """Tokens per problem of every chosen run of the tasks where one is a search (module docstring)."""
    searched = {task for (_, task), sel in chosen.items() if sel.run.config.get("strategy")}
    return {(row, task): tokens_per_problem(sel.run, sel.run.meta.get("verifier"))
            for (row, task), sel in chosen.items() if task in searched}


def _verifier_notes(chosen: Mapping[tuple[str, str], Selection], columns: Sequence[tuple[str, str]]) -> list[str]:
    """A note for each column whose cells come from different verifiers (bon@k of a PRM beside bon@k
    of a judge compares the verifiers as much as the models)."""
    notes = []
    for task, metric in columns:
        used = {str(sel.run.metrics[metric].notes["verifier"]) for (_, t), sel in chosen.items()
                if t == task and metric in sel.run.metrics and sel.run.metrics[metric].notes.get("verifier")}
        if len(used) > 1:
            notes.append(f"{task} {metric}: the cells come from different verifiers ({', '.join(sorted(used))}); "
                         "rescore the runs with one --verifier to compare the models alone.")
    return notes
