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

Registration is the generic one (``bonbench.api.reward``, ``bonbench.core.registry``): the
built-ins and third-party packages alike list their factories in the ``bonbench.reward_models``
entry-point group (bonbench's in pyproject.toml, their one declaration), ``@register_reward_model``
registers in-process; nothing is imported until a model is asked for (or listed: a model's
description is the first line of its factory's docstring). A factory takes ``data_dir`` (the local
data mirror or None) and its options. ``hf:`` and ``vllm:`` are schemes registered through the
same group (``bonbench.plugins.rewards.schemes``); a package may add its own ``prefix:``.
``rm:`` (a reward model as a bon@k verifier) is a verifier scheme this package registers.

Names: a model's ``name`` (and so its grade / score file) is derived from the spec: the registered
name, plus a slug of the options; ``hf``/``vllm`` specs get a readable slug and a short hash of the
spec so that two folders called ``model`` never share a file.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from bonbench.api.reward import (REWARD_GROUP, REWARD_MODELS, RewardFactory, RewardModel, first_line, register_reward_model,
                                 reward_model_names, reward_options, scheme_options)
from bonbench.core.errors import BonbenchError
from bonbench.plugins.rewards.base import RewardVerifier

GROUP = REWARD_GROUP
Factory = RewardFactory
__all__ = ["GROUP", "LazyRewardModel", "RewardSpec", "describe_reward_models", "describe_reward_schemes",
           "get_reward_model",
           "parse_spec", "preflight", "register_reward_model", "reward_model_names", "reward_verifier"]


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


def describe_reward_models() -> list[tuple[str, str]]:
    """(name, one-line description) of every registered reward model: the description given at
    registration, else the first line of its factory's docstring (the plugin's module is imported;
    one that fails to import is described as broken)."""
    out = []
    for name in REWARD_MODELS.names():
        description = REWARD_MODELS.meta(name).get("description")
        if description is None:
            try:
                description = first_line(REWARD_MODELS.get(name).__doc__)
            except BonbenchError as exc:
                out.append((name, f"(failed to load: {exc})"))
                continue
            REWARD_MODELS.add(name, REWARD_MODELS.get(name), description=description)
        out.append((name, description))
    return out


def describe_reward_schemes() -> list[tuple[str, str]]:
    """(prefix, one-line description) of every reward-model scheme (``hf:``, ``vllm:``, a plugin's);
    imports the schemes' modules, which load no model."""
    out = []
    for prefix in REWARD_MODELS.schemes():
        try:
            out.append((prefix, first_line(REWARD_MODELS.get(prefix).__doc__)))
        except BonbenchError as exc:
            out.append((prefix, f"(failed to load: {exc})"))
    return out


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
        return RewardSpec("hf", base, tuple(options), text)
    raise BonbenchError(f"unknown reward model {base!r}; choose one of: {', '.join(reward_model_names())} "
                        "(see `bonbench list reward-models`), or hf:<local folder or hub id>")


def get_reward_model(spec: str, data_dir: str | Path | None = None) -> RewardModel:
    """Build the reward model ``spec`` names (loads weights / trains offline models now)."""
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
    """The checks that need no weights: option names and types, and whatever a scheme checks before
    loading (``hf:``: the folder or hub id and the label, from config.json alone), so that a run
    fails before sampling, not after."""
    if spec.kind == "registered":
        reward_options(REWARD_MODELS.get(spec.target), spec.target, dict(spec.options))
        return
    check = getattr(REWARD_MODELS.get(spec.kind + ":"), "preflight", None)
    if check is not None:
        check(spec.target, **dict(spec.options))


def reward_verifier(spec: str, data_dir: str | Path | None = None) -> RewardVerifier:
    """rm:<spec>  a reward model as a bon@k verifier (`bonbench list reward-models`), loaded when it first scores.

    The data directory comes from ``data_dir`` or ``BONBENCH_DATA_DIR`` (needed only the first
    time an offline model is built).
    """
    return RewardVerifier(LazyRewardModel(spec, data_dir))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._]+", "-", text).strip("-.") or "x"
