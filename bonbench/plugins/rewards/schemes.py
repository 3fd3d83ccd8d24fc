"""The ``hf:`` and ``vllm:`` reward-model schemes: any sequence classifier by folder or hub id.

Registered through the ``bonbench.reward_models`` entry-point group (``"hf:"`` and ``"vllm:"``),
like any plugin. A scheme is called as ``scheme(source, name=..., data_dir=..., **options)``
with the ``?key=value`` options as strings; they are checked against ``HFClassifierOptions`` /
``VllmClassifierOptions`` and coerced by annotation (``bonbench.core.registry``). ``preflight`` checks what
needs no weights (options, the folder or hub id, the head and label in config.json, a chat template
for ``input=chat``), so that a run fails before it samples.

This module imports neither torch nor vLLM; building a model does (``hf``, ``vllm_pooling``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bonbench.api.reward import RewardModel
from bonbench.core.errors import BonbenchError
from bonbench.core.registry import coerce_kwargs
from bonbench.plugins.rewards.chat import INPUT_MODES, resolve_input
from bonbench.plugins.rewards.hf import (
    HFClassifierOptions,
    HFClassifierReward,
    check_head,
    labels_of,
    pick_label,
    raw_config,
    resolve_source,
)
from bonbench.plugins.rewards.vllm_pooling import VllmClassifierOptions, VllmClassifierReward


class ClassifierScheme:
    """A ``prefix:SOURCE?options`` scheme over one classifier backend and its options record."""

    def __init__(self, prefix: str, options: type, build: Callable[[str, str, Any], RewardModel], summary: str,
                 inputs: tuple[str, ...] = INPUT_MODES) -> None:
        self.prefix, self.options, self.build, self.inputs = prefix, options, build, inputs
        self.__doc__ = summary

    def parse_options(self, source: str, given: dict[str, Any]) -> Any:
        """The options record from the spec's strings (one line naming a bad option or type)."""
        return self.options(**coerce_kwargs(self.options, given, owner=f"{self.prefix} reward model {source!r}", noun="option"))

    def __call__(self, source: str, *, name: str, data_dir: str | Path | None = None, **given: Any) -> RewardModel:
        return self.build(source, name, self.parse_options(source, given))

    def preflight(self, source: str, **given: Any) -> None:
        """Options, the folder or hub id, the head and the label (config.json), and whether ``input=chat``
        has a template to render (the tokenizer): no weights are read."""
        options = self.parse_options(source, given)
        path, _ = resolve_source(source)
        check_head(source, raw_config(path), options.trust_remote_code)
        from transformers import AutoConfig, AutoTokenizer

        trust = options.trust_remote_code
        try:
            config = AutoConfig.from_pretrained(path, trust_remote_code=trust)
            tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust)
        except (OSError, ValueError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            hint = "" if trust else " (a model that runs its own code needs ?trust_remote_code=true)"
            raise BonbenchError(f"could not read the config and tokenizer of reward model {source!r} ({first}){hint}") from None
        pick_label(source, labels_of(config), options.label)
        resolve_input(tokenizer, options.input, source, allowed=self.inputs)


hf_scheme = ClassifierScheme("hf:", HFClassifierOptions, HFClassifierReward,
                             "any Hugging Face sequence classifier (a local folder or hub id), on transformers")
vllm_scheme = ClassifierScheme("vllm:", VllmClassifierOptions, VllmClassifierReward,
                               "the same classifier served by vLLM's pooling runner (GPUs)",
                               inputs=("chat", "concat", "completion"))
