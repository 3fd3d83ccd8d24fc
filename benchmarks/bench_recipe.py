"""Benchmark ``bonbench recipe`` (issue 35): 20 runs of 5,000 problems x 64 samples in under 30 s.

Writes the synthetic runs (``bonbench.apps.analysis.synthetic``: the store's layout, with token
counts, answers and a verifier with scores in [0, 1], and the ``columns.npz`` a scoring writes)
into a temporary folder, then times ``build_recipe`` over all of them for three budgets, in turns:
cold (no table kept: each run's columns read and its estimators computed) in this process alone
(``--workers 1``) and with one process per CPU (the command's default, ``recipe_workers``; both
``--repeat`` times in turns, since the other users' load changes from minute to minute), warm
(the tables ``recipe_table`` keeps), and cold again without the columns (every run's rows read:
the baseline, as for an imported or old run; ``--no-baseline`` skips it), and checks that the
cold recipes are the same JSON. The writing is not timed.

"Cold" is the first recipe of runs whose files the page cache still holds (they were just
written); ``--evict`` first drops the run files from the page cache (fsync, then
``posix_fadvise(DONTNEED)`` on each file: a cold disk read without root's ``drop_caches``, which on
a shared machine would also empty every other user's cache). Each time is split with the
scheduler's counts of the main thread (``/proc/self/task/<tid>/schedstat``): on a CPU, waiting in
the run queue for one (the other users' load), and the rest (waiting for the disk or for the
worker processes); the CPU column adds the workers' CPU. ``--rules`` as the command's (default
maj,bon; wmaj and bom are opt-in). Prints the load average, the ratios to the 30 s target and to
the baseline and, with ``--profile`` (which slows the first cold run), where the time went from
cProfile's cumulative times. ``--problems``/``--runs``/``--n`` shrink it for a quick look.
Not a test: it prints figures; run it by hand (`python benchmarks/bench_recipe.py`).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from bonbench.apps.analysis.recipe import Recipe, build_recipe
from bonbench.apps.analysis.recipe_workers import default_workers
from bonbench.apps.analysis.recipe_write import recipe_json
from bonbench.apps.analysis.synthetic import write_synthetic_run
from bonbench.pipeline.run_columns import COLUMNS

TARGET_S = 30.0


def write_runs(root: Path, runs: int, problems: int, n: int) -> None:
    rng = np.random.default_rng(0)
    ids = [f"p{i:05d}" for i in range(problems)]
    base = rng.beta(0.7, 0.8, size=problems)
    for r in range(runs):
        skill = 0.6 + 0.8 * r / max(runs - 1, 1)  # weaker to stronger models / checkpoints
        p = np.clip(base * skill, 0.0, 1.0)
        corr = (rng.random((problems, n)) < p[:, None]).astype(float)
        scores = np.clip(0.5 * corr + 0.5 * rng.random((problems, n)), 0.0, 1.0)  # a verifier in [0, 1]
        write_synthetic_run(root, p, n=n, model=f"model-{r // 4}", temperature=0.2 + 0.2 * (r % 4), seed=r,
                            problem_ids=ids, correct=corr, extra_scores={"verifier": scores}, metrics=("pass@1",),
                            n_boot=10, n_tokens=rng.integers(50, 400, size=(problems, n)), prompt_tokens=120,
                            verifier_tokens=200, answers=True, columns=True)


Times = tuple[float, float, float, float]  # wall, CPU (this process and its workers), run-queue wait, other


def _sched() -> tuple[float, float]:
    """The main thread's seconds on a CPU and waiting in the run queue (0, 0 where the kernel does not say)."""
    try:
        on, wait = open(f"/proc/self/task/{threading.get_native_id()}/schedstat").read().split()[:2]
    except (OSError, ValueError):
        return 0.0, 0.0
    return int(on) / 1e9, int(wait) / 1e9


def _cpu() -> float:
    """CPU seconds of this process and its finished children."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def evict(root: Path) -> int:
    """Drop the files under ``root`` from the page cache (written back first); the bytes dropped."""
    dropped = 0
    for f in root.rglob("*"):
        if f.is_file():
            fd = os.open(f, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                dropped += os.fstat(fd).st_size
            finally:
                os.close(fd)
    return dropped


def timed(root: Path, cache: Path, rules: tuple[str, ...], workers: int, prof: cProfile.Profile | None = None
          ) -> tuple[Recipe, Times]:
    """The recipe of the runs under ``root`` with the tables kept in ``cache``, and its times."""
    os.environ["BONBENCH_CACHE"] = str(cache)
    t0, c0, (on0, wait0) = time.perf_counter(), _cpu(), _sched()
    if prof:
        prof.enable()
    recipe = build_recipe([root], [400.0, 1500.0, 6000.0], n_boot=1000, rules=rules, workers=workers)
    if prof:
        prof.disable()
    wall, (on1, wait1) = time.perf_counter() - t0, _sched()
    return recipe, (wall, _cpu() - c0, wait1 - wait0, wall - (on1 - on0) - (wait1 - wait0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--problems", type=int, default=5000)
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--rules", default="maj,bon", help="the recipe's --rules (default maj,bon, as the command's)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the cold run that reads every row")
    parser.add_argument("--workers", type=int, default=default_workers(), help="the parallel arm's processes")
    parser.add_argument("--repeat", type=int, default=1, help="cold turns of the two arms (each turn: 1 process, then N)")
    parser.add_argument("--evict", action="store_true", help="drop the run files from the page cache before each cold run")
    parser.add_argument("--profile", action="store_true", help="print the 15 costliest calls of the first cold run")
    args = parser.parse_args()
    rules = tuple(args.rules.split(","))
    prof = cProfile.Profile() if args.profile else None
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "results"
        t0 = time.perf_counter()
        write_runs(root, args.runs, args.problems, args.n)
        print(f"wrote {args.runs} runs of {args.problems} problems x {args.n} samples in "
              f"{time.perf_counter() - t0:.1f} s (not timed)")

        def cold(cache: str, workers: int, profile: cProfile.Profile | None = None) -> tuple[Recipe, Times]:
            if args.evict:
                print(f"evicted {evict(root) / 1e6:.0f} MB of run files from the page cache")
            return timed(root, Path(tmp) / cache, rules, workers, profile)

        recipe, one = cold("cache-1", 1, prof)  # cold, this process alone: no table kept yet
        par_recipe, par = cold("cache-par", args.workers)  # cold, one process per CPU
        _, warm = timed(root, Path(tmp) / "cache-par", rules, args.workers)  # warm: the kept tables
        times = [("cold, 1 process (columns read, estimators computed)", one),
                 (f"cold, {args.workers} processes", par), ("warm (tables kept)", warm)]
        ratios = [par[0] / one[0]]
        for r in range(1, args.repeat):  # the arms in turns again, each cold in a cache of its own
            _, one_r = cold(f"cache-1-{r}", 1)
            _, par_r = cold(f"cache-par-{r}", args.workers)
            times += [(f"cold, 1 process, turn {r + 1}", one_r), (f"cold, {args.workers} processes, turn {r + 1}", par_r)]
            ratios.append(par_r[0] / one_r[0])
        same = json.dumps(recipe_json(par_recipe)) == json.dumps(recipe_json(recipe))
        print(f"the recipe JSON with 1 and {args.workers} processes: {'identical' if same else 'DIFFERENT'}")
        if not args.no_baseline:
            for f in root.rglob(COLUMNS):
                f.unlink()
            rows, base = cold("cache-rows", 1)  # cold, every row read
            times.append(("cold without columns (rows read: the baseline)", base))
            same = json.dumps(recipe_json(rows)) == json.dumps(recipe_json(recipe))
            print(f"the recipe JSON with and without the columns: {'identical' if same else 'DIFFERENT'}")
    scale = 20 * 5000 * 64 / (args.runs * args.problems * args.n)
    size = "" if scale == 1 else f"; {scale:g} times smaller than the target's size"
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    for what, (secs, cpu, wait, other) in times:
        print(f"recipe {what}: {len(recipe.strategies)} strategies, {len(recipe.choices)} choices in {secs:.2f} s "
              f"wall ({secs / TARGET_S:.3f} of the {TARGET_S:.0f} s target{size}), {cpu:.2f} s CPU; main thread "
              f"waiting for a CPU {wait:.2f} s, for the disk or the workers {other:.2f} s")
    print(f"cold with {args.workers} processes / with 1, wall, each turn: {' '.join(f'{x:.3f}' for x in ratios)}")
    if not args.no_baseline:
        print(f"cold with columns / cold reading rows: {one[0] / base[0]:.3f} wall, {one[1] / base[1]:.3f} CPU "
              f"({base[0] / one[0]:.1f} times faster)")
    for c in recipe.choices:
        print(f"  budget {c.budget:g}: {c.best.label} {c.best.value:.3f} at {c.best.cost:.0f} tokens")
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(15)


if __name__ == "__main__":
    main()
