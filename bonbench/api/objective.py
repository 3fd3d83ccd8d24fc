"""The objective interface: one prompt group in, one weight per sample out.

Every objective is a small pure function of one prompt's group of G samples. It returns weights
``w`` such that

    g_hat = sum_i w_i * grad log pi_theta(y_i | x)

is the objective's gradient estimate (ascent direction) for that prompt; the trainer minimises
``-sum_i w_i * log pi_theta(y_i | x)`` (log-probabilities summed over the tokens of y_i) averaged
over prompts. Weights are computed from numbers only (rewards, answers, verifier scores,
log-probabilities as plain floats), never from tensors, so they carry no gradient and each
objective is tested exactly on a tabular softmax policy (tests/objective_harness.py).

An objective declares what it ``needs`` beyond rewards; the trainer checks that before the first
step and says which flag provides it. An objective that reads the learned value (``needs`` has
"value") also says what the value head regresses on (``value_target``: one number per group, an
unbiased estimate of what ``Group.value`` stands for); the trainer trains the head on it.

Objectives register themselves with ``@register_objective(...)`` into the generic registry
(``bonbench.core.registry``); the modules that hold them are listed in the ``bonbench.objectives``
entry-point group (the built-ins: ``bonbench.plugins.objectives.tang`` etc., a package its own),
imported when the objectives are first asked for. ``make_objective(name, **options)`` builds one
with its options checked and coerced by annotation (``-O k=4`` arrives as a string or a number).
This module knows no objective itself.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bonbench.core.errors import BonbenchError
from bonbench.core.registry import Registry, coerce_kwargs

if TYPE_CHECKING:  # numpy only names array types here; `bonbench --help` (the objective list) must not load it
    import numpy as np

OBJECTIVE_GROUP = "bonbench.objectives"

# what an objective may need beyond rewards, and the flag that provides it
NEEDS = {
    "answers": "a task whose grader extracts answers (math tasks)",
    "scores": "--verifier NAME (verifier scores of every sample)",
    "logprobs": "log-probabilities of the samples under the current policy (the trainer computes them)",
    "ref_logprobs": "--ref-model (or the base model, the default reference)",
    "ref_rewards": "--ref-samples M (rewards of M reference-policy samples per prompt)",
    "expert": "a task with reference solutions (expert demonstrations)",
    "value": "the trainer's learned value head (--baseline value / --p-source value)",
}


@dataclass(frozen=True)
class Group:
    """One prompt's samples and what objectives may read. Arrays have one entry per row (G rows).

    ``expert`` marks rows that are demonstrations (the task's reference solution), not samples of
    the policy; objectives that use them (SFT, BoN-SFT, STaR) say how. Every other row is an iid
    sample of pi_theta(. | x).
    """

    rewards: np.ndarray  # R(x, y_i): 0/1 correctness or a real-valued reward
    answers: tuple[str | None, ...] | None = None  # extracted answers (majority voting); None abstains
    scores: np.ndarray | None = None  # verifier scores r(x, y_i) (verifier-selected objectives)
    logprobs: np.ndarray | None = None  # log pi_theta(y_i | x), summed over tokens
    ref_logprobs: np.ndarray | None = None  # log pi_ref(y_i | x), summed over tokens
    ref_rewards: np.ndarray | None = None  # rewards of M reference samples of this prompt (length M, not G)
    expert: np.ndarray | None = None  # bool per row: a demonstration rather than a policy sample
    # the value head's estimate for this prompt (of the objective's ``value_target``), computed before
    # this step's samples are seen, so it is a function of x alone and a baseline built on it adds no bias
    value: float | None = None

    @property
    def size(self) -> int:
        import numpy as np

        return int(np.asarray(self.rewards).shape[0])


@dataclass(frozen=True)
class ObjectiveInfo:
    """A registered objective: its factory (keyword options with defaults), paper and needs."""

    name: str
    factory: Callable[..., Objective]
    paper: str
    needs: frozenset[str]
    summary: str
    options: Mapping[str, Any] = field(default_factory=dict)  # option -> default


@dataclass(frozen=True)
class Objective:
    """A built objective: ``weights(group)`` with its options bound."""

    name: str
    weights: Callable[[Group], np.ndarray]
    needs: frozenset[str]
    options: Mapping[str, Any]
    min_group: int = 1  # the smallest G it is defined for (k-sample objectives: k)
    # with "value" in needs: the per-group number the value head regresses on (its estimate is Group.value)
    value_target: Callable[[Group], float] | None = None


OBJECTIVES: Registry[ObjectiveInfo] = Registry("objective", OBJECTIVE_GROUP)


class ObjectiveTable(Mapping[str, ObjectiveInfo]):
    """Name -> ``ObjectiveInfo`` of every registered objective (reads the entry points when used)."""

    def __getitem__(self, name: str) -> ObjectiveInfo:
        if name not in OBJECTIVES.names():
            raise KeyError(name)
        return OBJECTIVES.get(name)

    def __iter__(self) -> Iterator[str]:
        return iter(OBJECTIVES.names())

    def __len__(self) -> int:
        return len(OBJECTIVES.names())


REGISTRY = ObjectiveTable()


def register_objective(name: str, *, paper: str, needs: tuple[str, ...] = (),
                       summary: str = "") -> Callable[[Callable[..., Objective]], Callable[..., Objective]]:
    """Register ``factory(**options) -> Objective`` under ``name``; its keyword defaults are the options."""
    unknown = set(needs) - set(NEEDS)
    if unknown:
        raise ValueError(f"unknown needs {sorted(unknown)}; choose from {sorted(NEEDS)}")

    def wrap(factory: Callable[..., Objective]) -> Callable[..., Objective]:
        params = inspect.signature(factory).parameters
        options = {k: p.default for k, p in params.items() if p.default is not inspect.Parameter.empty}
        doc = (factory.__doc__ or "").strip()
        OBJECTIVES.add(name, ObjectiveInfo(name, factory, paper, frozenset(needs), summary or doc.split("\n")[0], options))
        return factory

    return wrap


def make_objective(name: str, **options: Any) -> Objective:
    """Build a registered objective; unknown names or options are one-line errors naming the fix, and
    option strings are coerced by the factory's annotations (a wrong type names the option and type)."""
    info = REGISTRY.get(name)
    if info is None:
        raise BonbenchError(f"unknown objective {name!r}; `bonbench list objectives` shows them: {', '.join(sorted(REGISTRY))}")
    bad = sorted(set(options) - set(info.options))
    if bad:
        raise BonbenchError(f"objective {name!r} has no option {bad[0]!r}; "
                            f"its options are: {', '.join(sorted(info.options)) or 'none'}")
    return info.factory(**coerce_kwargs(info.factory, options, owner=f"objective {name!r}", noun="option"))


# Option defaults that changed after checkpoints were written with them (issue 24): objective ->
# {option: the value a config that did not name the option meant before the change}. A training
# config records only the options given on the command line, so without this a resumed old run
# would silently switch estimator; ``pinned_options`` / ``options_as_trained`` let the config name the
# value explicitly for new runs and read old records with the old meaning.
CHANGED_DEFAULTS: dict[str, dict[str, Any]] = {
    "bon_rlb": {"p_estimate": "plugin"},  # the plug-in (g+, g-) form; now the exact U-statistic
    "vbon": {"ties": "strict"},  # Eq. 4 with a strict F; now BoN with uniform tie-breaking
}


def pinned_options(name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with every changed default the caller did not set filled in at its current
    default, so that a new run's recorded config names the estimator it trains with."""
    info = REGISTRY.get(name)
    changed = CHANGED_DEFAULTS.get(name, {})
    if info is None:
        return dict(options)
    return {**{k: info.options[k] for k in changed}, **options}


def options_as_trained(name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """A recorded config's options as they were meant: a changed default it does not name takes the
    value from before the change (a config written before issue 24 trained with that)."""
    return {**CHANGED_DEFAULTS.get(name, {}), **options}
