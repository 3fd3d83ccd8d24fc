"""Diverse verifier tree search (DVTS), with search-and-learn's semantics (``sal/search/diverse_verifier_tree_search.py``).

The budget n is split into n / width independent subtrees. At each iteration every unfinished
subtree expands its current node ``width`` times, scores the children (after ``lookahead`` greedy
steps), and moves to the best one; the others are pruned. A subtree stops when its chosen child
finishes (end of solution, max tokens, or an empty step); at the last of ``max_iterations`` the
children run to the end. No subtree ever ranks against another, which is what keeps them diverse.

The N = n candidates are, for each subtree in order, the ``width`` children of its last
expansion: the chosen one and its siblings, as search-and-learn returns them (a sibling may be an
unfinished partial solution; its ``finish`` says so). Options: ``width``, ``max_iterations``,
``lookahead``, ``agg`` as in beam search. Left out on purpose: search-and-learn also stops a
subtree whose text contains ``boxed{``, a benchmark's answer format that a strategy does not know.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bonbench.api.search.contract import PartialScorer, StepSampler
from bonbench.api.search.records import SearchProblem, SearchResult
from bonbench.plugins.strategies.engine import Search, TreeOptions, top


@dataclass(frozen=True)
class DVTS(TreeOptions):
    """dvts: n/width independent subtrees, each greedily following its best of width children.

    Its semantics and how they differ from search-and-learn's: the module docstring."""

    name: ClassVar[str] = "dvts"

    def search(self, problem: SearchProblem, sampler: StepSampler, scorer: PartialScorer, *,
               n: int, seed: int) -> SearchResult:
        self.check(n)
        tree = Search(problem, sampler, scorer, seed=seed, agg=self.agg)
        subtrees = n // self.width
        current: list[int | None] = [None] * subtrees
        children: list[list[int]] = [[] for _ in range(subtrees)]
        for i in range(self.max_iterations):
            last = i == self.max_iterations - 1
            open_ = [s for s in range(subtrees) if not children[s] or not tree.finished(current[s])]
            if not open_:
                break
            parents = [current[s] for s in open_ for _ in range(self.width)]
            leaves = tree.grow(parents, to_end=last, lookahead=0 if last else self.lookahead)
            for k, s in enumerate(open_):
                children[s] = leaves[k * self.width:(k + 1) * self.width]
                current[s] = top(tree, children[s], 1)[0]
        return tree.result(self, [leaf for kids in children for leaf in kids], n)
