"""Compute the recipe tables of many runs on every CPU: a recipe's cold time is its runs' tables.

A cold ``bonbench recipe`` spends its time computing each run's table (``recipe_table``: reading
the run's columns or rows and computing the estimators), one run after another, in Python. The
time beyond the CPU is waiting for a CPU, not for the disk (``benchmarks/bench_recipe.py`` measures
both from the scheduler's own counts): on a machine other users load, one process gets one share
of it. ``table_of`` chooses how a run's table is computed (a sampling, search or adaptive run);
``keep_tables`` computes the tables not kept yet with ``workers`` processes at once: this process
and ``workers - 1`` children (``python -m bonbench.apps.analysis.recipe_workers``), each taking
the next run, biggest first, and keeping its table where ``run_table`` keeps it
(``$BONBENCH_CACHE/recipe``). The caller then reads every table with ``table_of``, in its own
order, so a run that fails fails there, in its own words and in the same order as without workers.

Plain child processes rather than ``multiprocessing`` (as the MATH grader's workers): they work
from scripts without a ``__main__`` guard and from threads, and share nothing but the cache
folder. Without a writable cache the tables cannot travel, so everything is computed in this
process.

What it does not do: choose strategies (``recipe``) or compute a table itself (``recipe_table``,
``recipe_designs``).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from bonbench.apps.analysis.recipe_designs import adaptive_table, is_adaptive, is_search, search_table
from bonbench.apps.analysis.recipe_table import RunTable, TableSpec, is_kept, run_table
from bonbench.apps.analysis.rundir import RunData, load_run
from bonbench.core.cache import cache_dir


def table_of(run: RunData, spec: TableSpec) -> RunTable:
    """``run``'s table, kept or computed (a search run's and an adaptive run's by ``recipe_designs``)."""
    return run_table(run, spec, search_table if is_search(run) else adaptive_table if is_adaptive(run) else None)


# each child holds one run's rows and outcomes at a time (a few hundred MB at 5,000 x 64), so a
# many-core machine does not get one per CPU
MAX_WORKERS = 8


def default_workers() -> int:
    """One process per CPU this process may run on, at most ``MAX_WORKERS``."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_WORKERS))


def _cache_writable() -> bool:
    folder = cache_dir("recipe")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def _size(run: RunData) -> int:
    """What a run's table costs, roughly: its samples file's bytes."""
    try:
        return (run.path / "samples.jsonl").stat().st_size
    except OSError:
        return 0


def keep_tables(runs: Sequence[RunData], spec: TableSpec, workers: int) -> None:
    """Compute and keep the tables of ``runs`` not kept yet, ``workers`` at a time (module docstring).
    A run whose table fails is left for the caller's ``table_of``, which says why."""
    todo = sorted((r for r in runs if not is_kept(r, spec)), key=_size, reverse=True)
    children = min(workers, len(todo)) - 1
    if children < 1 or not _cache_writable():
        return
    work: queue.Queue[RunData] = queue.Queue()
    for r in todo:
        work.put(r)
    stop = threading.Event()
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[3])  # the folder holding the bonbench package
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    procs = [subprocess.Popen([sys.executable, "-m", __name__, json.dumps([spec.bom_share, list(spec.rules)])],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
             for _ in range(children)]
    threads = [threading.Thread(target=_feed, args=(p, work, stop), daemon=True) for p in procs]
    for t in threads:
        t.start()
    try:
        while not stop.is_set():
            try:
                run = work.get_nowait()
            except queue.Empty:
                break
            try:
                table_of(run, spec)
            except Exception:  # noqa: BLE001  # the caller's table_of computes it again and says why, in run order
                stop.set()
    finally:
        stop.set()
        for p in procs:
            if p.stdin is not None:
                p.stdin.close()
        for t in threads:
            t.join()
        for p in procs:
            p.wait()


def _feed(proc: subprocess.Popen[str], work: queue.Queue[RunData], stop: threading.Event) -> None:
    """Give ``proc`` the next run until the work is done, stopped, or the child is gone."""
    assert proc.stdin is not None and proc.stdout is not None  # both are pipes (Popen above)
    while not stop.is_set():
        try:
            run = work.get_nowait()
        except queue.Empty:
            return
        try:
            proc.stdin.write(f"{run.path}\n")
            proc.stdin.flush()
        except OSError:  # the child is gone: the caller computes what is left
            return
        reply = proc.stdout.readline().strip()
        if reply == "failed":  # the caller computes it again and says why, so no other run need be computed
            stop.set()
        if reply != "kept":  # failed, or the child is gone: the caller computes what is left
            return


def _serve(spec: TableSpec) -> None:
    """A child: for each run directory read from stdin, keep its table and answer ``kept`` or ``failed``."""
    for line in sys.stdin:
        try:
            table_of(load_run(Path(line.rstrip("\n"))), spec)
            reply = "kept"
        except Exception:  # noqa: BLE001  # the parent computes this run again and says why
            reply = "failed"
        print(reply, flush=True)


if __name__ == "__main__":
    share, rules = json.loads(sys.argv[1])
    try:
        _serve(TableSpec(float(share), tuple(rules)))
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: the parent reports it, once
        sys.exit(130)
