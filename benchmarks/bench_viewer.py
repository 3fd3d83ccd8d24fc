"""`bonbench view` on a big run: how long its problems table and one problem take, and the memory.

Writes a synthetic run (``bonbench.apps.analysis.synthetic.write_synthetic_run``: problems x n
samples, each completion padded to ``--chars`` characters) and times, in one process, the viewer
as ``bonbench view`` serves it (``Site(progressive=True)``):
``first start`` (a viewer that has never seen the run: the table page as it first opens, showing the
problems read so far, and how many; then the page reloaded until the table is whole, as the browser
does, with the total time), ``later start`` (a new viewer on the same run: the indexes and the
table kept under $BONBENCH_CACHE), and one problem page (the median of 20, each reading only that
problem's rows). The viewer is measured in a process of
its own, so its peak resident memory (``resource.ru_maxrss``) is the viewer's alone, not the
writer's. Issue 32's target: a 5,000 x 256 run opens its
table in <= 2 s and one problem in <= 0.5 s.

The run gets the ``problems.json`` the pipeline writes when it scores a run
(``bonbench.pipeline.problem_summary``: ``summarize`` of each problem's rows, ``write_summary``), so
the first start shows the whole table at once while the rows are read for the problem pages;
``--no-summary`` leaves it out, as for a run imported or scored before the file existed (the table
then fills in as the rows are read).

Usage: python benchmarks/bench_viewer.py [--problems 5000] [--n 256] [--chars 400] [--out DIR] [--no-summary]
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

from bonbench.apps.analysis.synthetic import GRADER, VERIFIER, write_synthetic_run
from bonbench.apps.viewer.prompts import TaskTexts
from bonbench.apps.viewer.runs import find_runs
from bonbench.apps.viewer.site import Site
from bonbench.core.store import RunStore
from bonbench.pipeline.problem_summary import Verdict, summarize, write_summary


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


def summarize_rows(run: Path) -> float:
    """Write the run's problems.json from its rows, as ``stages.evaluate`` does from the records it
    holds (the rows are streamed here, so the writer does not hold a million samples); its seconds."""
    start = time.perf_counter()
    grades: dict[str, dict[int, Verdict]] = {}
    scores: dict[str, dict[int, float]] = {}
    lengths: dict[str, dict[int, float]] = {}
    with open(run / "samples.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            lengths.setdefault(row["problem_id"], {}).setdefault(row["sample_idx"], float(row["n_tokens"]))
    with open(run / "grades" / f"{GRADER}.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            grades.setdefault(row["problem_id"], {}).setdefault(
                row["sample_idx"], Verdict(row["correct"], row["score"], row["answer"]))
    with open(run / "scores" / f"{VERIFIER}.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            scores.setdefault(row["problem_id"], {}).setdefault(row["sample_idx"], float(row["score"]))
    lines = [summarize(pid, grades.get(pid, {}), scores.get(pid, {}), lengths[pid]) for pid in lengths]
    write_summary(RunStore(run), lines, GRADER, VERIFIER)
    return time.perf_counter() - start


RELOAD = 1.0  # seconds: templates/page.html.j2's refresh


def timed(site: Site, address: str) -> float:
    start = time.perf_counter()
    assert site.render(address) is not None, address
    return time.perf_counter() - start


def measure(out: Path) -> None:
    """Time the viewer on the run under ``out`` (this process does nothing else)."""
    os.environ["BONBENCH_CACHE"] = str(out / "cache")
    site = Site(find_runs([out / "results"]), TaskTexts(None), progressive=True)
    (rid,) = site.runs
    address = f"runs/{rid}/index.html"
    start = time.perf_counter()
    page = site.render(address)
    first = time.perf_counter() - start
    assert page is not None
    shown = page.count("<tr data-row")
    whole = "rows for the problem pages" in page or site.runs[rid].reading is None
    print(f"first start: table page {first:.2f} s, showing {shown} problems "
          f"{'(the whole table' if whole else '(the problems read so far'}; {site.runs[rid].read_share():.0%} of the "
          "rows read)")
    if whole and site.runs[rid].reading is not None:
        last = shown - 1  # the last problem: its rows are found by a byte search, long before the reading gets there
        t = timed(site, f"runs/{rid}/problems/{last}.html")
        print(f"first start: problem {last}'s page {t:.2f} s (while the rows are read: "
              f"{site.runs[rid].read_share():.0%} read)")
    reloads = 0
    while site.runs[rid].reading is not None:
        time.sleep(RELOAD)  # the page's <meta http-equiv="refresh"> (or a user's next click): the browser asks again
        page = site.render(address)
        reloads += 1
    assert page is not None
    print(f"first start: every row read after {time.perf_counter() - start:.2f} s ({reloads} reloads, "
          f"{page.count('<tr data-row')} problems)")
    site = Site(find_runs([out / "results"]), TaskTexts(None), progressive=True)
    print(f"later start: table {timed(site, address):.2f} s (a new viewer: indexes and table kept)")
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
    ap.add_argument("--no-summary", action="store_true", help="no problems.json (a run imported or scored before it existed)")
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
    if not args.no_summary:
        print(f"problems.json: written from the rows in {summarize_rows(run):.0f} s (the pipeline writes it from the "
              "records it holds when it scores)", flush=True)
    return subprocess.run([sys.executable, __file__, "--measure", str(out)], check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main())
