"""The search strategies' own overhead: everything but the model and verifier calls, on scripted trees.

Each strategy runs at ``--n`` on the scripted tree sampler and scorer of the tests
(``tests/search_scripts.py``), whose calls cost nothing but ``--model-ms`` of sleep each, a stand-in for
a model call. The search records the seconds spent inside the sampler and the scorer
(``SearchCost.model_s``); the rest of its wall time is the strategy's overhead (``overhead_s``): the
tree, the score cache, the ranking and resampling. Prints, per strategy: nodes, calls, overhead per
node in microseconds, and overhead as a share of the search's time at the given model cost (the
issue's limit: < 5 %). With ``--model-ms 0`` the share is meaningless (there is no model); the
microseconds per node are the figure to compare.

Usage: ``python benchmarks/bench_search.py [--n 16 --depth 8 --model-ms 5 --repeat 5]``. It measures;
it asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from search_scripts import SeededSampler, TableScorer, hashed_score

from bonbench.api.search.contract import make_strategy
from bonbench.api.search.records import SearchProblem

STRATEGIES = {"best_of_n": {}, "beam": {"width": 4}, "dvts": {"width": 4}, "particle_filtering": {}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--model-ms", type=float, default=5.0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    problem = SearchProblem("bench", "Solve it.", "Solve it.")
    delay = args.model_ms / 1000
    print(f"n={args.n} depth={args.depth} model call={args.model_ms} ms (sampler and scorer each)")
    print(f"{'strategy':<20}{'nodes':>7}{'calls':>7}{'overhead/node us':>18}{'overhead share':>16}")
    for name, options in STRATEGIES.items():
        per_node, shares, nodes, calls = [], [], 0, 0
        for seed in range(args.repeat):
            sampler = SeededSampler([args.n] + [4] * (args.depth - 1), delay_s=delay)
            scorer = TableScorer(lambda p: hashed_score(p, "bench"), delay_s=delay)
            got = make_strategy(name, **options).search(problem, sampler, scorer, n=args.n, seed=seed)
            nodes, calls = len(got.tree), sampler.calls + scorer.calls
            per_node.append(got.cost.overhead_s / nodes * 1e6)
            shares.append(got.cost.overhead_s / got.cost.wall_s)
        print(f"{name:<20}{nodes:>7}{calls:>7}{statistics.median(per_node):>18.1f}{statistics.median(shares):>15.2%}")


if __name__ == "__main__":
    main()
