"""Scripted step samplers and step scorers for the search tests: trees whose every path is known.

``TreeSampler`` walks a tree given by a branching per depth: the child texts of a prefix are its
path label plus a digit ("0", "01", "012", ...), and a node at ``depth`` is the end of its solution.
The j-th continuation asked for one prefix is its child j mod branching (so m copies of one parent
get its m children, in order), a greedy one is child 0, and a ``to_end`` one walks down the same
way until the end. ``TableScorer`` scores each step from a function of its path and records every
step list it was asked, so a test sees what the search re-scored. ``SeededSampler`` draws the child
from the continuation's seed instead: a search's determinism under its seed is tested with it.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Callable, Sequence

from bonbench.api.search.records import Continuation, Prefix, StepScores

DELIMITER = "\n\n"


class TreeSampler:
    """The scripted tree sampler (module docstring)."""

    delimiter = DELIMITER

    def __init__(self, branching: Sequence[int], *, delay_s: float = 0.0) -> None:
        self.branching, self.delay_s = list(branching), delay_s
        self.asked: defaultdict[tuple[str, ...], int] = defaultdict(int)
        self.calls = 0

    def depth(self) -> int:
        return len(self.branching)

    def choose(self, steps: tuple[str, ...], prefix: Prefix) -> int:
        if prefix.greedy:
            return 0
        j = self.asked[steps]
        self.asked[steps] += 1
        return j % self.branching[len(steps)]

    def child(self, steps: tuple[str, ...], prefix: Prefix) -> str:
        return (steps[-1] if steps else "") + str(self.choose(steps, prefix))

    def continue_prefixes(self, prefixes: Sequence[Prefix]) -> list[Continuation]:
        self.calls += 1
        if self.delay_s:
            time.sleep(self.delay_s)  # a model call's time, for the overhead measurement
        out = []
        for prefix in prefixes:
            steps, texts = prefix.steps, []
            while True:
                step = self.child(steps, prefix)
                steps, texts = steps + (step,), texts + [step]
                end = len(steps) == self.depth()
                if end or not prefix.to_end:
                    break
            out.append(Continuation(DELIMITER.join(texts), "end" if end else "step", tokens=len(texts),
                                    prompt_tokens=1 + len(prefix.steps)))
        return out


class SeededSampler(TreeSampler):
    """The tree sampler with the child drawn from each continuation's seed."""

    def choose(self, steps: tuple[str, ...], prefix: Prefix) -> int:
        return 0 if prefix.greedy else random.Random(prefix.seed * 31 + len(steps)).randrange(self.branching[len(steps)])


class TableScorer:
    """Scores step ``i`` of a list as ``score(path[:i + 1])`` (module docstring)."""

    def __init__(self, score: Callable[[tuple[str, ...]], float], *, delay_s: float = 0.0) -> None:
        self.score, self.delay_s = score, delay_s
        self.asked: list[tuple[str, ...]] = []
        self.calls = 0

    def score_steps(self, questions: Sequence[str], steps: Sequence[Sequence[str]]) -> list[StepScores]:
        self.calls += 1
        if self.delay_s:
            time.sleep(self.delay_s)
        out = []
        for s in steps:
            path = tuple(s)
            self.asked.append(path)
            out.append(StepScores(tuple(self.score(path[:i + 1]) for i in range(len(path))), tokens=len(path), calls=1))
        return out


def hashed_score(path: tuple[str, ...], salt: str = "") -> float:
    """A fixed pseudo-random score in (0, 1) for a path (the same in every process)."""
    return random.Random(f"{salt}/{'/'.join(path)}").uniform(0.02, 0.98)
