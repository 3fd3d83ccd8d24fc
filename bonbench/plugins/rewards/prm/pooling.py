"""vLLM's pooling runner as a PRM engine (``prm:SOURCE?backend=vllm``): every step score of a sample
from one request, read by vLLM's step pooling.

vLLM serves the families whose steps each end in one marker token read at that token (``serves``):
``qwen`` (Qwen2.5-Math-PRM: vLLM's own ``Qwen2ForProcessRewardModel``, or a ``*ForTokenClassification``
converted by vLLM) and ``math-shepherd`` (a causal LM converted to a two-class token classifier whose
classes are the LM head's rows of ``+`` and ``-``: ``convert="classify"`` with
``classifier_from_token``). The engine is ``LLM(model, runner="pooling", pooler_config=PoolerConfig(
task="token_classify", tok_pooling_type="STEP", step_tag_id=<marker id>))``: vLLM returns the head's
logits at every position of the marker token and nowhere else. (vLLM's ``returned_token_ids`` picks
columns of the pooled states before the head, which is the vocabulary only for models whose forward
returns LM logits; the converted head here already has just the two columns.)

Inputs are the same token ids the transformers engine reads (``encode.StepEncoder``), handed to vLLM
as ``prompt_token_ids``; the raw logits come back (``use_activation=False``) and the family's
softmax or sigmoid is applied here, as in ``hf``, so both engines agree to float precision
(``tests/test_prm_vllm.py``: 1e-3). vLLM does its own batching (``batch_size`` caps its
``max_num_seqs``). The families vLLM cannot serve (rlhflow: one chat turn per step read before the
reply; skywork: a value head outside the architecture; trl: steps tokenised apart, read at a newline
that the question may hold too) are refused when the verifier is built, naming ``backend=hf``.

This module does not split steps, aggregate or store anything (``verifier``); it imports vllm only
when an engine is built.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any

from bonbench.core.engines import import_vllm  # sets vLLM's CPU defaults, names the fix if broken
from bonbench.core.errors import BonbenchError
from bonbench.plugins.rewards.prm.encode import Encoded, StepEncoder
from bonbench.plugins.rewards.prm.family import PRMFamily

DEFAULT_GPU_MEMORY_UTILIZATION = 0.3  # leaves room for the policy's engine on the same GPU


def serves(family: PRMFamily) -> bool:
    """Whether vLLM's step pooling reads ``family``: one marker token per step, read at that token."""
    return family.marker in ("separator", "tag") and family.offset == 0 and family.head in ("classes", "lm_tokens")


def installed() -> bool:
    """Whether vllm can be found (not imported: that takes seconds)."""
    return importlib.util.find_spec("vllm") is not None


def check_served(family: PRMFamily, source: str) -> None:
    """A one-line error naming ``backend=hf`` when vLLM cannot serve ``family`` (module docstring) or is
    not installed."""
    if not serves(family):
        raise BonbenchError(f"PRM {source!r} ({family.name} family) cannot run on vLLM's pooling runner, which reads "
                            "a step score only at a step-marker token (qwen and math-shepherd families): use backend=hf")
    if not installed():
        raise BonbenchError("PRM option backend=vllm needs vllm: pip install 'bonbench[gpu]' (or use backend=hf)")


class VllmStepScorer:
    """Per-step scores with vLLM's pooling runner (module docstring)."""

    def __init__(self, path: str, source: str, family: PRMFamily, *, device: str, dtype: str,
                 batch_size: int | None, trust_remote_code: bool, max_length: int | None = None,
                 gpu_memory_utilization: float | None = None) -> None:
        from transformers import AutoTokenizer

        check_served(family, source)  # ``device`` is the hf engine's: vLLM picks its own (the verifier checks it)
        self.family, self.source = family, source
        self.tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
        self.encoder = StepEncoder(family, self.tokenizer, source, max_length)  # inputs fit: vLLM never refuses one
        vllm = import_vllm()
        self._params = vllm.PoolingParams(use_activation=False)  # raw logits: the family's squash is applied here
        kwargs: dict[str, Any] = {
            "model": path, "dtype": dtype, "trust_remote_code": trust_remote_code,
            "gpu_memory_utilization": gpu_memory_utilization or DEFAULT_GPU_MEMORY_UTILIZATION,
            "pooler_config": self._pooler_config(),
        }
        if batch_size:
            kwargs["max_num_seqs"] = batch_size
        if max_length:
            kwargs["max_model_len"] = max_length
        if family.head == "lm_tokens":  # the LM head's rows of the class tokens become a token classifier
            tokens = self.tokenizer.convert_ids_to_tokens(self.encoder.class_ids)
            kwargs |= {"convert": "classify",
                       "hf_overrides": {"classifier_from_token": tokens, "method": "no_post_processing"}}
        try:
            self.llm = vllm.LLM(runner="pooling", **kwargs)
        except TypeError as exc:  # an older vLLM: no runner / convert / pooler_config keywords
            raise BonbenchError(f"the installed vLLM cannot build a step-pooling engine ({str(exc)[:120]}): "
                                "pip install -U vllm, or use backend=hf") from None
        self.encode_calls = 0  # LLM.encode calls made; each sample is one request in one of them
        self.requests = 0  # requests sent: one per sample with steps (a test counts them)

    def _pooler_config(self) -> Any:
        from vllm.config import PoolerConfig

        try:
            return PoolerConfig(task="token_classify", tok_pooling_type="STEP", step_tag_id=self.encoder.mark_id)
        except TypeError as exc:
            raise BonbenchError(f"the installed vLLM has no token_classify step pooling ({str(exc)[:120]}): "
                                "pip install -U vllm, or use backend=hf") from None

    def encode(self, questions: Sequence[str], steps: Sequence[Sequence[str]]) -> list[Encoded]:
        """Every sample's input and read positions (tokenizer only)."""
        return [self.encoder.encode(q, s) for q, s in zip(questions, steps, strict=True)]

    def step_scores(self, questions: Sequence[str], steps: Sequence[Sequence[str]]) -> list[tuple[tuple[float, ...], int]]:
        """(per-step scores, tokens read) of every sample; a sample without steps reads nothing."""
        encoded = self.encode(questions, steps)
        out: list[tuple[tuple[float, ...], int]] = [((), 0)] * len(encoded)
        todo = [i for i, e in enumerate(encoded) if e.ids]
        if not todo:
            return out
        prompts = [{"prompt_token_ids": list(encoded[i].ids)} for i in todo]
        self.encode_calls += 1
        self.requests += len(prompts)
        results = self.llm.encode(prompts, pooling_task="token_classify", pooling_params=self._params, use_tqdm=False)
        for i, result in zip(todo, results, strict=True):
            out[i] = (self.step_probabilities(result.outputs.data, len(encoded[i].positions)), len(encoded[i].ids))
        return out

    def step_probabilities(self, logits: Any, steps: int) -> tuple[float, ...]:
        """P(step is right) of each row of the head's logits at the markers, as the ``hf`` engine computes it."""
        import torch

        rows = logits.float().reshape(logits.shape[0], -1)
        if rows.shape[0] != steps:  # the encoder found the same markers: only a vLLM change can break this
            raise BonbenchError(f"vLLM returned {rows.shape[0]} step scores for PRM {self.source!r} where the input "
                                f"has {steps} step markers: use backend=hf")
        f = self.family
        probs = torch.softmax(rows, dim=-1)[:, f.index] if f.squash == "softmax" else torch.sigmoid(rows[:, f.index])
        return tuple(float(v) for v in probs.tolist())
