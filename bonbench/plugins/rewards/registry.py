"""Reward-model names and spec strings -> reward models; the ``bonbench.reward_models`` entry points.

Spec syntax (``--reward-model SPEC``, ``--verifier rm:SPEC``)::

    SPEC    = BASE [ "?" KEY "=" VALUE { "&" KEY "=" VALUE } ]
    BASE    = NAME                 a registered reward model (``bonbench list reward-models``)
            | "hf:" SOURCE         a Hugging Face sequence classifier (bonbench.plugins.rewards.hf)
            | "vllm:" SOURCE       the same model served by vLLM's pooling runner (GPUs)
            | SOURCE               an unregistered folder or hub id means ``hf:SOURCE``
    SOURCE  = a local folder saved with save_pretrained, or a hub id ``org/name``

Examples: ``imdb-sentiment``, ``tldr-proxy-eval?max_words=40``,
``hf:lvwerra/distilbert-imdb?label=POSITIVE``, ``hf:./my-rm?read=logit&batch_size=8``.
Options of a registered model are its factory's keyword arguments (typed by annotation); options
of ``hf:``/``vllm:`` are those of ``HFOptions`` / ``VllmOptions``. Values may not contain ``&``.

Registration mirrors the verifiers' (``bonbench.api.task``): built-ins sit in ``BUILTIN_REWARD_MODELS``
as ``"module:factory"`` strings, third-party packages list theirs in the ``bonbench.reward_models``
entry-point group, ``@register_reward_model`` registers in-process; nothing is imported until a
model is asked for. A factory takes ``data_dir`` (the local data mirror or None) and its options.

Names: a model's ``name`` (and so its grade / score file) is derived from the spec: the registered
name, plus a slug of the options; ``hf``/``vllm`` specs get a readable slug and a short hash of the
spec so that two folders called ``model`` never share a file.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import re
from dataclasses import dataclass, fields
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, Callable, Literal, Sequence

from bonbench.core.errors import BonbenchError
from bonbench.plugins.rewards.base import RewardModel, RewardVerifier

GROUP = "bonbench.reward_models"
# name -> ("module:factory", one-line description); the description is here so that listing the
# built-ins imports none of them
BUILTIN_REWARD_MODELS: dict[str, tuple[str, str]] = {
    "imdb-sentiment": ("bonbench.plugins.rewards.imdb:build",
                       "calibrated p(positive | prompt + completion): TF-IDF n-grams + logistic regression trained "
                       "offline on IMDB train (data dir)"),
    "tldr-proxy-train": ("bonbench.plugins.rewards.tldr:build_train_proxy",
                         "TL;DR proxy to train on: salient-word coverage x brevity x non-copying (lexical, no preference data)"),
    "tldr-proxy-eval": ("bonbench.plugins.rewards.tldr:build_eval_proxy",
                        "TL;DR proxy to evaluate with: TF-IDF similarity x length x non-redundancy x non-copying x "
                        "function words (lexical; IDF from the data dir's posts)"),
}
Factory = Callable[..., RewardModel]
_FACTORIES: dict[str, Factory | str | EntryPoint] = {}
_DESCRIPTIONS: dict[str, str] = {}
_loaded = False


@dataclass(frozen=True)
class RewardSpec:
    """A parsed spec: ``kind`` (registered / hf / vllm), ``target`` (name, folder or hub id), options."""

    kind: Literal["registered", "hf", "vllm"]
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


def register_reward_model(name: str, description: str = "") -> Callable[[Factory], Factory]:
    """Decorator: register a reward-model factory ``(data_dir=None, **options) -> RewardModel``."""

    def deco(fn: Factory) -> Factory:
        _FACTORIES[name] = fn
        _DESCRIPTIONS[name] = description or _first_line(fn.__doc__)
        return fn

    return deco


def _load_entries() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for name, (ref, description) in BUILTIN_REWARD_MODELS.items():
        _FACTORIES.setdefault(name, ref)
        _DESCRIPTIONS.setdefault(name, description)
    for ep in entry_points(group=GROUP):
        if ep.name in _FACTORIES and not isinstance(_FACTORIES[ep.name], str):
            continue  # registered in-process (decorator) wins over installed metadata
        _FACTORIES[ep.name] = ep


def reward_model_names() -> list[str]:
    _load_entries()
    return sorted(_FACTORIES)


def describe_reward_models() -> list[tuple[str, str]]:
    """(name, one-line description) of every registered reward model; a plugin's description is its
    factory's docstring (the plugin is imported; one that fails to import is described as broken)."""
    _load_entries()
    out = []
    for name in sorted(_FACTORIES):
        if name not in _DESCRIPTIONS:
            try:
                _DESCRIPTIONS[name] = _first_line(_factory(name).__doc__)
            except BonbenchError as exc:
                out.append((name, f"(failed to load: {exc})"))
                continue
        out.append((name, _DESCRIPTIONS[name]))
    return out


def parse_spec(spec: str) -> RewardSpec:
    """Parse a spec string (module docstring) or raise a one-line ``BonbenchError``."""
    _load_entries()
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
    for prefix in ("hf", "vllm"):
        if base.startswith(prefix + ":"):
            if not base[len(prefix) + 1:]:
                raise BonbenchError(f"reward model spec {spec!r} names no model: {prefix}:<local folder or hub id>")
            return RewardSpec(prefix, base[len(prefix) + 1:], tuple(options), text)  # type: ignore[arg-type]
    if base in _FACTORIES:
        return RewardSpec("registered", base, tuple(options), text)
    if Path(base).expanduser().exists() or (base.count("/") == 1 and not base.startswith((".", "/", "~"))):
        return RewardSpec("hf", base, tuple(options), text)
    raise BonbenchError(f"unknown reward model {base!r}; choose one of: {', '.join(reward_model_names())} "
                        "(see `bonbench list reward-models`), or hf:<local folder or hub id>")


def get_reward_model(spec: str, data_dir: str | Path | None = None) -> RewardModel:
    """Build the reward model ``spec`` names (loads weights / trains offline models now)."""
    parsed = parse_spec(spec)
    if parsed.kind == "hf":
        from bonbench.plugins.rewards.hf import HFClassifierReward, HFOptions

        return HFClassifierReward(parsed.target, parsed.name, _dataclass_options(HFOptions, parsed))
    if parsed.kind == "vllm":
        from bonbench.plugins.rewards.vllm_pooling import VllmClassifierReward, VllmOptions

        return VllmClassifierReward(parsed.target, parsed.name, _dataclass_options(VllmOptions, parsed))
    factory = _factory(parsed.target)
    model = factory(data_dir=data_dir, **_factory_options(parsed, factory))
    if parsed.options:
        model.name = parsed.name  # options change the scores: keep their files apart
    return model


class LazyRewardModel:
    """A ``RewardModel`` that checks its spec now and loads the model on first use.

    Planning a run (``--verifier rm:imdb-sentiment``) must not train or load anything; the name is
    known from the spec, the version and fingerprint when the model is loaded.
    """

    def __init__(self, spec: str, data_dir: str | Path | None = None) -> None:
        self.spec = spec
        self.data_dir = data_dir
        parsed = parse_spec(spec)
        preflight(parsed)
        self.name = parsed.name
        self._model: RewardModel | None = None

    @property
    def model(self) -> RewardModel:
        if self._model is None:
            self._model = get_reward_model(self.spec, self.data_dir)
        return self._model

    @property
    def version(self) -> int:
        return int(self.model.version)

    @property
    def fingerprint(self) -> str:
        return str(self.model.fingerprint)

    def score(self, prompts: Sequence[str], completions: Sequence[str]) -> list[float]:
        return self.model.score(prompts, completions)


def preflight(spec: RewardSpec) -> None:
    """The checks that need no weights: option names and types, the folder or hub id, and for a
    classifier its label (from config.json alone), so that a run fails before sampling, not after."""
    if spec.kind == "registered":
        _factory_options(spec, _factory(spec.target))
        return
    from bonbench.plugins.rewards.hf import HFOptions, labels_of, pick_label, resolve_source
    from bonbench.plugins.rewards.vllm_pooling import VllmOptions

    options = _dataclass_options(HFOptions if spec.kind == "hf" else VllmOptions, spec)
    path, _ = resolve_source(spec.target)
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise BonbenchError(f"could not read the config of reward model {spec.target!r} ({first})") from None
    pick_label(spec.target, labels_of(config), options.label)


def reward_verifier(spec: str, data_dir: str | Path | None = None) -> RewardVerifier:
    """``--verifier rm:<spec>``: the reward model as a bon@k verifier, loaded when it first scores.

    The data directory comes from ``data_dir`` or ``BONBENCH_DATA_DIR`` (needed only the first
    time an offline model is built).
    """
    return RewardVerifier(LazyRewardModel(spec, data_dir))


def _factory(name: str) -> Factory:
    entry = _FACTORIES[name]
    if isinstance(entry, (str, EntryPoint)):
        target = entry if isinstance(entry, str) else entry.value
        try:
            if isinstance(entry, str):
                module, _, attr = entry.partition(":")
                factory = getattr(importlib.import_module(module), attr)
            else:
                factory = entry.load()
        except Exception as exc:  # a broken plugin: one line naming it
            raise BonbenchError(f"reward model {name!r} ({target}) failed to load: {exc}; reinstall the package that provides it") from None
        _FACTORIES[name] = entry = factory
    return entry  # type: ignore[return-value]


def _factory_options(spec: RewardSpec, factory: Factory) -> dict[str, Any]:
    params = {k: p for k, p in inspect.signature(factory).parameters.items() if k != "data_dir"}
    out: dict[str, Any] = {}
    for key, value in spec.options:
        if key not in params:
            allowed = ", ".join(params) or "none"
            raise BonbenchError(f"reward model {spec.target!r} has no option {key!r}; its options are: {allowed}")
        out[key] = _coerce(key, value, params[key].annotation)
    return out


def _dataclass_options(cls: type, spec: RewardSpec) -> Any:
    types = {f.name: f.type for f in fields(cls)}
    out: dict[str, Any] = {}
    for key, value in spec.options:
        if key not in types:
            raise BonbenchError(f"{spec.kind}: reward models have no option {key!r}; options are: {', '.join(types)}")
        out[key] = _coerce(key, value, types[key])
    return cls(**out)


def _coerce(key: str, value: str, annotation: Any) -> Any:
    """A string option as its annotated type (annotations are strings under postponed evaluation)."""
    text = str(annotation)
    if value.lower() in ("none", "null") and "None" in text:
        return None
    try:
        if "bool" in text:
            if value.lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                raise ValueError(value)
            return value.lower() in ("1", "true", "yes", "on")
        if "int" in text and "str" not in text:
            return int(value)
        if "float" in text:
            return float(value)
    except ValueError:
        raise BonbenchError(f"reward model option {key}={value!r} is not a valid {text.replace('typing.', '')}") from None
    return value


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._]+", "-", text).strip("-.") or "x"


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0] if (doc or "").strip() else ""

