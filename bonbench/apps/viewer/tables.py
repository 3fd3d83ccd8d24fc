"""The problems table of each run the viewer shows, kept between pages.

``Tables.table(run)`` computes a run's table once and keeps it (in memory, and between starts in
``cache``); when the run's files grow (a run still being written) only the problems that got rows
are recomputed, and everything when the grading or scoring read changed. A run whose
``problems.json`` (the pipeline's, written when it scored) is current takes its table from that
file without reading a row. While a big run is read slice by slice (``RunView.read_more``),
``ready`` says which problems are whole so far and ``table(run, partial_ok=True)`` shows them.

What it does not do: take locks or start threads (``site``: one lock per run, held by its caller),
or render pages (``pages``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bonbench.apps.viewer.cache import load_table, save_table
from bonbench.apps.viewer.problems import (
    ProblemRow,
    Sources,
    problem_ids,
    problem_row,
    sources,
    summary_current,
    summary_rows,
)
from bonbench.apps.viewer.runs import RunView
from bonbench.pipeline.problem_summary import SUMMARY

SLICE = 0.02  # the share of each row file one step of a slice-by-slice reading takes


@dataclass
class Kept:
    """A run's problems table and the state of the rows it was computed from."""

    key: dict[str, Any]  # ``Sources.key()`` of the rows it was computed from
    rows: dict[str, ProblemRow]  # problem -> row, in the run's order


def read_to_end(run: RunView) -> None:
    """Read a run being read slice by slice to its end now."""
    while not run.read_more(SLICE):
        pass


def ready(src: Sources) -> list[str]:
    """While a run is read slice by slice: the first of its problems (``problem_ids``' order) that
    each file not read to its end holds and has gone past (its last problem may have more rows)."""
    partial = [i for i in (src.samples, src.grades, src.scores) if i is not None and not i.whole]
    last = [next(reversed(i.problems), None) for i in partial]
    out = []
    for pid in problem_ids(src):
        if any(pid not in i.problems or pid == end for i, end in zip(partial, last, strict=True)):
            break
        out.append(pid)
    return out


def notes(src: Sources) -> list[str]:
    """What a page says of the state of the run's files: a torn last line, lines that are not rows."""
    out = []
    for index in (src.samples, src.grades, src.scores):
        if index is not None and index.torn:
            out.append(f"{index.path}: the last line is torn (an interrupted write, or a run still being written); "
                       "it is left out, the rows before it are shown")
        if index is not None and index.bad:
            out.append(f"{index.path}: {index.bad} line(s) are not rows with a problem_id; they are left out")
    return out


class Tables:
    """The problems tables of the runs shown (the first ``limit`` problems of each: the bundle's --limit)."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.kept: dict[str, Kept] = {}
        self._summaries: dict[str, tuple[dict[str, Any], list[ProblemRow]]] = {}  # run id -> (problems.json, its rows)

    def table(self, run: RunView, partial_ok: bool = False) -> list[ProblemRow]:
        """The run's problems table: kept (in memory, and between starts in ``cache``) and only the
        problems that got rows recomputed, everything when the grading or scoring read changed.
        ``partial_ok``: while a big run is read slice by slice, the problems read so far
        (``RunView.reading`` says the table is not whole); else the run is read to its end first.
        A run whose ``problems.json`` (written by the pipeline when it scored) is current needs no
        row read: its table is that file's."""
        summary = self.summary(run)
        if summary is not None:
            return summary[:self.limit]
        if run.reading is not None and not partial_ok:
            read_to_end(run)  # here (a reading thread stops once it is over)
        src = sources(run)
        key = src.key()
        changed = run.take_changes()
        partial = run.reading is not None
        cached = self.kept.get(run.id)
        if cached is None and run.cache is not None and not partial:
            kept = load_table(run.cache, key)
            if kept is not None:
                cached = self.kept[run.id] = Kept(key, kept)
        if cached is not None and cached.key == key:
            return list(cached.rows.values())[:self.limit]
        ids = ready(src) if partial else problem_ids(src)
        same_reading = cached is not None and all(cached.key[k] == key[k] for k in ("grading", "scoring")) and (
            set(cached.key["files"]) == set(key["files"]))
        if cached is not None and same_reading and changed is not None:
            rows = {pid: cached.rows[pid] if pid in cached.rows and pid not in changed else problem_row(src, pid)
                    for pid in ids}
        else:
            rows = {pid: problem_row(src, pid) for pid in ids}
        self.kept[run.id] = Kept(key, rows)
        if run.cache is not None and not partial:
            save_table(run.cache, key, rows)
        return list(rows.values())[:self.limit]

    def summary(self, run: RunView) -> list[ProblemRow] | None:
        """The run's table from its current ``problems.json`` (``summary_rows``), kept while the file is unchanged."""
        doc = run.json_file(SUMMARY)  # the same document while the file is unchanged
        kept = self._summaries.get(run.id)
        if kept is not None and kept[0] is doc and summary_current(run, doc):
            return kept[1]
        rows = summary_rows(run)
        if rows is None:
            self._summaries.pop(run.id, None)
            return None
        self._summaries[run.id] = (doc, rows)
        return rows

    def ids(self, run: RunView, src: Sources | None = None) -> list[str]:
        """The run's problems in the table's order (the numbers of their pages)."""
        summary = self.summary(run)
        if summary is not None:
            return [r.problem_id for r in summary][:self.limit]
        return problem_ids(src if src is not None else sources(run))[:self.limit]

    def shown(self, run: RunView, n: int) -> bool:
        """Whether problem ``n`` of a run being read slice by slice has all its rows read (its page opens)."""
        shown = ready(sources(run))
        summary = self.summary(run)
        if summary is None:
            return n < len(shown)
        return n < len(summary) and summary[n].problem_id in set(shown)
