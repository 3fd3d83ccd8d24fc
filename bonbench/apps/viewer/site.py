"""The viewer's pages by address: what the server answers and what the bundle writes.

``Site.render(address)`` turns one relative address into its page, or None: ``index.html`` (the
runs and checkpoints), ``runs/<id>/index.html`` (a run and its problems), ``runs/<id>/problems/<n>.html``,
``compare/<a>/<b>/index.html`` and ``compare/<a>/<b>/problems/<n>.html`` (two runs of a task), and
``checkpoints/<id>/index.html``. An address is matched against these shapes and the ids and
problem numbers the site knows, never used as a path, so ``..``, an absolute path or an encoded
variant of either names no page. The problems table of a run is computed once and kept (``tables``:
a run still being written shows as far as it goes, and more on the next visit). A problem page
reads that problem's rows alone. ``addresses`` lists every page, for the bundle.

A served site (``progressive``) opens a big run that is not indexed yet without waiting for the
whole pass over its rows: its run page starts a thread that reads the run a slice at a time, waits
for it ``READ_SECONDS`` at most, then shows the problems read so far (``ready``: whole in every file,
as far as anyone can tell before the end) with the share read, and reloads itself until the table
is whole. A run whose ``problems.json`` (the pipeline's, written when it scored) is current shows
its whole table at once from that file; its thread then starts once the page is rendered and reads
the rows only for the problem pages. The thread takes the run's lock slice by slice, so the run's
pages are answered between slices. A problem page waits (holding no lock) until its problem is
read; a comparison of runs being read shows their paired metrics at once and its problems once
both are read. The bundle reads every run to its end first.

Warnings met while reading (a torn last line, a file linked outside the folders given) are shown
on the page that met them, and printed once; each thread captures its own (``capture.caught``), so
no lock is shared between runs.

What it does not do: speak HTTP (``server``) or write files (``bundle``).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from bonbench.apps.viewer.capture import caught
from bonbench.apps.viewer.checkpoints import CheckpointView, evaluated_by
from bonbench.apps.viewer.compare import comparable, flips, paired_metrics, shared_problems
from bonbench.apps.viewer.pages import checkpoint_page, compare_page, compare_problem_page, problem_page, run_page, runs_page
from bonbench.apps.viewer.problems import (
    ProblemRow,
    dataset_metrics,
    found_sources,
    metric_values,
    other_scores,
    problem_detail,
    problem_row,
    sources,
)
from bonbench.apps.viewer.prompts import TaskTexts
from bonbench.apps.viewer.runs import RunView
from bonbench.apps.viewer.shards import ShardedRun
from bonbench.apps.viewer.tables import SLICE, Tables, notes, read_to_end

_RUN = re.compile(r"runs/([A-Za-z0-9_-]+)/(?:index\.html)?")
_PROBLEM = re.compile(r"runs/([A-Za-z0-9_-]+)/problems/(0|[1-9][0-9]{0,8})\.html")
_COMPARE = re.compile(r"compare/([A-Za-z0-9_-]+)/([A-Za-z0-9_-]+)/(?:index\.html)?")
_COMPARE_PROBLEM = re.compile(r"compare/([A-Za-z0-9_-]+)/([A-Za-z0-9_-]+)/problems/(0|[1-9][0-9]{0,8})\.html")
_CHECKPOINT = re.compile(r"checkpoints/([A-Za-z0-9_-]+)/(?:index\.html)?")
N_BOOT = 1000  # paired-bootstrap resamples of a comparison
READ_SECONDS = 0.8  # how long a run page waits for a big run's reading before it shows the problems read so far
BIG = 64 << 20  # bytes of rows not indexed yet past which a served run is read a slice at a time



def pause() -> None:
    """Between two slices of a reading: let a page waiting for the run's lock take it (a lock is not fair)."""
    time.sleep(0.002)





class Site:
    """The pages of the runs given, rendered on demand."""

    def __init__(self, runs: Sequence[RunView], texts: TaskTexts, report: Callable[[str], None] = lambda line: None,
                 limit: int | None = None, checkpoints: Sequence[CheckpointView] = (), progressive: bool = False,
                 sharded: Sequence[ShardedRun] = ()) -> None:
        self.runs = {run.id: run for run in runs}
        self.checkpoints = {c.id: c for c in checkpoints}
        self.sharded = list(sharded)  # runs whose shards are not merged yet: listed, with the merge command
        self.limit = limit  # show only the first `limit` problems of each run (the bundle's --limit)
        self.texts = texts
        self.report = report  # where a warning goes once (the server's stderr)
        self.progressive = progressive  # a big run's page shows what is read so far (the server; not the bundle)
        self.tables = Tables(limit)
        self._reported: set[str] = set()
        self._reporting = threading.Lock()  # guards _reported only (held for no reading)
        # one lock per run: pages of one run wait for each other (its indexes and table are not thread-safe),
        # pages of other runs do not; pages of two runs take both, in the viewer's order
        self.locks = {run_id: threading.RLock() for run_id in self.runs}
        self._readers: dict[str, threading.Thread] = {}  # run id -> the thread reading it slice by slice

    def _caught(self, fn: Callable[[], Any]) -> tuple[Any, list[str]]:
        """``fn()`` and the warnings it met (this thread's alone: pages and readings of other runs go on)."""
        value, lines = caught(fn)
        with self._reporting:
            fresh = [line for line in lines if line not in self._reported]
            self._reported.update(fresh)
        for line in fresh:
            self.report(f"warning: {line}")
        return value, lines

    def render(self, address: str) -> str | None:
        """The page at ``address`` (relative, no leading slash), or None when there is none. Safe to
        call from several threads: the pages of one run are rendered one at a time."""
        named = [r for r in self.runs if f"/{r}/" in f"/{address}"]
        found = _RUN.fullmatch(address)
        pending = []
        if self.progressive and found and found.group(1) in self.runs:
            pending.append(self._wait_for_reading(self.runs[found.group(1)]))
        found = _COMPARE.fullmatch(address)
        if self.progressive and found and self._pair(found.group(1), found.group(2)) is not None:
            pending += [self._wait_for_reading(self.runs[r], wait=False) for r in found.groups()]
        found = _PROBLEM.fullmatch(address)
        # a run with a current problems.json finds a problem's rows at once (``_found_problem_page``)
        if found and found.group(1) in self._readers and self.tables.summary(self.runs[found.group(1)]) is None:
            self._wait_until_shown(self.runs[found.group(1)], int(found.group(2)))
        found = _COMPARE_PROBLEM.fullmatch(address)
        if found:  # its numbers are those of both runs' whole tables: wait for their readings, holding no lock
            for rid in found.group(1, 2):
                reader = self._readers.get(rid)
                if reader is not None and reader.ident is not None:
                    reader.join()
        locks = [self.locks[r] for r in self.runs if r in named]  # in the viewer's order: no two pages deadlock
        for lock in locks:
            lock.acquire()
        try:
            return self._render(address)
        finally:
            for lock in reversed(locks):
                lock.release()
            for reader in pending:
                if reader is not None:
                    reader.start()

    def _wait_for_reading(self, run: RunView, wait: bool = True) -> threading.Thread | None:
        """Start reading a big run not indexed yet in a thread of its own, and wait for it
        ``READ_SECONDS`` at most (without the run's lock, which the thread takes slice by slice).
        A run whose table is its current ``problems.json`` waits for nothing: its reading (for the
        problem pages) is returned to be started once its page is rendered, so that the page does not
        share the processor with it."""
        with self.locks[run.id]:
            reader = self._readers.get(run.id)
            # a reading left unfinished (its thread stopped on an error) is taken up again
            stopped = reader is None or (reader.ident is not None and not reader.is_alive())
            if stopped and (run.reading is not None or run.unread() > BIG):
                run.start_reading()
                reader = self._readers[run.id] = threading.Thread(target=self._read, args=(run,), daemon=True,
                                                                  name=f"viewer-read-{run.id}")
                if self.tables.summary(run) is not None:
                    return reader
                reader.start()
        if wait and reader is not None and reader.ident is not None and self.tables.summary(run) is None:
            reader.join(READ_SECONDS)
        return None

    def _wait_until_shown(self, run: RunView, n: int) -> None:
        """A problem page of a run being read: wait (without locks) for the reading thread until the
        problem is shown, so that its page does not read the run itself while holding them."""
        reader = self._readers[run.id]
        while reader.is_alive():
            with self.locks[run.id]:
                if run.reading is None or self._caught(lambda: self.tables.shown(run, n))[0]:
                    return
            reader.join(0.2)

    def _read(self, run: RunView) -> None:
        """The reading thread: one slice at a time under the run's lock, each followed by the table of
        the problems read so far, then the whole table (kept)."""
        try:
            while True:
                pause()
                with self.locks[run.id]:
                    if run.reading is None or self._caught(lambda: run.read_more(SLICE))[0]:
                        break
                    self._caught(lambda: self.tables.table(run, partial_ok=True))  # the page then only draws it
            with self.locks[run.id]:
                self._caught(lambda: self.tables.table(run))
        except Exception as exc:  # noqa: BLE001 - the page reads the run itself and shows the error
            self.report(f"warning: reading {run.path} in the background stopped ({exc}); its page reads it")

    def _render(self, address: str) -> str | None:
        if address in ("", "index.html"):
            boxes = [(c, len(evaluated_by(c, list(self.runs.values())))) for c in self.checkpoints.values()]
            return self._caught(lambda: runs_page(list(self.runs.values()), boxes, self.sharded))[0]
        found = _CHECKPOINT.fullmatch(address)
        if found and found.group(1) in self.checkpoints:
            c = self.checkpoints[found.group(1)]
            known = list(self.runs.values())
            return self._caught(lambda: checkpoint_page(c, evaluated_by(c, known), known))[0]
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
        reading = [r for r in (a, b) if r.reading is not None and self.tables.summary(r) is None]
        if self.progressive and reading:
            # a big run not read yet: its reading thread goes on, this page shows the metrics and reloads
            lines = [f"still reading run {r.id}'s rows: {r.read_share():.0%} read; the flipped and shared problems "
                     "are listed once both runs are read, as this page reloads" for r in reading]
            return compare_page(a, b, paired_metrics(a, b, n_boot=N_BOOT), [], [], N_BOOT, warnings=lines, reload=True)
        rows_a = {r.problem_id: r for r in self.tables.table(a)}
        rows_b = {r.problem_id: r for r in self.tables.table(b)}
        pairs = [(rows_a[pid], rows_b[pid]) for pid in shared_problems(rows_a, rows_b)]
        return compare_page(a, b, paired_metrics(a, b, n_boot=N_BOOT), flips(rows_a, rows_b), pairs, N_BOOT)

    def _compare_problem(self, a: RunView, b: RunView, n: int) -> str | None:
        shared = shared_problems({r.problem_id: r for r in self.tables.table(a)}, {r.problem_id: r for r in self.tables.table(b)})
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
        rows, lines = self._caught(lambda: self.tables.table(run, partial_ok=True))
        reading = None
        if run.reading is not None and self.tables.summary(run) is not None:
            lines = [f"reading this run's rows for the problem pages: {run.read_share():.0%} read; the table is whole "
                     "(the pipeline's problems.json), and a problem's page opens once its rows are read", *lines]
        elif run.reading is not None:
            reading = run.read_share()
            lines = [f"still reading this run's rows: {reading:.0%} read; the table shows the {len(rows):,} problems "
                     "read so far and fills in as this page reloads", *lines]
        columns = dataset_metrics(run)
        values = metric_values(run, columns, [row.problem_id for row in rows])
        checkpoint = next(((c.path.name, f"checkpoints/{c.id}/index.html") for c in self.checkpoints.values()
                           if run in evaluated_by(c, [run])), None)
        return run_page(run, columns, rows, values, self.texts.statements(run.config()), lines + notes(sources(run)),
                        self._compare_links(run), checkpoint, reload=reading is not None)

    def _problem_page(self, run: RunView, n: int) -> str | None:
        if run.reading is not None and not self.tables.shown(run, n):
            summary = self.tables.summary(run)
            if summary is not None and n < len(summary):
                page = self._found_problem_page(run, n, summary)
                if page is not None:
                    return page
            # not read yet, and not found at once (or its reading stopped): read the run to its end
            self._caught(lambda: read_to_end(run))
        src, lines = self._caught(lambda: other_scores(run, sources(run)))
        lines += notes(src)
        ids = self.tables.ids(run, src)
        if n >= len(ids):
            return None
        pid = ids[n]
        columns = dataset_metrics(run)
        metrics = list(zip(columns, metric_values(run, columns, [pid])[0], strict=True))
        texts, missing = self.texts.texts(run.config(), pid)
        return problem_page(run, n, problem_row(src, pid), metrics, problem_detail(src, pid), texts, missing, len(ids),
                            lines)

    def _found_problem_page(self, run: RunView, n: int, summary: Sequence[ProblemRow]) -> str | None:
        """Problem ``n``'s page from its rows found by a byte search (``found_sources``), before the
        run's reading reaches them; None when they are not all found."""
        row = summary[n]
        src, lines = self._caught(lambda: found_sources(run, row))
        if src is None:
            return None
        columns = dataset_metrics(run)
        metrics = list(zip(columns, metric_values(run, columns, [row.problem_id])[0], strict=True))
        texts, missing = self.texts.texts(run.config(), row.problem_id)
        return problem_page(run, n, row, metrics, problem_detail(src, row.problem_id), texts, missing, len(summary),
                            lines)

    def addresses(self) -> list[str]:
        """Every page's address (for the bundle)."""
        out = ["index.html", *(f"checkpoints/{c}/index.html" for c in self.checkpoints)]
        for run in self.runs.values():
            out.append(f"runs/{run.id}/index.html")
            out += [f"runs/{run.id}/problems/{n}.html" for n in range(len(self.tables.ids(run)))]
        for run in self.runs.values():
            for _, address in self._compare_links(run):
                if address.startswith(f"compare/{run.id}/"):  # each pair once
                    a, b = address.split("/")[1:3]
                    rows_a = {r.problem_id: r for r in self.tables.table(self.runs[a])}
                    rows_b = {r.problem_id: r for r in self.tables.table(self.runs[b])}
                    out.append(address)
                    out += [f"compare/{a}/{b}/problems/{n}.html" for n in range(len(shared_problems(rows_a, rows_b)))]
        return out
