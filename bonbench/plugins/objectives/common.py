"""Helpers shared by the per-group objectives (chow/, amini.py, bonbon.py): reading a ``Group``'s
fields with one-line errors that name the flag providing them, the policy/expert row mask, baselines
that keep an estimator unbiased, and option checks.

No objective is defined or registered here: each objective module combines these into its weights.
It imports numpy, not torch, and no other plugin package.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bonbench.api.objective import NEEDS, Group
from bonbench.core.errors import BonbenchError

CHOW = "Chow et al. 2024, arXiv 2412.15287"

# baselines of the sample-based objectives: leave-one-out or none
BASELINES = ("loo", "none")
# Chow et al.'s objectives also take the trainer's learned value head (math-reference §2.8)
VALUE_BASELINES = ("loo", "none", "value")


def require(group: Group, field: str, what: str) -> np.ndarray:
    """The group's ``field`` as a float array, or a one-line BonbenchError naming the flag that provides it."""
    value = getattr(group, field)
    if value is None:
        raise BonbenchError(f"{what} needs {field}: {NEEDS[field]}; this group has none")
    arr = np.asarray(value, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(arr)):
        raise BonbenchError(f"{what}: {field} must be finite")
    return arr


def policy_mask(group: Group) -> np.ndarray:
    """True for the rows that are samples of pi_theta (not expert demonstrations)."""
    G = group.size
    if group.expert is None:
        return np.ones(G, dtype=bool)
    e = np.asarray(group.expert, dtype=bool).reshape(-1)
    if e.size != G:
        raise BonbenchError(f"expert has {e.size} entries for a group of {G} rows")
    return ~e


def rewards_of(group: Group, what: str) -> np.ndarray:
    r = np.asarray(group.rewards, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(r)):
        raise BonbenchError(f"{what}: rewards must be finite")
    return r


def row_values(group: Group, field: str, what: str) -> np.ndarray:
    """A per-row field (length G), checked."""
    arr = require(group, field, what)
    if arr.size != group.size:
        raise BonbenchError(f"{what}: {field} has {arr.size} entries for a group of {group.size} rows")
    return arr


def policy_rows_with_ref(group: Group, what: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The policy rows' mask and their rewards, log-probabilities and reference log-probabilities
    (what every objective with a KL to the reference reads)."""
    mask = policy_mask(group)
    return (mask, rewards_of(group, what)[mask], row_values(group, "logprobs", what)[mask],
            row_values(group, "ref_logprobs", what)[mask])


def centred(t: np.ndarray, baseline: str, what: str) -> np.ndarray:
    """t_i - b_i with b_i = 0 (none) or the mean of the other samples' t (loo, RLOO: b_i does not
    depend on y_i, so E[b_i grad log pi(y_i)] = 0 and the estimate stays exactly unbiased)."""
    G = t.size
    if baseline == "none":
        return t.copy()
    if baseline == "loo":
        if G < 2:
            raise BonbenchError(f"{what} with baseline='loo' needs at least 2 policy samples per prompt, got {G}")
        return t - (t.sum() - t) / (G - 1)
    raise BonbenchError(f"{what}: unknown baseline {baseline!r}; choose from none, loo")


def scatter(mask: np.ndarray, w_policy: np.ndarray) -> np.ndarray:
    out = np.zeros(mask.size)
    out[mask] = w_policy
    return out


def check_choice(what: str, name: str, value: object, choices: Sequence[str]) -> None:
    if value not in choices:
        raise BonbenchError(f"{what}: unknown {name} {value!r}; choose from {', '.join(choices)}")


def check_int(what: str, name: str, value: object, low: int) -> None:
    if not (isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= low):
        raise BonbenchError(f"{what}: {name} must be an integer >= {low}, got {value!r}")



def binary_correct(r: np.ndarray, what: str) -> np.ndarray:
    if not np.all((r == 0.0) | (r == 1.0)):
        raise BonbenchError(f"{what} needs 0/1 rewards (a binary verifier such as a math grader); "
                            f"got values like {r[(r != 0) & (r != 1)][0]!r}")
    return r == 1.0


def value_of(group: Group, what: str) -> float:
    """The group's learned value estimate (``Group.value``), or a one-line error naming the flag."""
    if group.value is None:
        raise BonbenchError(f"{what} needs value: {NEEDS['value']}; this group has none")
    v = float(group.value)
    if not np.isfinite(v):
        raise BonbenchError(f"{what}: the value estimate must be finite, got {v}")
    return v
