"""The search tree every strategy grows: sampling, scoring with a cache, seeds, costs, the result.

``Search`` holds one problem's tree while a strategy decides. ``grow(parents)`` asks the step
sampler for one continuation of each parent (a parent may be given several times: that many
children), optionally looks ahead greedily, scores the new paths in one scorer call and returns
the new leaves. A continuation that runs to the end is cut on the delimiter into a chain of step
nodes (blank pieces dropped, as a PRM family's split drops them), so every candidate's steps are
what the scorer read.

Scores are cached per step list: a prefix the scorer has seen is never sent again (search-and-learn
re-scores every full prefix at every iteration); ``SearchCost.cached_scores`` counts the reuses.
A blank continuation (the model ended the solution, or emitted the delimiter at once) adds a node
whose step is no step: its path and scores are its parent's, and it is finished.

Seeds: the k-th continuation a search asks for is sampled from ``sample_seed(seed, problem_id, k)``,
so a search is deterministic given its seed and what the sampler and scorer answer, whatever the
batch. What it does not do: decide which nodes to expand (the strategies do) or store anything.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, ClassVar

from bonbench.api.sampler import sample_seed
from bonbench.api.search.contract import PartialScorer, StepSampler
from bonbench.api.search.records import (
    Candidate,
    Continuation,
    Finish,
    Node,
    Prefix,
    SearchCost,
    SearchProblem,
    SearchResult,
)
from bonbench.api.steps import EMPTY_SCORE, Aggregation, aggregate
from bonbench.core.errors import BonbenchError


@dataclass
class _Draft:
    """A node while the search runs (frozen into ``records.Node`` at the end)."""

    parent: int | None
    depth: int
    step: str
    path: tuple[str, ...]  # the non-empty steps from the root to here
    finish: Finish
    tokens: int
    scores: tuple[float, ...] = ()
    value: float = EMPTY_SCORE


def option_pairs(strategy: Any) -> tuple[tuple[str, object], ...]:
    """A dataclass strategy's options as sorted (name, value) pairs."""
    return tuple(sorted(asdict(strategy).items()))


def check_positive(**values: int) -> None:
    """ValueError naming the first option that is not a positive integer."""
    for key, value in values.items():
        if value < 1:
            raise ValueError(f"option {key}={value} must be at least 1")


def check_multiple(strategy: str, n: int, width: int) -> None:
    """The one-line error when the budget ``n`` is not a multiple of ``width`` (beam search, DVTS)."""
    if n < width or n % width:
        raise BonbenchError(f"strategy {strategy!r} needs n a multiple of its width {width} (got n={n}): "
                            f"pass n={max(width, n - n % width)} or width= a divisor of {n}")


@dataclass(frozen=True)
class TreeOptions:
    """The options beam search and DVTS share, checked once: ``width`` (children per kept node; n must
    be a multiple of it), ``max_iterations``, ``lookahead`` (greedy steps rolled out before ranking)
    and ``agg`` (how a path's step scores make its value). A strategy adds its ``name`` and ``search``."""

    width: int = 4
    max_iterations: int = 40
    lookahead: int = 0
    agg: Aggregation = "last"
    name: ClassVar[str] = ""

    def __post_init__(self) -> None:
        check_positive(width=self.width, max_iterations=self.max_iterations)
        if self.lookahead < 0:
            raise ValueError(f"option lookahead={self.lookahead} must be 0 or more")

    def check(self, n: int) -> None:
        check_multiple(self.name, n, self.width)

    def options(self) -> tuple[tuple[str, object], ...]:
        return option_pairs(self)


def top(search: Search, nodes: Sequence[int], k: int) -> list[int]:
    """The ``k`` nodes of highest value; ties go to the earlier node (so the choice is deterministic)."""
    order = sorted(range(len(nodes)), key=lambda i: (-search.value(nodes[i]), i))
    return [nodes[i] for i in order[:k]]


class Search:
    """One problem's search tree (module docstring)."""

    def __init__(self, problem: SearchProblem, sampler: StepSampler, scorer: PartialScorer, *, seed: int,
                 agg: str) -> None:
        self.problem, self.sampler, self.scorer, self.seed, self.agg = problem, sampler, scorer, seed, agg
        self.nodes: list[_Draft] = []
        self.draws = 0
        self.cache: dict[tuple[str, ...], tuple[float, ...]] = {(): ()}
        self.cost: dict[str, Any] = {k: v for k, v in asdict(SearchCost()).items()}
        self.started = time.perf_counter()

    # ------------------------------------------------------------------ reading the tree

    def path(self, node: int | None) -> tuple[str, ...]:
        return () if node is None else self.nodes[node].path

    def value(self, node: int) -> float:
        return self.nodes[node].value

    def finished(self, node: int | None) -> bool:
        """Whether ``node`` ends its solution (at the end, at max tokens, or with no step)."""
        if node is None:
            return False
        draft = self.nodes[node]
        return draft.finish != "step" or not draft.step.strip()

    def next_seed(self) -> int:
        self.draws += 1
        return sample_seed(self.seed, self.problem.problem_id, self.draws - 1)

    # ------------------------------------------------------------------ growing it

    def grow(self, parents: Sequence[int | None], *, to_end: bool = False, lookahead: int = 0) -> list[int]:
        """One new leaf per entry of ``parents``, scored (with ``lookahead`` greedy steps beyond it)."""
        prompt = self.problem.prompt
        conts = self._sample([Prefix(prompt, self.path(p), self.next_seed(), to_end=to_end) for p in parents])
        chains = [self._add(p, c, to_end) for p, c in zip(parents, conts, strict=True)]
        leaves = [chain[-1] for chain in chains]
        ahead = self._look_ahead(leaves, lookahead) if lookahead else [()] * len(leaves)
        scores = self._score([self.path(leaf) + extra for leaf, extra in zip(leaves, ahead, strict=True)])
        for chain, extra, got in zip(chains, ahead, scores, strict=True):
            for node in chain:
                draft = self.nodes[node]
                draft.scores = got[:len(draft.path)]
                draft.value = aggregate(draft.scores, self.agg)
            if extra:  # the leaf is ranked by where its greedy rollout leads (Snell et al.'s lookahead search)
                self.nodes[chain[-1]].value = aggregate(got, self.agg)
        return leaves

    def _add(self, parent: int | None, cont: Continuation, to_end: bool) -> list[int]:
        pieces = [p for p in cont.text.split(self.sampler.delimiter) if p.strip()] if to_end else [cont.text]
        pieces = pieces or [cont.text]
        chain: list[int] = []
        for i, piece in enumerate(pieces):
            last = i == len(pieces) - 1
            base = chain[-1] if chain else parent
            depth = 1 if base is None else self.nodes[base].depth + 1
            path = self.path(base) + ((piece,) if piece.strip() else ())
            self.nodes.append(_Draft(base, depth, piece, path, cont.finish if last else "step",
                                     cont.tokens if last else 0))
            chain.append(len(self.nodes) - 1)
        return chain

    def _look_ahead(self, leaves: Sequence[int], steps: int) -> list[tuple[str, ...]]:
        """The greedy steps beyond each unfinished leaf (at most ``steps``; none for a finished one)."""
        extra: list[tuple[str, ...]] = [()] * len(leaves)
        active = [i for i, leaf in enumerate(leaves) if not self.finished(leaf)]
        for _ in range(steps):
            if not active:
                break
            prefixes = [Prefix(self.problem.prompt, self.path(leaves[i]) + extra[i], self.next_seed(), greedy=True)
                        for i in active]
            still = []
            for i, cont in zip(active, self._sample(prefixes), strict=True):
                if cont.text.strip():
                    extra[i] = extra[i] + (cont.text,)
                if cont.text.strip() and cont.finish == "step":
                    still.append(i)
            active = still
        return extra

    def _sample(self, prefixes: Sequence[Prefix]) -> list[Continuation]:
        began = time.perf_counter()
        conts = self.sampler.continue_prefixes(prefixes)
        self.cost["model_s"] += time.perf_counter() - began
        if len(conts) != len(prefixes):
            raise BonbenchError(f"the step sampler returned {len(conts)} continuations for {len(prefixes)} prefixes")
        self.cost["sampler_calls"] += 1
        self.cost["continuations"] += len(conts)
        self.cost["generated_tokens"] += sum(c.tokens for c in conts)
        self.cost["prompt_tokens"] += sum(c.prompt_tokens for c in conts)
        self.cost["cached_prompt_tokens"] += sum(c.cached_tokens for c in conts)
        return conts

    def _score(self, lists: Sequence[tuple[str, ...]]) -> list[tuple[float, ...]]:
        """The step scores of each list: from the cache, else from one scorer call for the new ones."""
        new = list(dict.fromkeys(s for s in lists if s not in self.cache))
        self.cost["cached_scores"] += sum(1 for s in lists if s) - len(new)  # asked for again, in this call or before
        if new:
            question = self.problem.question
            began = time.perf_counter()
            got = self.scorer.score_steps([question] * len(new), new)
            self.cost["model_s"] += time.perf_counter() - began
            if len(got) != len(new):
                raise BonbenchError(f"the scorer returned {len(got)} results for {len(new)} step lists")
            for steps, result in zip(new, got, strict=True):
                if len(result.scores) != len(steps):
                    raise BonbenchError(f"the scorer returned {len(result.scores)} step scores for {len(steps)} steps: "
                                        "it must score every step of a partial solution")
                self.cache[steps] = tuple(float(v) for v in result.scores)
                self.cost["verifier_tokens"] += result.tokens
                self.cost["verifier_calls"] += result.calls
            self.cost["scored"] += len(new)
        return [self.cache[s] for s in lists]

    # ------------------------------------------------------------------ the result

    def result(self, strategy: Any, leaves: Sequence[int], n: int) -> SearchResult:
        """The result whose final candidates are ``leaves`` (in order; a leaf may repeat)."""
        kept: set[int] = set()
        for leaf in leaves:
            node: int | None = leaf
            while node is not None and node not in kept:
                kept.add(node)
                node = self.nodes[node].parent
        tree = tuple(Node(d.parent, d.depth, d.step, d.scores[-1] if d.scores else EMPTY_SCORE, d.value, d.finish,
                          d.tokens, i in kept) for i, d in enumerate(self.nodes))
        delimiter = self.sampler.delimiter
        candidates = tuple(Candidate(leaf, delimiter.join(self.path(leaf)), self.path(leaf), self.nodes[leaf].scores,
                                     self.value(leaf), self.nodes[leaf].finish) for leaf in leaves)
        cost = replace(SearchCost(**self.cost), wall_s=time.perf_counter() - self.started)
        return SearchResult(self.problem.problem_id, strategy.name, option_pairs(strategy), n, self.seed, candidates,
                            tree, cost)
