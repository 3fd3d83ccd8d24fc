"""Sandbox executions as Ray tasks (``--ray``): code graders' test lists spread over the cluster.

``RaySandbox.run_many_tests`` does what ``bonbench_sandbox.pool.run_many_tests`` does on one machine (test
lists in parallel, each in order with early stop at its first failing test) with Ray tasks instead
of threads: each task runs a chunk of test lists through the normal sandbox (``run_tests``) on
whatever node Ray schedules it on, one CPU per task. The driver keeps the execution cache: it serves
test lists whose results are all cached without submitting them, and stores what the tasks return,
so the cache file has one writer (the run directory's) and a rerun executes nothing.

Faults: executions are idempotent (same program, stdin and limits: same result), so a task whose
worker or node dies is re-run by Ray itself on another node (``max_retries``), which is exactly what
Ray's task retries are for. The judge of each test list (a picklable ``judge(test_idx, result)``,
``bonbench.plugins.graders.code_cases.case_judge``) runs inside the task, so early stop works as it does locally.

Ray Data would fit a stream of independent rows too, but it adds a dataset layer for what is a
list of tasks the driver waits on; plain tasks keep the driver's cache and progress simple.

The trusted replays of function-call tests (``bonbench.plugins.graders.replay``) go through the same
``run_many_tests`` as lone jobs with a judge that always passes; their verdicts are read by the
grader afterwards. Ctrl-C (through ``bonbench_sandbox.pool.SigintGate``, as the local pool takes
it) collects every task that has returned, stores its results in the cache and raises
``bonbench_sandbox.pool.Interrupted`` with every finished test list, so the grader keeps their grades;
running tasks are not waited for (they end with the driver's job).

This module does not judge outputs itself or build test cases (``bonbench.plugins.graders.code`` does).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bonbench.core import ray_cluster
from bonbench_sandbox.pool import POLL_S, Interrupted, SigintGate, run_tests

Judge = Callable[[int, Any], bool]  # (test index, ExecResult) -> passed
MAX_RETRIES = 3  # per task, on worker or node death (Ray's default for tasks, stated here on purpose)


def run_chunk(groups: Sequence[Sequence[Any]], judges: Sequence[Judge], stop_on_first_failure: bool) -> list[list[Any]]:
    """The task body: each test list through the local sandbox, in order (runs on a Ray worker)."""
    return [run_tests(list(g), stop_on_first_failure=stop_on_first_failure, judge=j) for g, j in zip(groups, judges, strict=True)]


def _from_cache(group: Sequence[Any], judge: Judge, stop: bool, cache: Any) -> list[Any] | None:
    """The group's results if the cache answers every test it would run, else None."""
    out = []
    for ti, job in enumerate(group):
        res = cache.get(job.key())
        if res is None:
            return None
        out.append(res)
        if stop and not (res.status == "ok" and judge(ti, res)):
            break
    return out


@dataclass(frozen=True)
class RaySandbox:
    """A ``GroupExecutor`` (``bonbench.plugins.graders.code``) on Ray tasks. ``groups_per_task``: test lists
    per task (None: about four tasks per cluster CPU, at most 16 lists each, so that the per-task
    overhead is amortised while every CPU stays busy to the end)."""

    options: ray_cluster.RayOptions
    groups_per_task: int | None = None

    def run_many_tests(self, groups: Sequence[Sequence[Any]], judges: Sequence[Judge], *, stop_on_first_failure: bool = True,
                       cache: Any = None, progress: Callable[[int], None] | None = None) -> list[list[Any]]:
        """Results per test list, in order (early stop as ``bonbench_sandbox.pool.run_many_tests``)."""
        results: list[list[Any] | None] = [None] * len(groups)
        todo: list[int] = []
        for gi, group in enumerate(groups):
            hit = _from_cache(group, judges[gi], stop_on_first_failure, cache) if cache is not None else None
            if hit is None:
                todo.append(gi)
            else:
                results[gi] = hit
        done = len(groups) - len(todo)
        if progress is not None and done:
            progress(done)
        if todo:
            ray = ray_cluster.connect(self.options)
            task = ray.remote(num_cpus=1, max_retries=MAX_RETRIES)(run_chunk)
            cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
            size = self.groups_per_task or max(1, min(16, math.ceil(len(todo) / (4 * cpus))))
            running: dict[Any, list[int]] = {}
            for start in range(0, len(todo), size):
                chunk = todo[start:start + size]
                ref = task.remote([list(groups[gi]) for gi in chunk], [judges[gi] for gi in chunk], stop_on_first_failure)
                running[ref] = chunk
            with SigintGate() as sigint:
                try:
                    while running:
                        sigint.check()
                        ready, _ = ray.wait(list(running), num_returns=1, timeout=POLL_S)
                        for ref in ready:
                            done += _collect(ray, ref, running.pop(ref), groups, results, cache)
                        if progress is not None and ready:
                            progress(done)
                    sigint.check()
                except KeyboardInterrupt:
                    ready, _ = ray.wait(list(running), num_returns=len(running), timeout=0) if running else ([], [])
                    for ref in ready:  # returned while the driver waited: keep them too
                        _collect(ray, ref, running.pop(ref), groups, results, cache)
                    raise Interrupted({gi: r for gi, r in enumerate(results) if r is not None}) from None
        assert all(r is not None for r in results), "every test list must have results"
        return [r for r in results if r is not None]


def _collect(ray: Any, ref: Any, chunk: list[int], groups: Sequence[Sequence[Any]], results: list[list[Any] | None],
             cache: Any) -> int:
    """A returned task's results into ``results`` and the cache; how many test lists it held."""
    try:
        got = ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        raise (cause if isinstance(cause, BaseException) else exc) from None
    for gi, res in zip(chunk, got, strict=True):
        results[gi] = res
        if cache is not None:
            for job, r in zip(groups[gi], res, strict=True):
                cache.put(job.key(), r)
    return len(chunk)
