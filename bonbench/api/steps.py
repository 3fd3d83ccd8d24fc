"""Per-step scores of a solution and the aggregations that make one score of them.

A process reward model gives one score per step (``records.Score.steps``); the ``prm:`` verifier
and the search strategies both turn such a list into one number with ``aggregate``, so a
strategy's decisions and the verifier's stored score read the steps by the same rule:

- ``min``: the weakest step (search-and-learn's and Snell et al.'s choice for PRM selection);
- ``prod``: the product, P(every step right) when the steps are independent;
- ``last``: the last step's score (search-and-learn's default, which its scoring also hard-codes);
- ``mean``: the average step.

A solution with no step scores ``EMPTY_SCORE``. This module splits no text and runs no model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from bonbench.core.errors import BonbenchError

Aggregation = Literal["min", "prod", "last", "mean"]

EMPTY_SCORE = 0.0  # a solution with no step: the floor of a probability, so it loses to any scored one

AGGREGATIONS: Mapping[str, Callable[[Sequence[float]], float]] = {
    "min": min,
    "prod": math.prod,
    "last": lambda steps: steps[-1],
    "mean": lambda steps: math.fsum(steps) / len(steps),
}


def aggregate(steps: Sequence[float], how: str) -> float:
    """One score of per-step scores (``EMPTY_SCORE`` for none); ``how`` is a key of ``AGGREGATIONS``."""
    if how not in AGGREGATIONS:
        raise BonbenchError(f"unknown step aggregation {how!r}: use agg={'|'.join(AGGREGATIONS)}")
    return float(AGGREGATIONS[how](steps)) if steps else EMPTY_SCORE
