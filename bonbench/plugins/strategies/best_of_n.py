"""Best-of-N as a search strategy: N independent solutions, each sampled to the end in one continuation.

The trivial strategy, so that best-of-N and the searches are run, scored and costed alike: every
candidate is cut into steps on the delimiter and scored step by step by the same scorer, and its
value is the aggregation ``agg`` of its step scores (search-and-learn's ``best_of_n``, which
scores the full completions with its PRM). Nothing is pruned. What it does not do: pick the best
(the selection rules and metrics do that on the N candidates).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bonbench.api.search.contract import PartialScorer, StepSampler
from bonbench.api.search.records import SearchProblem, SearchResult
from bonbench.api.steps import Aggregation
from bonbench.plugins.strategies.engine import Search, option_pairs


@dataclass(frozen=True)
class BestOfN:
    """best_of_n: N independent solutions, each sampled to the end and scored step by step.

    ``agg``: how a candidate's step scores make its value."""

    agg: Aggregation = "last"
    name: ClassVar[str] = "best_of_n"
    # its candidates are independent draws: a run may report pass@k / bon@k / maj@k for k < n (bonbench.run.rules)
    exchangeable: ClassVar[bool] = True

    def check(self, n: int) -> None:
        """Any n >= 1 (the registry's callers check n's range)."""

    def options(self) -> tuple[tuple[str, object], ...]:
        return option_pairs(self)

    def search(self, problem: SearchProblem, sampler: StepSampler, scorer: PartialScorer, *,
               n: int, seed: int) -> SearchResult:
        tree = Search(problem, sampler, scorer, seed=seed, agg=self.agg)
        leaves = tree.grow([None] * n, to_end=True)
        return tree.result(self, leaves, n)
