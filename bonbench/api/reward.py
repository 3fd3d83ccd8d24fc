"""The ``RewardModel`` protocol, the reward-model registry and the spec strings that name models.

A reward model scores (prompt, completion) pairs; higher is better. It is registered like every
other plugin (``bonbench.core.registry``): ``@register_reward_model("name", "one-line description")``
on a factory ``(data_dir=None, **options) -> RewardModel``, or a package's ``bonbench.reward_models``
entry point ``name = "module:factory"``. An entry named ``prefix:`` (``hf:``, ``vllm:``) is a
*scheme*: its factory is called as ``factory(source, name=..., data_dir=..., **options)`` with
the rest of the spec as ``source`` and checks its own options.

A spec (``--reward-model SPEC``, ``--verifier rm:SPEC``, a task's ``-T reward_model=SPEC``)::

    SPEC    = BASE [ "?" KEY "=" VALUE { "&" KEY "=" VALUE } ]
    BASE    = NAME                 a registered reward model (``bonbench list reward-models``)
            | PREFIX SOURCE        a scheme: ``hf:`` (a Hugging Face sequence classifier), ``vllm:``
                                   (the same served by vLLM's pooling runner), or a plugin's
            | SOURCE               an unregistered folder or hub id means ``hf:SOURCE``
    SOURCE  = a local folder saved with save_pretrained, or a hub id ``org/name``

``parse_spec`` reads one; ``get_reward_model(spec, data_dir)`` builds the model it names, the one
lookup every caller uses (tasks, the ``rm:`` verifier, scripts). Options of a registered model are
its factory's keyword arguments, coerced by annotation (a wrong type is one line naming the option
and its type); a scheme's are checked by the scheme. Values may not contain ``&``. A model's
``name`` (and so its grade / score file) is derived from the spec: the registered name plus a slug
of the options; a scheme's spec gets a readable slug and a short hash of the spec, so that two
folders called ``model`` never share a file. This module loads no model itself (the factories do).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from bonbench.core.errors import BonbenchError
from bonbench.core.registry import Registry, coerce_kwargs

REWARD_GROUP = "bonbench.reward_models"
DEFAULT_SCHEME = "hf:"  # what a bare folder or hub id in a spec means


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


# (score, tokens the model read, forward passes or requests it made) of one (prompt, completion) pair
CountedScore = tuple[float, int | None, int | None]


@runtime_checkable
class CountsCost(Protocol):
    """A reward model that also says what each score cost (``Score.tokens`` / ``Score.calls`` of the
    ``rm:`` verifier): ``score_counted`` returns, per pair and in order, (score, tokens read, forward
    passes or requests). A model that runs no network (an n-gram classifier, a rule) reports 0 and 0;
    None means it cannot tell. A reward model without this method is recorded as not counted (None)."""

    def score_counted(self, prompts: Sequence[str], completions: Sequence[str]) -> list[CountedScore]: ...


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


@dataclass(frozen=True)
class RewardSpec:
    """A parsed spec: ``kind`` (registered / hf / vllm), ``target`` (name, folder or hub id), options."""

    kind: str  # "registered", or a scheme's prefix without its colon ("hf", "vllm", a plugin's)
    target: str
    options: tuple[tuple[str, str], ...] = ()
    text: str = ""

    @property
    def name(self) -> str:
        """Filename-safe model name (module docstring)."""
        opts = "-".join(f"{k}-{v}" for k, v in self.options)
        if self.kind == "registered":
            return self.target + (f"-{_slug(opts)}" if opts else "")
        readable = _slug(f"{self.kind}-{Path(self.target.rstrip('/')).name}" + (f"-{opts}" if opts else ""))[:60]
        return f"{readable}-{hashlib.sha256(self.text.encode()).hexdigest()[:6]}"


def parse_spec(spec: str) -> RewardSpec:
    """Parse a spec string (module docstring) or raise a one-line ``BonbenchError``."""
    text = spec.strip()
    base, _, query = text.partition("?")
    options: list[tuple[str, str]] = []
    for part in filter(None, query.split("&")):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise BonbenchError(f"reward model option {part!r} in {spec!r} is not KEY=VALUE (e.g. {base}?label=POSITIVE)")
        if key.strip() in dict(options):
            raise BonbenchError(f"reward model option {key.strip()!r} is given twice in {spec!r}")
        options.append((key.strip(), value.strip()))
    if base in REWARD_MODELS.names():
        return RewardSpec("registered", base, tuple(options), text)
    prefix = REWARD_MODELS.scheme_of(base)
    if prefix is not None:
        if not base[len(prefix):]:
            raise BonbenchError(f"reward model spec {spec!r} names no model: {prefix}<local folder or hub id>")
        return RewardSpec(prefix[:-1], base[len(prefix):], tuple(options), text)
    if Path(base).expanduser().exists() or (base.count("/") == 1 and not base.startswith((".", "/", "~"))):
        return RewardSpec(DEFAULT_SCHEME[:-1], base, tuple(options), text)
    raise BonbenchError(f"unknown reward model {base!r}; choose one of: {', '.join(reward_model_names())} "
                        f"(see `bonbench list reward-models`), or {DEFAULT_SCHEME}<local folder or hub id>")


def get_reward_model(spec: str, data_dir: str | Path | None = None) -> RewardModel:
    """Build the reward model ``spec`` names (loads weights / trains offline models now); ``data_dir``
    is the local data mirror an offline model is built from (None: ``BONBENCH_DATA_DIR`` or the hub)."""
    parsed = parse_spec(spec)
    if parsed.kind != "registered":
        scheme = REWARD_MODELS.get(parsed.kind + ":")
        options = scheme_options(scheme, spec.partition("?")[0], dict(parsed.options))
        return scheme(parsed.target, name=parsed.name, data_dir=data_dir, **options)
    factory = REWARD_MODELS.get(parsed.target)
    model = factory(data_dir=data_dir, **reward_options(factory, parsed.target, dict(parsed.options)))
    if parsed.options:
        model.name = parsed.name  # options change the scores: keep their files apart
    return model


def preflight(spec: RewardSpec) -> None:
    """The checks that need no weights: option names and types, and whatever a scheme checks before
    loading (``hf:``: the folder or hub id and the label, from config.json alone), so that a run
    fails before sampling, not after."""
    if spec.kind == "registered":
        reward_options(REWARD_MODELS.get(spec.target), spec.target, dict(spec.options))
        return
    check = getattr(REWARD_MODELS.get(spec.kind + ":"), "preflight", None)
    if check is not None:
        check(spec.target, **dict(spec.options))


def first_line(doc: str | None) -> str:
    """The first line of a docstring ("" when there is none)."""
    return (doc or "").strip().splitlines()[0] if (doc or "").strip() else ""


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._]+", "-", text).strip("-.") or "x"
