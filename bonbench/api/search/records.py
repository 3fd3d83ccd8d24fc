"""The frozen records of a search: what a step sampler is asked and answers, what a partial-solution
scorer returns, the search tree's nodes, the N final candidates, the compute spent, and the result.

A solution is a list of steps; its text is the steps joined by the step sampler's delimiter
(``"\\n\\n"`` for MATH-style solutions, the split of the PRM families). Node ids are the node's
index in ``SearchResult.tree``; a node's ``parent`` is None at the first step (the prompt is the root
and is not a node).

What it does not do: sample, score or decide anything (``contract`` names who does), or store rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Finish = Literal["step", "end", "length"]  # stopped at the step delimiter, at the end of the solution, at max tokens


@dataclass(frozen=True)
class SearchProblem:
    """One problem as a search sees it: the prompt the policy continues and the question the scorer reads."""

    problem_id: str
    prompt: str
    question: str


@dataclass(frozen=True)
class Prefix:
    """One continuation asked of a step sampler: continue ``prompt`` followed by ``steps``.

    ``seed`` is this continuation's own random stream (a sample does not depend on its batch);
    ``to_end``: continue to the end of the solution, ignoring the delimiter; ``greedy``: temperature 0
    (the lookahead rollouts of Snell et al. and search-and-learn).
    """

    prompt: str
    steps: tuple[str, ...]
    seed: int
    to_end: bool = False
    greedy: bool = False


@dataclass(frozen=True)
class Continuation:
    """A step sampler's answer to one ``Prefix``: the text it generated (without the delimiter it
    stopped at), why it stopped, the tokens it generated and the tokens it read (the prompt and the
    prefix: what a prefix cache saves recomputing, counted whether or not the engine caches).
    ``cached_tokens``: how many of ``prompt_tokens`` the engine served from its prefix cache instead
    of recomputing them (0 for a sampler without one, or that does not say)."""

    text: str
    finish: Finish
    tokens: int
    prompt_tokens: int = 0
    cached_tokens: int = 0


def cut_at_task_stop(prefix: Prefix, continuation: Continuation, stops: tuple[str, ...],
                     delimiter: str) -> Continuation:
    """``continuation`` cut at the first of the task's ``stops`` (its finish then ``"end"``), counting
    the delimiter the prefix's last step ended with: a few-shot base model's solution ends where the
    next exemplar would start (``"\n\nProblem:"``), which a continuation stopped at the delimiter
    only shows as a step starting ``"Problem:"``. Every step sampler applies it, so a search ends its
    solutions where the task's ``bonbench run`` would."""
    lead = delimiter if prefix.steps else ""
    hits = [i for i in ((lead + continuation.text).find(s) for s in stops if s) if i >= 0]
    if not hits:
        return continuation
    return Continuation(continuation.text[:max(0, min(hits) - len(lead))], "end", continuation.tokens,
                        continuation.prompt_tokens, continuation.cached_tokens)


@dataclass(frozen=True)
class StepScores:
    """A partial-solution scorer's answer for one list of steps: one score per step, the tokens
    the verifier read, and its forward passes or calls."""

    scores: tuple[float, ...]
    tokens: int = 0
    calls: int = 0


@dataclass(frozen=True)
class Node:
    """One step of the search tree.

    ``score``: the scorer's score of this step; ``value``: what the strategy ranked the node by (the
    aggregation of the path's step scores, with the lookahead steps' when it looked ahead);
    ``tokens``: generated tokens of the continuation that ended at this node (0 for the earlier
    steps of a continuation that ran to the end over several steps); ``kept``: on the path of one of
    the final candidates (else a branch the search pruned).
    """

    parent: int | None
    depth: int
    step: str
    score: float
    value: float
    finish: Finish
    tokens: int
    kept: bool


@dataclass(frozen=True)
class Candidate:
    """One of the N final solutions: the leaf it ends at, its steps, their scores and its value."""

    leaf: int
    text: str
    steps: tuple[str, ...]
    step_scores: tuple[float, ...]
    value: float
    finish: Finish


@dataclass(frozen=True)
class SearchCost:
    """What one problem's search spent (the compute ledger of a search).

    ``prompt_tokens``: tokens the sampler read over all its continuations (prompt and prefix, each
    time: the recomputation a prefix cache avoids); ``cached_prompt_tokens``: how many of them the
    engine served from its prefix cache (``prompt_tokens - cached_prompt_tokens`` were recomputed);
    ``cached_scores``: step lists whose scores the search reused instead of asking the scorer again;
    ``model_s``: seconds inside the sampler and the scorer; ``wall_s``: the whole search; ``overhead_s``:
    the strategy's own time.
    """

    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    generated_tokens: int = 0
    verifier_tokens: int = 0
    verifier_calls: int = 0
    sampler_calls: int = 0
    continuations: int = 0
    scored: int = 0
    cached_scores: int = 0
    model_s: float = 0.0
    wall_s: float = 0.0

    @property
    def overhead_s(self) -> float:
        return max(0.0, self.wall_s - self.model_s)


@dataclass(frozen=True)
class SearchResult:
    """One problem's search: its N final candidates, the tree they came from, and its cost.

    ``options``: the strategy's options as (name, value) pairs, sorted (with ``strategy`` and ``n``,
    what tells two searches apart).
    """

    problem_id: str
    strategy: str
    options: tuple[tuple[str, object], ...]
    n: int
    seed: int
    candidates: tuple[Candidate, ...]
    tree: tuple[Node, ...]
    cost: SearchCost
