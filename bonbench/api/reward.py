"""The ``RewardModel`` protocol and the reward-model registry.

A reward model scores (prompt, completion) pairs; higher is better. It is registered like every
other plugin (``bonbench.core.registry``): ``@register_reward_model("name", "one-line description")``
on a factory ``(data_dir=None, **options) -> RewardModel``, or a package's ``bonbench.reward_models``
entry point ``name = "module:factory"``. An entry named ``prefix:`` (``hf:``, ``vllm:``) is a
*scheme*: its factory is called as ``factory(source, name=..., data_dir=..., **options)`` with
the rest of the spec as ``source`` and checks its own options.

``get_reward_model(name, data_dir, **options)`` is the core lookup: options of a registered
factory are coerced by its annotations (``-T`` rules: a wrong type is one line naming the option
and its type). Spec strings (``name?key=value&...``) are parsed by
``bonbench.plugins.rewards.registry``, which calls this. This module loads no model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

from bonbench.core.registry import Registry, coerce_kwargs

REWARD_GROUP = "bonbench.reward_models"


class RewardModel(Protocol):
    """A batched scorer of (prompt, completion) pairs; one float per pair, higher is better.

    ``name`` is filename-safe (it names grade and score files); ``version`` changes when the scoring
    recipe changes; ``fingerprint`` changes when what it scores with changes (weights, config,
    training data, library versions that alter a trained model).
    """

    name: str  # settable: options given with a registered name rename the model (rewards.registry)

    # read-only: a class attribute, a frozen field or a property all satisfy them
    @property
    def version(self) -> int: ...

    @property
    def fingerprint(self) -> str: ...

    def score(self, prompts: Sequence[str], completions: Sequence[str]) -> list[float]: ...


RewardFactory = Callable[..., RewardModel]
REWARD_MODELS: Registry[RewardFactory] = Registry("reward model", REWARD_GROUP)


def register_reward_model(name: str, description: str = "") -> Callable[[RewardFactory], RewardFactory]:
    """Decorator: register a reward-model factory ``(data_dir=None, **options) -> RewardModel``
    (a name ending in ``:`` registers a scheme). ``description`` defaults to its docstring's first line."""

    def deco(fn: RewardFactory) -> RewardFactory:
        REWARD_MODELS.add(name, fn, description=description or first_line(fn.__doc__))
        return fn

    return deco


def reward_model_names() -> list[str]:
    """The registered plain names (schemes: ``REWARD_MODELS.schemes()``)."""
    return REWARD_MODELS.names()


def reward_options(factory: RewardFactory, name: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` checked against ``factory``'s keyword arguments and coerced by annotation."""
    return coerce_kwargs(factory, options, owner=f"reward model {name!r}", hidden=("data_dir",), noun="option")


def scheme_options(scheme: RewardFactory, spec: str, options: dict[str, Any]) -> dict[str, Any]:
    """A scheme's ``?key=value`` options coerced by the parameters it names; a scheme that takes
    ``**options`` (``hf:``, ``vllm:``) gets the rest as written and checks them itself."""
    return coerce_kwargs(scheme, options, owner=f"reward model {spec!r}", hidden=("source", "name", "data_dir"), noun="option")


def get_reward_model(name: str, data_dir: str | Path | None = None, **options: Any) -> RewardModel:
    """The reward model registered as ``name`` (or ``prefix:source`` of a scheme), built with ``options``."""
    factory, rest = REWARD_MODELS.resolve(name, hint=" (see `bonbench list reward-models`), or hf:<local folder or hub id>")
    if rest is not None:
        return factory(rest, name=name, data_dir=data_dir, **scheme_options(factory, name, options))
    return factory(data_dir=data_dir, **reward_options(factory, name, options))


def first_line(doc: str | None) -> str:
    """The first line of a docstring ("" when there is none)."""
    return (doc or "").strip().splitlines()[0] if (doc or "").strip() else ""
