"""The value of ``bonbench run --adaptive pilot=P,budget=B`` or
``pilot=P,halfwidth=H[,confidence=Q][,fallback=cap|stop]``
(docs/adaptive.md) and its parser.

Apart from ``bonbench.pipeline.adaptive`` (the decision on disk), so that ``bonbench run --help``,
which reads this flag, loads no numpy. It checks only the flag's shape; what a pilot, budget or
half-width must satisfy against the metrics and ``--n`` is ``bonbench.run.adaptive.check``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bonbench.core.errors import BonbenchError


@dataclass(frozen=True)
class AdaptiveSpec:
    """``--adaptive``: P pilot samples for every problem, then a second stage sized for one target:
    ``budget`` B, the mean samples per problem in all (the pilot included; a target, the spend is
    recorded), or ``halfwidth`` H, the 95% CI half-width on the first requested metric (a pass@k,
    maj@k or bon@k).
    ``fallback``: what a target the pilots put out of reach does: ``cap`` (the default) warns and goes
    on up to the cap, so every run is finished and its estimate exactly unbiased; ``stop`` stops before
    round two with an error (the runs that go on are then a selection: docs/adaptive.md).
    ``confidence``: the probability with which the run should meet H (0.5, the default, aims at the
    expected half-width; above it the prediction carries a margin)."""

    pilot: int
    budget: int | None = None
    halfwidth: float | None = None
    fallback: str = "cap"
    confidence: float = 0.5


def _half_width(text: str) -> float | None:
    """A number strictly between 0 and 1 (a half-width, a probability), else None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and 0 < value < 1 else None


def parse_adaptive(text: str) -> AdaptiveSpec:
    """``"pilot=4,budget=8"`` -> ``AdaptiveSpec(4, 8)``; ``"pilot=4,halfwidth=0.01"`` ->
    ``AdaptiveSpec(4, halfwidth=0.01)``; anything else is a one-line BonbenchError."""
    fix = (f"--adaptive takes pilot=P,budget=B or pilot=P,halfwidth=H[,confidence=Q][,fallback=cap|stop] (P and B whole "
           "numbers >= 1, B the mean samples per problem, the pilot included; H a 95% CI half-width between 0 and 1; Q the "
           f"probability of meeting H, from 0.5 (the default) to below 1), got {text!r}")
    pairs = [part.split("=", 1) for part in str(text).split(",")]
    if any(len(p) != 2 for p in pairs):
        raise BonbenchError(fix)
    given = {k.strip(): v.strip() for k, v in pairs}
    if len(given) != len(pairs) or not given.get("pilot", "").isdigit() or int(given["pilot"]) < 1:
        raise BonbenchError(fix)
    pilot = int(given["pilot"])
    if set(given) == {"pilot", "budget"} and given["budget"].isdigit() and int(given["budget"]) >= 1:
        return AdaptiveSpec(pilot, budget=int(given["budget"]))
    halfwidth = _half_width(given.get("halfwidth", ""))
    confidence = _half_width(given.get("confidence", "0.5"))
    fallback = given.get("fallback", "cap")
    if (halfwidth is None or set(given) - {"pilot", "halfwidth", "confidence", "fallback"} or fallback not in ("cap", "stop")
            or confidence is None or confidence < 0.5):
        raise BonbenchError(fix)
    return AdaptiveSpec(pilot, halfwidth=halfwidth, fallback=fallback, confidence=confidence)
