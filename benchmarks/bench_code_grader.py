"""Grading throughput of HumanEval: the record + trusted-replay design against the single-process
harness it replaced (asserts inside the untrusted process), same sandbox, same workers, no cache.

Workload: the 164 canonical solutions (``--limit`` to take fewer), ``--repeats`` rounds; the two
variants take turns so that load from other processes hits both alike. Every grade must be correct.
Usage: python benchmarks/bench_code_grader.py [--repeats 2] [--workers 2] [--n 1] [--limit N] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import sys
import time

from bonbench.api.task import get_task
from bonbench.core.records import Sample
from bonbench.plugins.graders.code import CodeGrader
from bonbench.plugins.graders.code_cases import ExecCase
from bonbench_tasks.humaneval import build_jobs, program_source


def single_process(problem, completion):
    return [ExecCase(source=program_source(problem, completion), label="check")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--n", type=int, default=1, help="samples per problem (trusted runs are batched per problem)")
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args(argv)
    task = get_task("humaneval", data_dir=args.data_dir)
    problems = {p.id: p for p in task.problems[: args.limit]}
    samples = [Sample(pid, i, p.meta["canonical_solution"], 1, "stop") for pid, p in problems.items() for i in range(args.n)]
    variants = {"record + trusted replay": build_jobs, "single process (old)": single_process}
    seconds = dict.fromkeys(variants, 0.0)
    for _ in range(args.repeats):
        for name, build in variants.items():
            grader = CodeGrader(build, cache_dir=None, workers=args.workers)
            start = time.perf_counter()
            grades = grader.grade(problems, samples)
            seconds[name] += time.perf_counter() - start
            bad = [g for g in grades if g.correct is not True]
            assert not bad, f"{name}: {len(bad)} canonical solutions failed, e.g. {bad[0]}"
    n = len(samples) * args.repeats
    for name, s in seconds.items():
        print(f"{name:26s}: {n / s:7.1f} samples/s ({n} samples, workers={args.workers})")
    new, old = (n / seconds[k] for k in variants)
    print(f"record + replay / single process: {new / old:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
