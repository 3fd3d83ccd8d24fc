"""The built-in reward models, their descriptions, and the ``rm:`` verifier scheme.

Spec strings (``--reward-model SPEC``, ``--verifier rm:SPEC``) and the one lookup
``get_reward_model(spec, data_dir)`` are ``bonbench.api.reward``'s, where the spec grammar is
written; options of ``hf:``/``vllm:`` are those of ``HFClassifierOptions`` / ``VllmClassifierOptions``
(``bonbench.plugins.rewards.schemes``).

Registration is the generic one (``bonbench.api.reward``, ``bonbench.core.registry``): the
built-ins and third-party packages alike list their factories in the ``bonbench.reward_models``
entry-point group (bonbench's in pyproject.toml, their one declaration), ``@register_reward_model``
registers in-process; nothing is imported until a model is asked for (or listed: a model's
description is the first line of its factory's docstring). A factory takes ``data_dir`` (the local
data mirror or None) and its options. ``hf:`` and ``vllm:`` are schemes registered through the
same group (``bonbench.plugins.rewards.schemes``); a package may add its own ``prefix:``.
``rm:`` (a reward model as a bon@k verifier) is a verifier scheme this package registers: the model
is checked when the run is planned (``LazyRewardModel``) and loaded when it first scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bonbench.api.reward import REWARD_MODELS, RewardModel, first_line, get_reward_model, parse_spec, preflight
from bonbench.core.errors import BonbenchError
from bonbench.plugins.rewards.base import RewardVerifier, score_with_cost


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

    def score_counted(self, prompts: Sequence[str], completions: Sequence[str]) -> list[tuple[float, int | None, int | None]]:
        """The loaded model's scores and costs (None where it does not count them)."""
        return score_with_cost(self.model, prompts, completions)


def reward_verifier(spec: str, data_dir: str | Path | None = None) -> RewardVerifier:
    """rm:<spec>  a reward model (`bonbench list reward-models`), loaded when it first scores; e.g. rm:imdb-sentiment

    The data directory comes from ``data_dir`` or ``BONBENCH_DATA_DIR`` (needed only the first
    time an offline model is built).
    """
    return RewardVerifier(LazyRewardModel(spec, data_dir))
