"""``--ray`` on a local two-node Ray cluster (a head and a worker node on 127.0.0.1, one CPU each):

1. sampling throughput with 1 vs 2 Ray sampling actors, each the hf backend on the embedded Gemma 3
   270M (short completions), one actor per node. Engine load is not timed (a warm-up call first).
2. sandbox executions/s: the same trivial programs through the local pool (2 threads) and as Ray
   tasks on the 2 nodes (``RaySandbox``, one test list per task), their ratio, and the per-task
   overhead of Ray alone (no-op tasks with one CPU each, the shape sandbox tasks have).

    PYTHONPATH=.:.pp python benchmarks/bench_ray.py [--problems 4] [--n 4] [--max-tokens 16] [--programs 60]

Prints one line per figure. This machine has 2 cores shared with other jobs: two one-core actors
can at most double one one-core actor's throughput, and the sandbox runs are bound by the same 2 cores.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from ray_helpers import LocalCluster

from bonbench.api.sampler import SamplingParams
from bonbench.core import models, ray_cluster
from bonbench.pipeline import stages as pipeline
from bonbench.plugins.graders.ray_sandbox import RaySandbox
from bonbench.plugins.samplers.ray_backend import RaySampler, SamplerSpec
from bonbench.plugins.samplers.select import HFSamplerOptions
from bonbench.run.plan import plan
from bonbench.run.request import RunRequest


def always_passes(test_idx: int, result: Any) -> bool:
    return True


def noop() -> int:
    return 0


def bench_sampling(address: str, args: argparse.Namespace) -> None:
    run = plan(RunRequest(task="math", backend="hf", limit=args.problems, n=args.n, metrics=("pass@1",),
                          max_tokens=args.max_tokens, out=Path("/tmp/bench_ray_unused"))).runs[0]
    requests = pipeline.missing_requests(run, run.cfg.prompt_style)
    params = SamplingParams(temperature=1.0, max_tokens=args.max_tokens, seed=0, stop=run.cfg.stop)
    spec = SamplerSpec("hf", models.resolve_model(None), seed=0, options=HFSamplerOptions(dtype="float32", batch_size=64))
    total = sum(len(r.sample_indices) for r in requests)
    rates = {}
    for workers in (1, 2):
        # units of one problem: with 2 actors each takes every other problem
        sampler = RaySampler(spec, ray_cluster.RayOptions(address=address, workers=workers), unit_samples=args.n)
        try:
            for _ in sampler.generate(requests[:1], params):  # loads the engines, compiles the first shapes
                pass
            t0 = time.perf_counter()
            tokens = sum(s.n_tokens for batch in sampler.generate(requests, params) for s in batch)
            wall = time.perf_counter() - t0
        finally:
            sampler.close()
        rates[workers] = total / wall
        print(f"sampling, hf backend, {workers} Ray worker(s) x 1 CPU: {total} samples ({tokens} tokens) in {wall:.1f} s "
              f"= {total / wall:.2f} samples/s, {tokens / wall:.1f} tokens/s")
    print(f"sampling speed-up 2 vs 1 workers: {rates[2] / rates[1]:.2f}x")


def bench_sandbox(address: str, args: argparse.Namespace) -> None:
    import ray

    from bonbench_sandbox.pool import Job, run_many_tests

    # distinct programs (no deduplication), one test each, as a code grader submits them
    groups = [[Job(program=f"x = sum(range({1000 + i}))\nprint(x)\n", timeout_s=10.0)] for i in range(args.programs)]
    judges = [always_passes] * len(groups)
    run_many_tests(groups[:4], workers=2)  # warm the page cache for the sandbox binaries
    t0 = time.perf_counter()
    local = run_many_tests(groups, workers=2)
    t_local = time.perf_counter() - t0
    executor = RaySandbox(ray_cluster.RayOptions(address=address), groups_per_task=1)
    executor.run_many_tests(groups[:4], judges)  # start the task workers
    t0 = time.perf_counter()
    remote = executor.run_many_tests(groups, judges)
    t_ray = time.perf_counter() - t0
    assert [r[0].stdout for r in remote] == [r[0].stdout for r in local]
    n = len(groups)
    print(f"sandbox, local pool (2 threads): {n} executions in {t_local:.2f} s = {n / t_local:.1f} exec/s")
    print(f"sandbox, Ray tasks on 2 nodes x 1 CPU (1 program per task): {n} executions in {t_ray:.2f} s = "
          f"{n / t_ray:.1f} exec/s")
    print(f"sandbox ratio Ray / local pool: {t_local / t_ray:.2f}x; extra wall per task per CPU "
          f"(2 x (T_ray - T_pool) / N): {2 * (t_ray - t_local) / n * 1000:.1f} ms")
    task = ray.remote(num_cpus=1)(noop)
    ray.get([task.remote() for _ in range(20)])
    t0 = time.perf_counter()
    ray.get([task.remote() for _ in range(args.programs * 4)])
    t_noop = time.perf_counter() - t0
    print(f"Ray per-task overhead (no-op task, 1 CPU, 2 nodes, {args.programs * 4} tasks): "
          f"{t_noop / (args.programs * 4) * 1000:.1f} ms per task")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=4)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--programs", type=int, default=60)
    ap.add_argument("--skip-sampling", action="store_true")
    args = ap.parse_args()
    cluster = LocalCluster()
    try:
        import ray

        t0 = time.perf_counter()
        cluster.start()
        ray_cluster.connect(ray_cluster.RayOptions(address=cluster.address))
        cluster.wait_nodes(ray, 2)
        print(f"cluster: head + 1 worker node on 127.0.0.1, 1 CPU each, up in {time.perf_counter() - t0:.0f} s")
        if not args.skip_sampling:
            bench_sampling(cluster.address, args)
        bench_sandbox(cluster.address, args)
    finally:
        ray_cluster.shutdown()
        cluster.stop()


if __name__ == "__main__":
    main()
