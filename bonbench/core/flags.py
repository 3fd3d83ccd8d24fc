"""Ranges of the CLI's numeric flags, checked right after parsing, before any work.

A count, a size or a number of resamples below its least meaningful value (``--n-boot 0``,
``--folds 0``, ``--min-class -1``, ``--n -3``) is a one-line ``BonbenchError`` naming the flag, its
range and the value given, instead of a traceback deep inside a computation or a silently
different run. A setting that is a dataclass field declares its range in the field
(``bonbench.core.settings.setting(range=...)``, checked by ``settings.check``); ``RANGES`` lists the
flags of the commands that are not dataclass fields (by argparse ``dest``) and ``check`` applies
it. Both word the range with ``describe``. Values left at ``None`` (not given, no default) are not
checked. Parsing itself stays argparse's.
"""

from __future__ import annotations

import argparse
import math
from typing import Any, Mapping

from bonbench.core.errors import BonbenchError

# (low, high, low_inclusive, high_inclusive); None = unbounded on that side
Range = tuple[float | None, float | None, bool, bool]

AT_LEAST_1: Range = (1, None, True, False)
AT_LEAST_0: Range = (0, None, True, False)
POSITIVE: Range = (0, None, False, False)
SHARE: Range = (0, 1, False, True)  # (0, 1]
FRACTION_0_1: Range = (0, 1, True, False)  # [0, 1)

# the commands whose flags are not a settings dataclass's fields (those declare their range in the
# field: bonbench.core.settings), by argparse dest
RANGES: dict[str, dict[str, Range]] = {
    "leaderboard": {"n_boot": AT_LEAST_1, "seed": AT_LEAST_0},
    "plot": {"coscaling_tol": POSITIVE, "holdout_fraction": (0, 1, False, False)},
}


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


def check(args: argparse.Namespace | Any, ranges: Mapping[str, Range] | None = None) -> None:
    """Raise a one-line BonbenchError for the first numeric flag of ``args`` (parsed flags, or a
    request dataclass with the same field names) out of its range (``ranges``, default
    ``RANGES[args.command]``)."""
    table = RANGES.get(getattr(args, "command", ""), {}) if ranges is None else ranges
    for dest, r in table.items():
        value = getattr(args, dest, None)
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not in_range(value, r):
            flag = "--" + dest.replace("_", "-")
            raise BonbenchError(f"{flag} must be {describe(r)} (got {value:g})")
