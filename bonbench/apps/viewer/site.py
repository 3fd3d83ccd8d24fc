"""The viewer's pages by address: what the server answers and what the bundle writes.

``Site.render(address)`` turns one relative address into its page, or None: ``index.html`` (the
runs and checkpoints), ``runs/<id>/index.html`` (a run and its problems), ``runs/<id>/problems/<n>.html``,
``compare/<a>/<b>/index.html`` and ``compare/<a>/<b>/problems/<n>.html`` (two runs of a task), and
``checkpoints/<id>/index.html``. An address is matched against these shapes and the ids and
problem numbers the site knows, never used as a path, so ``..``, an absolute path or an encoded
variant of either names no page. The problems table of a run is computed once and kept (in memory,
and between starts in ``cache``); when the run's files grow (a run still being written shows as far
as it goes, and more on the next visit) only the problems that got rows are recomputed. A problem
page reads that problem's rows alone. ``addresses`` lists every page, for the bundle.

Warnings met while reading (a torn last line, a file linked outside the folders given) are shown
on the page that met them, and printed once.

What it does not do: speak HTTP (``server``) or write files (``bundle``).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bonbench.apps.viewer.cache import load_table, save_table
from bonbench.apps.viewer.checkpoints import CheckpointView, evaluated_by
from bonbench.apps.viewer.compare import comparable, flips, paired_metrics, shared_problems
from bonbench.apps.viewer.pages import checkpoint_page, compare_page, compare_problem_page, problem_page, run_page, runs_page
from bonbench.apps.viewer.problems import (
    ProblemRow,
    Sources,
    dataset_metrics,
    metric_values,
    other_scores,
    problem_detail,
    problem_ids,
    problem_row,
    sources,
)
from bonbench.apps.viewer.prompts import TaskTexts
from bonbench.apps.viewer.runs import RunView

_RUN = re.compile(r"runs/([A-Za-z0-9_-]+)/(?:index\.html)?")
_PROBLEM = re.compile(r"runs/([A-Za-z0-9_-]+)/problems/(0|[1-9][0-9]{0,8})\.html")
_COMPARE = re.compile(r"compare/([A-Za-z0-9_-]+)/([A-Za-z0-9_-]+)/(?:index\.html)?")
_COMPARE_PROBLEM = re.compile(r"compare/([A-Za-z0-9_-]+)/([A-Za-z0-9_-]+)/problems/(0|[1-9][0-9]{0,8})\.html")
_CHECKPOINT = re.compile(r"checkpoints/([A-Za-z0-9_-]+)/(?:index\.html)?")
N_BOOT = 1000  # paired-bootstrap resamples of a comparison


@dataclass
class _Table:
    key: dict[str, Any]  # ``Sources.key()`` of the rows it was computed from
    rows: dict[str, ProblemRow]  # problem -> row, in the run's order


def _notes(src: Sources) -> list[str]:
    """What a page says of the state of the run's files: a torn last line, lines that are not rows."""
    out = []
    for index in (src.samples, src.grades, src.scores):
        if index is not None and index.torn:
            out.append(f"{index.path}: the last line is torn (an interrupted write, or a run still being written); "
                       "it is left out, the rows before it are shown")
        if index is not None and index.bad:
            out.append(f"{index.path}: {index.bad} line(s) are not rows with a problem_id; they are left out")
    return out


class Site:
    """The pages of the runs given, rendered on demand."""

    def __init__(self, runs: Sequence[RunView], texts: TaskTexts, report: Callable[[str], None] = lambda line: None,
                 limit: int | None = None, checkpoints: Sequence[CheckpointView] = ()) -> None:
        self.runs = {run.id: run for run in runs}
        self.checkpoints = {c.id: c for c in checkpoints}
        self.limit = limit  # show only the first `limit` problems of each run (the bundle's --limit)
        self.texts = texts
        self.report = report  # where a warning goes once (the server's stderr)
        self._tables: dict[str, _Table] = {}
        self._reported: set[str] = set()

    def _caught(self, fn: Callable[[], Any]) -> tuple[Any, list[str]]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = fn()
        lines = list(dict.fromkeys(str(w.message) for w in caught))
        for line in lines:
            if line not in self._reported:
                self._reported.add(line)
                self.report(f"warning: {line}")
        return value, lines

    def table(self, run: RunView) -> list[ProblemRow]:
        """The run's problems table: kept (in memory, and between starts in ``cache``) and only the
        problems that got rows recomputed, everything when the grading or scoring read changed."""
        src = sources(run)
        key = src.key()
        changed = run.take_changes()
        cached = self._tables.get(run.id)
        if cached is None and run.cache is not None:
            kept = load_table(run.cache, key)
            if kept is not None:
                cached = self._tables[run.id] = _Table(key, kept)
        if cached is not None and cached.key == key:
            return list(cached.rows.values())[:self.limit]
        ids = problem_ids(src)
        same_reading = cached is not None and all(cached.key[k] == key[k] for k in ("grading", "scoring")) and (
            set(cached.key["files"]) == set(key["files"]))
        if cached is not None and same_reading and changed is not None:
            rows = {pid: cached.rows[pid] if pid in cached.rows and pid not in changed else problem_row(src, pid)
                    for pid in ids}
        else:
            rows = {pid: problem_row(src, pid) for pid in ids}
        self._tables[run.id] = _Table(key, rows)
        if run.cache is not None:
            save_table(run.cache, key, rows)
        return list(rows.values())[:self.limit]

    def _ids(self, src: Sources) -> list[str]:
        return problem_ids(src)[:self.limit]

    def render(self, address: str) -> str | None:
        """The page at ``address`` (relative, no leading slash), or None when there is none."""
        if address in ("", "index.html"):
            boxes = [(c, len(evaluated_by(c, list(self.runs.values())))) for c in self.checkpoints.values()]
            return self._caught(lambda: runs_page(list(self.runs.values()), boxes))[0]
        found = _CHECKPOINT.fullmatch(address)
        if found and found.group(1) in self.checkpoints:
            c = self.checkpoints[found.group(1)]
            return self._caught(lambda: checkpoint_page(c, evaluated_by(c, list(self.runs.values()))))[0]
        found = _RUN.fullmatch(address)
        if found and found.group(1) in self.runs:
            run = self.runs[found.group(1)]
            return self._caught(lambda: self._run_page(run))[0]
        found = _PROBLEM.fullmatch(address)
        if found and found.group(1) in self.runs:
            run, n = self.runs[found.group(1)], int(found.group(2))
            return self._caught(lambda: self._problem_page(run, n))[0]
        found = _COMPARE.fullmatch(address) or _COMPARE_PROBLEM.fullmatch(address)
        pair = self._pair(found.group(1), found.group(2)) if found else None
        if found and pair is not None:
            k = int(found.group(3)) if found.re is _COMPARE_PROBLEM else None
            return self._caught(lambda: self._compare_page(*pair) if k is None else self._compare_problem(*pair, k))[0]
        return None

    def _pair(self, a: str, b: str) -> tuple[RunView, RunView] | None:
        """Two different runs of one task, by id."""
        if a == b or a not in self.runs or b not in self.runs or self.runs[a].task != self.runs[b].task:
            return None
        return self.runs[a], self.runs[b]

    def _compare_links(self, run: RunView) -> list[tuple[str, str]]:
        """(label, address) of the comparisons with the other runs of its task, each pair named once
        (the earlier run in the viewer's order first)."""
        order = list(self.runs)
        out = []
        for other in comparable(list(self.runs.values()), run):
            a, b = sorted((run.id, other.id), key=order.index)
            out.append((f"{other.model} ({other.id})", f"compare/{a}/{b}/index.html"))
        return out

    def _compare_page(self, a: RunView, b: RunView) -> str:
        rows_a = {r.problem_id: r for r in self.table(a)}
        rows_b = {r.problem_id: r for r in self.table(b)}
        pairs = [(rows_a[pid], rows_b[pid]) for pid in shared_problems(rows_a, rows_b)]
        return compare_page(a, b, paired_metrics(a, b, n_boot=N_BOOT), flips(rows_a, rows_b), pairs, N_BOOT)

    def _compare_problem(self, a: RunView, b: RunView, n: int) -> str | None:
        shared = shared_problems({r.problem_id: r for r in self.table(a)}, {r.problem_id: r for r in self.table(b)})
        if n >= len(shared):
            return None
        pid = shared[n]
        sides = []
        for run in (a, b):
            src = other_scores(run, sources(run))
            sides.append((run, problem_row(src, pid), problem_detail(src, pid)))
        texts, missing = self.texts.texts(a.config(), pid)
        return compare_problem_page(n, len(shared), sides, texts, missing)

    def _run_page(self, run: RunView) -> str:
        rows, lines = self._caught(lambda: self.table(run))
        columns = dataset_metrics(run)
        values = metric_values(run, columns, [row.problem_id for row in rows])
        checkpoint = next(((c.path.name, f"checkpoints/{c.id}/index.html") for c in self.checkpoints.values()
                           if run in evaluated_by(c, [run])), None)
        return run_page(run, columns, rows, values, self.texts.statements(run.config()), lines + _notes(sources(run)),
                        self._compare_links(run), checkpoint)

    def _problem_page(self, run: RunView, n: int) -> str | None:
        src, lines = self._caught(lambda: other_scores(run, sources(run)))
        lines += _notes(src)
        ids = self._ids(src)
        if n >= len(ids):
            return None
        pid = ids[n]
        columns = dataset_metrics(run)
        metrics = list(zip(columns, metric_values(run, columns, [pid])[0], strict=True))
        texts, missing = self.texts.texts(run.config(), pid)
        return problem_page(run, n, problem_row(src, pid), metrics, problem_detail(src, pid), texts, missing, len(ids),
                            lines)

    def addresses(self) -> list[str]:
        """Every page's address (for the bundle)."""
        out = ["index.html", *(f"checkpoints/{c}/index.html" for c in self.checkpoints)]
        for run in self.runs.values():
            out.append(f"runs/{run.id}/index.html")
            out += [f"runs/{run.id}/problems/{n}.html" for n in range(len(self._ids(sources(run))))]
        for run in self.runs.values():
            for _, address in self._compare_links(run):
                if address.startswith(f"compare/{run.id}/"):  # each pair once
                    a, b = address.split("/")[1:3]
                    rows_a = {r.problem_id: r for r in self.table(self.runs[a])}
                    rows_b = {r.problem_id: r for r in self.table(self.runs[b])}
                    out.append(address)
                    out += [f"compare/{a}/{b}/problems/{n}.html" for n in range(len(shared_problems(rows_a, rows_b)))]
        return out
