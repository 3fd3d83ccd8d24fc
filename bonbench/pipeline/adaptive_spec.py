"""The value of ``bonbench run --adaptive pilot=P,budget=B`` (docs/adaptive.md) and its parser.

Apart from ``bonbench.pipeline.adaptive`` (the decision on disk), so that ``bonbench run --help``,
which reads this flag, loads no numpy. It checks only the flag's shape; what a pilot and budget
must satisfy against the metrics and ``--n`` is ``bonbench.run.adaptive.check``.
"""

from __future__ import annotations

from dataclasses import dataclass

from bonbench.core.errors import BonbenchError


@dataclass(frozen=True)
class AdaptiveSpec:
    """``--adaptive pilot=P,budget=B``: P pilot samples for every problem, B the mean samples per
    problem in all (the pilot included; a target, the spend is recorded)."""

    pilot: int
    budget: int


def parse_adaptive(text: str) -> AdaptiveSpec:
    """``"pilot=4,budget=8"`` -> ``AdaptiveSpec(4, 8)``; anything else is a one-line BonbenchError."""
    fix = (f"--adaptive takes pilot=P,budget=B (whole numbers >= 1; B is the mean samples per problem, the pilot "
           f"included), got {text!r}")
    pairs = [part.split("=", 1) for part in str(text).split(",")]
    if any(len(p) != 2 for p in pairs):
        raise BonbenchError(fix)
    given = {k.strip(): v.strip() for k, v in pairs}
    if set(given) != {"pilot", "budget"} or len(pairs) != 2 or not all(v.isdigit() and int(v) >= 1 for v in given.values()):
        raise BonbenchError(fix)
    return AdaptiveSpec(int(given["pilot"]), int(given["budget"]))
