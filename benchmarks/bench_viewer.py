"""`bonbench view` on a big run: how long its problems table and one problem take, and the memory.

Writes a synthetic run (``bonbench.apps.analysis.synthetic.write_synthetic_run``: problems x n
samples, each completion padded to ``--chars`` characters) and times, in this process:
``cold`` (the first start: indexing the three row files and computing the table), ``warm`` (a new
viewer on the same run: the indexes and the table kept under $BONBENCH_CACHE), and one problem page
(the median of 20, each reading only that problem's rows). The viewer is measured in a process of
its own, so its peak resident memory (``resource.ru_maxrss``) is the viewer's alone, not the
writer's. Issue 32's target: a 5,000 x 256 run opens its
table in <= 2 s and one problem in <= 0.5 s.

Usage: python benchmarks/bench_viewer.py [--problems 5000] [--n 256] [--chars 400] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bonbench.apps.analysis.synthetic import write_synthetic_run
from bonbench.apps.viewer.prompts import TaskTexts
from bonbench.apps.viewer.runs import find_runs
from bonbench.apps.viewer.site import Site


def pad(run: Path, chars: int) -> None:
    """Give every sample a completion of ``chars`` characters (the synthetic run writes empty ones)."""
    if chars <= 0:
        return
    src = run / "samples.jsonl"
    tmp = run / "samples.jsonl.tmp"
    text = ("The answer is \\boxed{A}. " * (chars // 25 + 1))[:chars]
    with open(src, encoding="utf-8") as fin, open(tmp, "w", encoding="utf-8") as fout:
        for line in fin:
            row = json.loads(line)
            row["completion"], row["n_tokens"] = text, chars // 4
            fout.write(json.dumps(row) + "\n")
    os.replace(tmp, src)


def timed(site: Site, address: str) -> float:
    start = time.perf_counter()
    assert site.render(address) is not None, address
    return time.perf_counter() - start


def measure(out: Path) -> None:
    """Time the viewer on the run under ``out`` (this process does nothing else)."""
    os.environ["BONBENCH_CACHE"] = str(out / "cache")
    site = Site(find_runs([out / "results"]), TaskTexts(None))
    (rid,) = site.runs
    print(f"cold: table {timed(site, f'runs/{rid}/index.html'):.2f} s (indexing included)")
    site = Site(find_runs([out / "results"]), TaskTexts(None))
    print(f"warm: table {timed(site, f'runs/{rid}/index.html'):.2f} s (a new viewer: indexes and table kept)")
    picks = np.random.default_rng(1).integers(0, len(site.table(site.runs[rid])), 20)
    times = [timed(site, f"runs/{rid}/problems/{i}.html") for i in picks]
    print(f"one problem: median {statistics.median(times):.3f} s, max {max(times):.3f} s")
    print(f"peak memory: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB (the viewer's process)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=5000)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--chars", type=int, default=400)
    ap.add_argument("--out", type=Path, default=None, help="where the run and the cache go (default: a temp folder)")
    ap.add_argument("--measure", type=Path, default=None, help=argparse.SUPPRESS)  # the child: time an existing run
    args = ap.parse_args(argv)
    if args.measure is not None:
        measure(args.measure)
        return 0
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-viewer-"))
    start = time.perf_counter()
    p = np.random.default_rng(0).beta(0.5, 1.5, args.problems)
    run = write_synthetic_run(out / "results", p, n=args.n, metrics=("pass@1", "bon@16", "maj@16"), n_boot=10)
    pad(run, args.chars)
    size = sum(f.stat().st_size for f in run.rglob("*.jsonl"))
    print(f"run: {args.problems} x {args.n}, {size / 1e6:.0f} MB of rows, written in {time.perf_counter() - start:.0f} s",
          flush=True)
    return subprocess.run([sys.executable, __file__, "--measure", str(out)], check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main())
