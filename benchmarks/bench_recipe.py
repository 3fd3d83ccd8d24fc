"""Benchmark ``bonbench recipe`` (issue 35): 20 runs of 5,000 problems x 64 samples in under 30 s.

Writes the synthetic runs (``bonbench.apps.analysis.synthetic``: the store's layout, with token
counts, answers and a verifier with scores in [0, 1], and the ``columns.npz`` a scoring writes)
into a temporary folder, then times ``build_recipe`` over all of them for three budgets: cold
(nothing kept: each run's columns read and its estimators computed), warm (the tables
``recipe_table`` keeps), and cold again without the columns (every run's rows read: the baseline,
as for an imported or old run; ``--no-baseline`` skips it), and checks that both cold recipes are
the same JSON. The writing is not timed. ``--rules`` as the command's (default maj,bon; wmaj and
bom are opt-in). Prints each time, wall and CPU (on a shared machine the CPU time is the one that
does not depend on the other users), the load average, the ratios to the 30 s target and to the
baseline and, with ``--profile`` (which slows the first cold run), where the time went from
cProfile's cumulative times. ``--problems``/``--runs``/``--n`` shrink it for a quick look.
Not a test: it prints figures; run it by hand (`python benchmarks/bench_recipe.py`).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import tempfile
import time
from pathlib import Path

import numpy as np

from bonbench.apps.analysis.recipe import Recipe, build_recipe
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


def timed(root: Path, cache: Path, rules: tuple[str, ...], prof: cProfile.Profile | None = None
          ) -> tuple[Recipe, float, float]:
    """The recipe of the runs under ``root`` with the tables kept in ``cache``, and its wall and CPU seconds."""
    os.environ["BONBENCH_CACHE"] = str(cache)
    t0, c0 = time.perf_counter(), time.process_time()
    if prof:
        prof.enable()
    recipe = build_recipe([root], [400.0, 1500.0, 6000.0], n_boot=1000, rules=rules)
    if prof:
        prof.disable()
    return recipe, time.perf_counter() - t0, time.process_time() - c0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--problems", type=int, default=5000)
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--rules", default="maj,bon", help="the recipe's --rules (default maj,bon, as the command's)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the cold run that reads every row")
    parser.add_argument("--profile", action="store_true", help="print the 15 costliest calls of the cold run")
    args = parser.parse_args()
    rules = tuple(args.rules.split(","))
    prof = cProfile.Profile() if args.profile else None
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "results"
        t0 = time.perf_counter()
        write_runs(root, args.runs, args.problems, args.n)
        print(f"wrote {args.runs} runs of {args.problems} problems x {args.n} samples in "
              f"{time.perf_counter() - t0:.1f} s (not timed)")
        recipe, took, took_cpu = timed(root, Path(tmp) / "cache", rules, prof)  # cold: no table kept yet
        _, warm, warm_cpu = timed(root, Path(tmp) / "cache", rules)  # warm: the kept tables
        times = [("cold (columns read, estimators computed)", took, took_cpu), ("warm (tables kept)", warm, warm_cpu)]
        if not args.no_baseline:
            for f in root.rglob(COLUMNS):
                f.unlink()
            rows, base, base_cpu = timed(root, Path(tmp) / "cache-rows", rules)  # cold, every row read
            times.append(("cold without columns (rows read: the baseline)", base, base_cpu))
            same = json.dumps(recipe_json(rows)) == json.dumps(recipe_json(recipe))
            print(f"the recipe JSON with and without the columns: {'identical' if same else 'DIFFERENT'}")
    scale = 20 * 5000 * 64 / (args.runs * args.problems * args.n)
    size = "" if scale == 1 else f"; {scale:g} times smaller than the target's size"
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    for what, secs, cpu in times:
        print(f"recipe {what}: {len(recipe.strategies)} strategies, {len(recipe.choices)} choices in {secs:.2f} s "
              f"wall, {cpu:.2f} s CPU ({secs / TARGET_S:.3f} of the {TARGET_S:.0f} s target{size})")
    if not args.no_baseline:
        print(f"cold with columns / cold reading rows: {took / base:.3f} wall, {took_cpu / base_cpu:.3f} CPU "
              f"({base / took:.1f} times faster)")
    for c in recipe.choices:
        print(f"  budget {c.budget:g}: {c.best.label} {c.best.value:.3f} at {c.best.cost:.0f} tokens")
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(15)


if __name__ == "__main__":
    main()
