"""Particle filtering guided by step scores, with its_hub's semantics (``its_hub/algorithms/particle_gibbs.py``,
``ParticleFiltering``: particle Gibbs with one iteration and no reference particle).

N particles start at the prompt. Each iteration, every particle that has not finished takes one
step (the last of ``max_iterations`` runs to the end) and is scored; then all N particles,
finished or not, are resampled with replacement from the softmax of their log weights, each
particle's log weight being the logit of its aggregated step score (``agg``) divided by
``temperature``. A finished particle drawn again stays finished; one never drawn is pruned. The
search ends when every particle has finished, and its N candidates are the N particles, in order
(a leaf may appear several times: that is what resampling does).

``temperature`` = 1 is its_hub's weighting; larger flattens the draw towards uniform, smaller
sharpens it towards the best particle. The draws come from a NumPy generator seeded by the
search's seed and the problem, so a search is deterministic under its seed. What it does not do:
particle Gibbs' reference particles or ancestor sampling (its_hub's ``num_iterations`` > 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from bonbench.api.sampler import sample_seed
from bonbench.api.search.contract import PartialScorer, StepSampler
from bonbench.api.search.records import SearchProblem, SearchResult
from bonbench.api.steps import Aggregation
from bonbench.plugins.strategies.engine import Search, check_positive, option_pairs

if TYPE_CHECKING:  # numpy loads when a search runs, not when the strategy is looked up
    import numpy as np

CLIP = 1e-7  # its_hub clips scores to [1e-7, 1 - 1e-7] before the logit, so a score of 0 or 1 stays finite


def resampling_probabilities(values: Sequence[float], temperature: float) -> list[float]:
    """P(draw particle i): the softmax of logit(clip(value_i)) / temperature (module docstring)."""
    logits = []
    for v in values:
        p = min(max(float(v), CLIP), 1.0 - CLIP)
        logits.append(math.log(p / (1.0 - p)) / temperature)
    top = max(logits)
    weights = [math.exp(x - top) for x in logits]
    total = math.fsum(weights)
    return [w / total for w in weights]


def resample(values: Sequence[float], temperature: float, k: int, rng: np.random.Generator) -> list[int]:
    """``k`` indices drawn with replacement with ``resampling_probabilities``."""
    probs = resampling_probabilities(values, temperature)
    return [int(i) for i in rng.choice(len(probs), size=k, replace=True, p=probs)]


@dataclass(frozen=True)
class ParticleFiltering:
    """particle_filtering: N particles stepped together and resampled on their step scores.

    Its semantics and how they differ from its_hub's: the module docstring."""

    temperature: float = 1.0
    max_iterations: int = 40
    agg: Aggregation = "last"
    name: ClassVar[str] = "particle_filtering"

    def __post_init__(self) -> None:
        check_positive(max_iterations=self.max_iterations)
        if not self.temperature > 0:
            raise ValueError(f"option temperature={self.temperature} must be above 0")

    def check(self, n: int) -> None:
        """Any n >= 1."""

    def options(self) -> tuple[tuple[str, object], ...]:
        return option_pairs(self)

    def search(self, problem: SearchProblem, sampler: StepSampler, scorer: PartialScorer, *,
               n: int, seed: int) -> SearchResult:
        import numpy as np

        tree = Search(problem, sampler, scorer, seed=seed, agg=self.agg)
        # one stream for the draws, apart from the continuations' (their index is never negative)
        rng = np.random.default_rng(sample_seed(seed, problem.problem_id, -1))
        particles: list[int | None] = [None] * n
        for i in range(self.max_iterations):
            live = [j for j, p in enumerate(particles) if not tree.finished(p)]
            if not live:
                break
            leaves = tree.grow([particles[j] for j in live], to_end=i == self.max_iterations - 1)
            for j, leaf in zip(live, leaves, strict=True):
                particles[j] = leaf
            grown = [p for p in particles if p is not None]
            drawn = resample([tree.value(p) for p in grown], self.temperature, n, rng)
            particles = [grown[d] for d in drawn]
        return tree.result(self, [p for p in particles if p is not None], n)
