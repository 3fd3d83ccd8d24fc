"""Beam search guided by step scores, with search-and-learn's semantics (``sal/search/beam_search.py``).

Options: ``width`` (m; the beams kept per iteration are n / m), ``max_iterations`` (steps before the
last one, which runs to the end), ``lookahead`` (greedy steps rolled out beyond each new step before
it is ranked: Snell et al.'s lookahead search; 0 is plain beam search), ``agg`` (how a path's step
scores make the value it is ranked by).

Each iteration keeps n active beams: at the first, n samples of the first step; after, the n / m
best unfinished beams, repeated in order to n (each survivor gets m children when none has
finished). A beam that finishes (end of solution, max tokens, or an empty step) joins the
completed ones. At the last iteration every active beam runs to the end. The candidates are the n
completed beams of highest value (search-and-learn's ``sort_completed=True``; its default keeps the
first n to finish, which favours short solutions), repeated in order when fewer than n finished.

Differences from the anchor, each on purpose: the lookahead rollout is scored (search-and-learn's
beam search generates it and then scores only the step, so its lookahead changes nothing); scores
of a prefix seen before are reused, not recomputed; ties are broken by order, not by argsort.
What it does not do: deduplicate equal beams (search-and-learn's ``filter_duplicates``, off by default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bonbench.api.search.contract import PartialScorer, StepSampler
from bonbench.api.search.records import SearchProblem, SearchResult
from bonbench.plugins.strategies.engine import Search, TreeOptions, top


def refill(nodes: list[int], n: int) -> list[int]:
    """``nodes`` repeated in order up to ``n`` entries (search-and-learn's ``(active * repeats)[:n]``)."""
    return [nodes[i % len(nodes)] for i in range(n)]


@dataclass(frozen=True)
class BeamSearch(TreeOptions):
    """beam: keep the n/width best partial solutions each step, each expanded width times.

    Its semantics and how they differ from search-and-learn's: the module docstring."""

    name: ClassVar[str] = "beam"

    def search(self, problem: SearchProblem, sampler: StepSampler, scorer: PartialScorer, *,
               n: int, seed: int) -> SearchResult:
        self.check(n)
        tree = Search(problem, sampler, scorer, seed=seed, agg=self.agg)
        active: list[int | None] = [None] * n
        completed: list[int] = []
        for i in range(self.max_iterations):
            last = i == self.max_iterations - 1
            leaves = tree.grow(active, to_end=last, lookahead=0 if last else self.lookahead)
            completed += [leaf for leaf in leaves if tree.finished(leaf)]
            live = [leaf for leaf in leaves if not tree.finished(leaf)]
            if not live:
                break
            active = [node for node in refill(top(tree, live, n // self.width), n)]
        best = top(tree, completed, n)
        return tree.result(self, refill(best, n), n)
