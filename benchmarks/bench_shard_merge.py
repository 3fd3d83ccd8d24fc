"""Benchmark: a sharded run of the real MATH test split (scripted model) against the same run unsharded.

The scripted model answers each (problem, sample) with the gold answer in a \\boxed{} for two thirds
of the keys and a wrong integer otherwise (a hash of the key decides), so the real math grader has
real work. Times, on this machine, one after the other:

* the unsharded run (sample, grade, score) of ``--problems`` problems x ``--n`` samples;
* each of ``--shards`` shards of the same config (sample, grade, score its slice), in turn;
* ``bonbench merge`` of the shards (checks, keyed row merge, scoring; grades are reused);
* the same merge again (idempotent: appends nothing).

Prints the times, the rows merged, and whether the merged metrics.json (values and per-problem
values) equals the unsharded run's (it must). On a cluster the shards run at once, so the sharded
wall time is the slowest shard plus the merge. Usage::

    python benchmarks/bench_shard_merge.py [--data-dir ../shared/data] [--problems 5000] [--n 8] [--shards 8]

It does not load a model; tests/test_shard.py tests the behaviour.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from pathlib import Path

from bonbench.core import models
from bonbench.pipeline.shard import ShardSpec
from bonbench.plugins.samplers import select
from bonbench.plugins.samplers.scripted import ScriptedSampler
from bonbench.run.execute import execute
from bonbench.run.merge import merge
from bonbench.run.plan import plan
from bonbench.run.request import RunRequest

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--problems", type=int, default=5000)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--shards", type=int, default=8)
    args = ap.parse_args()

    from bonbench_tasks.math import math_task

    targets = {p.id: p.target for p in math_task(data_dir=args.data_dir).problems[: args.problems]}

    def answer(pid: str, idx: int) -> str:
        h = int(hashlib.sha256(f"{pid}:{idx}".encode()).hexdigest(), 16)
        return f"So the answer is $\\boxed{{{targets[pid] if h % 3 else h % 97}}}$."

    # no model: the scripted answers stand in for one (as in tests/test_shard.py)
    models.resolve_model = lambda name: models.ResolvedModel(
        name="scripted-math", path="scripted-math", is_chat=False, fingerprint="scripted", revision=None)
    select.get_sampler = lambda *a, **k: ScriptedSampler(answer)

    def request(out: Path, spec: ShardSpec | None = None) -> RunRequest:
        return RunRequest(task="math", metrics=(f"pass@1,{args.n}", f"maj@{args.n}"), n=args.n, backend="hf",
                          limit=args.problems, out=out, data_dir=args.data_dir, shard=spec)

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        reference = execute(plan(request(Path(tmp) / "ref"))).runs[0].store.root
        unsharded = time.perf_counter() - t0
        shard_times = []
        for i in range(1, args.shards + 1):
            t0 = time.perf_counter()
            run_dir = execute(plan(request(Path(tmp) / "sharded", ShardSpec(i, args.shards)))).runs[0].store.run_root
            shard_times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        merged = merge(run_dir, data_dir=args.data_dir)
        merge_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = merge(run_dir, data_dir=args.data_dir)
        again_s = time.perf_counter() - t0
        got = json.loads((run_dir / "metrics.json").read_text())
        want = json.loads((reference / "metrics.json").read_text())
        same = got["metrics"] == want["metrics"] and got["per_problem"] == want["per_problem"]

    samples = args.problems * args.n
    print(f"MATH test, {args.problems} problems x n={args.n} = {samples} samples, {args.shards} shards")
    print(f"unsharded run (sample+grade+score):   {unsharded:7.1f} s")
    print(f"shards, one after the other:          {sum(shard_times):7.1f} s  (slowest {max(shard_times):.1f} s)")
    print(f"merge:                                {merge_s:7.1f} s  rows appended: {dict(merged.added)}")
    print(f"merge again:                          {again_s:7.1f} s  rows appended: {sum(again.added.values())}")
    print(f"merged metrics == unsharded metrics (values and per problem): {same}")


if __name__ == "__main__":
    main()
