"""Ranges of the CLI's numeric flags, checked right after parsing, before any work.

A count, a size or a number of resamples below its least meaningful value (``--n-boot 0``,
``--folds 0``, ``--min-class -1``, ``--n -3``) is a one-line ``BonbenchError`` naming the flag, its
range and the value given, instead of a traceback deep inside a computation or a silently
different run. ``RANGES`` lists each command's flags (by argparse ``dest``); ``check`` applies it.
Flags left at ``None`` (not given, no default) are not checked. Parsing itself stays argparse's.
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

_RUN_AND_SCORE: dict[str, Range] = {"n": AT_LEAST_1, "limit": AT_LEAST_1, "n_boot": AT_LEAST_1,
                                    "ray_workers": AT_LEAST_1}

RANGES: dict[str, dict[str, Range]] = {
    "run": {**_RUN_AND_SCORE, "max_tokens": AT_LEAST_1, "seed": AT_LEAST_0, "max_model_len": AT_LEAST_1,
            "tensor_parallel_size": AT_LEAST_1, "gpu_memory_utilization": SHARE, "batch_size": AT_LEAST_1,
            "concurrency": AT_LEAST_1, "request_timeout": POSITIVE},
    "score": dict(_RUN_AND_SCORE),
    "merge": {"n_boot": AT_LEAST_1},
    "train-verifier": {"max_length": AT_LEAST_1, "batch_size": AT_LEAST_1, "folds": (2, None, True, False),
                       "val_fraction": FRACTION_0_1, "min_class": AT_LEAST_1, "epochs": AT_LEAST_1, "lr": POSITIVE,
                       "lora_rank": AT_LEAST_1, "lora_alpha": AT_LEAST_1, "micro_batch": AT_LEAST_1,
                       "save_every": AT_LEAST_1, "seed": AT_LEAST_0},
    "eval-verifier": {"k": AT_LEAST_1, "n_boot": AT_LEAST_1, "seed": AT_LEAST_0},
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
