"""Ranges of the CLI's numeric flags: the ``Range`` values settings declare, and their wording.

A count, a size or a number of resamples below its least meaningful value (``--n-boot 0``,
``--folds 0``, ``--min-class -1``, ``--n -3``) is a one-line ``BonbenchError`` naming the flag, its
range and the value given, instead of a traceback deep inside a computation or a silently
different run. Every command's settings are dataclass fields, and each declares its range in its
field (``bonbench.core.settings.setting(range=...)``); ``settings.check`` applies it, worded with
``describe``. This module checks nothing itself and parses nothing.
"""

from __future__ import annotations

import math

# (low, high, low_inclusive, high_inclusive); None = unbounded on that side
Range = tuple[float | None, float | None, bool, bool]

AT_LEAST_1: Range = (1, None, True, False)
AT_LEAST_0: Range = (0, None, True, False)
POSITIVE: Range = (0, None, False, False)
SHARE: Range = (0, 1, False, True)  # (0, 1]
FRACTION_0_1: Range = (0, 1, True, False)  # [0, 1)
OPEN_0_1: Range = (0, 1, False, False)  # (0, 1)


def describe(r: Range) -> str:
    """``>= 1``, ``> 0``, ``in (0, 1]`` ..."""
    lo, hi, lo_in, hi_in = r
    if hi is None:
        return f"{'>=' if lo_in else '>'} {lo:g}"
    if lo is None:
        return f"{'<=' if hi_in else '<'} {hi:g}"
    return f"in {'[' if lo_in else '('}{lo:g}, {hi:g}{']' if hi_in else ')'}"


def in_range(value: float, r: Range) -> bool:
    lo, hi, lo_in, hi_in = r
    if isinstance(value, float) and not math.isfinite(value):
        return False
    if lo is not None and (value < lo or (value == lo and not lo_in)):
        return False
    return hi is None or value < hi or (value == hi and hi_in)
