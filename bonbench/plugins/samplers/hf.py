"""The transformers backend: n samples per prompt with one prefill and a custom decode loop.

How it is fast on CPU (platform-notes §3: 213-244 tok/s at n=32-64 vs 74 tok/s for ``generate``):

* requests are cut into chunks of at most ``batch_size`` rows (one row = one sample); the distinct
  prompts of a chunk are prefilled once, left-padded, keeping only the last position's logits;
* the KV cache is then gathered row-wise (``DynamicCache.batch_select_indices`` with repeated
  indices, i.e. a generalised ``batch_repeat_interleave``) so each prompt's cache is copied to its
  n rows without recomputing it;
* the next token is drawn by inverse-CDF sampling (softmax -> cumsum -> uniform -> searchsorted),
  because ``torch.multinomial`` over the 262k Gemma vocabulary costs 6x more on CPU;
* finished rows (EOS, stop string, max_tokens) leave the batch at once.

Randomness: every sample draws its uniforms from its own ``torch.Generator`` seeded from
``(seed, problem_id, sample_idx)``, so a sample does not depend on which other samples share its
batch, on ``batch_size`` or on resuming (up to floating-point differences of batched matmuls).

Log-probabilities (same convention as the vLLM backend, which runs with
``logprobs_mode="processed_logprobs"``): ``Sample.logprob`` is the sum over generated tokens of the
log-probability of the sampled token under the distribution actually sampled from, i.e. softmax of
``logits / temperature`` restricted to the top-p nucleus and renormalised. With temperature 0
(greedy) it is the raw model log-probability (temperature 1, no top-p). Tokens are counted up to and
including the EOS token or the last token of the stop string; the completion text is trimmed before
the stop string and never contains EOS.

This module does not batch across chunks (one chunk is one prefill plus one decode loop), does not
implement top-k, repetition penalties or beam search, and does not stream partial completions.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from bonbench.api.sampler import SampleRequest, SamplingParams, sample_seed
from bonbench.core.errors import BonbenchError
from bonbench.core.models import ResolvedModel
from bonbench.core.reasoning import reasoning_token_count
from bonbench.core.records import Prompt, Sample

try:
    import torch
except ImportError as exc:  # torch is a core dependency; a missing one is a broken install
    raise BonbenchError("the hf backend needs torch: install the CPU wheel first (see README), then pip install -e .") from exc


@dataclass(frozen=True)
class _Row:
    """One sample to produce: which request (by position in the chunk's prompt list) and which index."""

    prompt_pos: int
    problem_id: str
    sample_idx: int
    stop: tuple[str, ...]
    seed: int  # its own random stream: ``sample_seed`` of its key, or a search's seed of one continuation


def policy_logits(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """Float32 logits of the sampling policy: divided by ``temperature``, tokens outside the top-p
    nucleus set to -inf. Same rule as vLLM: sort ascending, drop tokens whose cumulative mass is
    <= 1 - top_p, always keep the most likely token."""
    scaled = logits.float()  # a copy for bf16/fp16 logits, the same tensor for fp32 ones
    if temperature != 1.0:
        scaled = scaled.div_(temperature) if scaled is not logits else scaled / temperature
    if top_p >= 1.0:
        return scaled
    sorted_logits, order = scaled.sort(dim=-1, descending=False)
    cum = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    drop = cum <= 1.0 - top_p
    drop[:, -1] = False
    sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
    return scaled.scatter(-1, order, sorted_logits)


def sample_tokens(
    logits: torch.Tensor, temperature: float, top_p: float, uniforms: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw one token per row by inverse-CDF sampling; returns (token ids, their policy log-probs).

    ``uniforms`` holds one U[0,1) number per row. ``temperature <= 0`` means greedy decoding.
    """
    if temperature <= 0:
        logp = logits.float().log_softmax(dim=-1)
        tokens = logp.argmax(dim=-1)
        return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1)
    pol = policy_logits(logits, temperature, top_p)
    # Unnormalised CDF of exp(x - max), cumsum in place: every pass over a 64 x 262k tensor costs
    # ~10 ms on two cores, so normalising (softmax) and a separate logsumexp are skipped; the
    # total mass cdf[:, -1] does both jobs.
    top = pol.max(dim=-1, keepdim=True).values
    cdf = (pol - top).exp_()
    torch.cumsum(cdf, dim=-1, out=cdf)
    total = cdf[:, -1:]
    # right=True: a zero-probability token has cdf[i] == cdf[i-1], so no u can land on it.
    target = uniforms.to(cdf.device, cdf.dtype)[:, None] * total
    tokens = torch.searchsorted(cdf, target, right=True).clamp_(max=cdf.shape[-1] - 1)
    logp = (pol.gather(-1, tokens) - top - total.log()).squeeze(-1)
    return tokens.squeeze(-1), logp


def find_stop(text: str, stops: Sequence[str]) -> int | None:
    """Index of the earliest occurrence of any stop string in ``text`` (None if none occurs)."""
    hits = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    return min(hits) if hits else None


class HFSampler:
    """Sampler protocol implementation on transformers (CPU or CUDA)."""

    name = "hf"

    def __init__(
        self,
        model: ResolvedModel,
        *,
        seed: int,
        dtype: str = "bfloat16",
        batch_size: int = 64,
        device: str | None = None,
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        assert batch_size >= 1, "batch_size must be positive"
        self.model = model.name
        self.is_chat = model.is_chat
        self.fingerprint = model.fingerprint
        self.seed = seed
        self.batch_size = batch_size
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        if not hasattr(torch, dtype):
            raise BonbenchError(f"unknown dtype '{dtype}': use bfloat16, float16 or float32")
        try:
            # Any: transformers' annotations (decode's str | list, the wrapped .to) do not fit these calls
            self.tokenizer: Any = AutoTokenizer.from_pretrained(model.path, revision=model.revision)
            self.lm: Any = AutoModelForCausalLM.from_pretrained(model.path, revision=model.revision,
                                                                dtype=getattr(torch, dtype))
        except OSError as exc:
            raise BonbenchError(f"cannot load model '{model.name}' from {model.path}: {exc}".splitlines()[0]) from exc
        self.lm.to(self.device).eval()  # type: ignore[arg-type]  # transformers annotates the wrapped .to as taking the model
        self.eos_ids = _eos_ids(self.lm, self.tokenizer)
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else (min(self.eos_ids) if self.eos_ids else 0)

    @classmethod
    def from_loaded(cls, lm: Any, tokenizer: Any, *, name: str, fingerprint: str, is_chat: bool, seed: int,
                    batch_size: int = 64) -> HFSampler:
        """A sampler over a model already in memory (the trainer's live weights, LoRA included); the
        caller keeps ownership: ``close`` drops the reference, it does not free the model."""
        self = cls.__new__(cls)
        self.model, self.is_chat, self.fingerprint, self.seed, self.batch_size = name, is_chat, fingerprint, seed, batch_size
        self.device = next(lm.parameters()).device
        self.tokenizer, self.lm = tokenizer, lm
        self.eos_ids = _eos_ids(lm, tokenizer)
        pad = tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else (min(self.eos_ids) if self.eos_ids else 0)
        return self

    # ------------------------------------------------------------------ protocol

    def generate(self, requests: Sequence[SampleRequest], params: SamplingParams) -> Iterator[list[Sample]]:
        """Yield the samples of each chunk of at most ``batch_size`` rows as soon as it is done."""
        assert params.seed == self.seed, (
            f"SamplingParams.seed={params.seed} but the sampler was built with seed={self.seed}; "
            "build both from the run's seed"
        )
        for chunk in _chunks(requests, self.batch_size):
            prompts = [self._encode(req.prompt) for req, _ in chunk]
            rows = [
                _Row(pos, req.problem_id, idx, tuple(dict.fromkeys(params.stop + req.prompt.stop)),
                     sample_seed(self.seed, req.problem_id, idx))
                for pos, (req, idxs) in enumerate(chunk)
                for idx in idxs
            ]
            yield self._run(prompts, rows, params)[0]

    def continue_texts(self, texts: Sequence[str], seeds: Sequence[int],
                       params: SamplingParams) -> list[tuple[Sample, bool]]:
        """Continue raw ``texts`` (a search's prefixes: a base prompt and the steps so far), row i
        drawn from ``seeds[i]``; each sample comes with whether it stopped at one of ``params.stop``
        (else at EOS or max tokens). The samples' keys are ("search", i)."""
        out: list[tuple[Sample, bool]] = []
        for start in range(0, len(texts), self.batch_size):
            chunk = texts[start:start + self.batch_size]
            prompts = [list(self.tokenizer(t, add_special_tokens=True)["input_ids"]) for t in chunk]
            rows = [_Row(i, "search", start + i, params.stop, seeds[start + i]) for i in range(len(chunk))]
            samples, at_stop = self._run(prompts, rows, params)
            out += zip(samples, at_stop, strict=True)
        return out

    def close(self) -> None:
        self.lm = None
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    # ------------------------------------------------------------------ internals

    def _encode(self, prompt: Prompt) -> list[int]:
        if prompt.messages is None:
            return list(self.tokenizer(prompt.text, add_special_tokens=True)["input_ids"])
        if not getattr(self.tokenizer, "chat_template", None):
            raise BonbenchError(
                f"model '{self.model}' has no chat template but the prompt is a chat: use a base (few-shot) prompt style"
            )
        text = self.tokenizer.apply_chat_template(list(prompt.messages), add_generation_prompt=True, tokenize=False)
        # the template already writes BOS; adding special tokens again would double it
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _prefill(self, prompts: list[list[int]], gather: list[int]) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Prefill the distinct ``prompts`` once (left-padded) and copy each one's state to the rows
        ``gather`` names (row r continues prompt ``gather[r]``).

        Returns (cache, next-token logits, attention mask, next position), one row per sample.
        """
        from transformers import DynamicCache

        dev = self.device
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):  # left padding: every prompt ends at the last column
            ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            mask[i, width - len(p) :] = 1
        ids, mask = ids.to(dev), mask.to(dev)
        pos = (mask.cumsum(-1) - 1).clamp_(min=0)
        cache = DynamicCache(config=self.lm.config)
        out = self.lm(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache, use_cache=True,
                      logits_to_keep=1)
        sel = torch.tensor(gather, dtype=torch.long, device=dev)
        cache.batch_select_indices(sel)
        return cache, out.logits[:, -1, :].index_select(0, sel), mask.index_select(0, sel), pos[:, -1].index_select(0, sel) + 1

    def _step(self, cache: Any, tokens: torch.Tensor, mask: torch.Tensor,
              next_pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Feed one token per row; returns (next-token logits, the grown attention mask)."""
        mask = torch.cat([mask, mask.new_ones((len(tokens), 1))], dim=-1)
        out = self.lm(input_ids=tokens[:, None], attention_mask=mask, position_ids=next_pos[:, None], past_key_values=cache,
                      use_cache=True)
        return out.logits[:, -1, :], mask

    @torch.inference_mode()
    def _run(self, prompts: list[list[int]], rows: list[_Row], params: SamplingParams) -> tuple[list[Sample], list[bool]]:
        """Every row's sample, and whether it stopped at a stop string (``continue_texts``)."""
        dev = self.device
        if params.max_tokens <= 0:
            return ([Sample(r.problem_id, r.sample_idx, "", 0, "length", 0.0, len(prompts[r.prompt_pos])) for r in rows],
                    [False] * len(rows))
        cache, logits, mask, next_pos = self._prefill(prompts, [r.prompt_pos for r in rows])

        gens = [torch.Generator().manual_seed(r.seed) for r in rows]
        at_stop = [False] * len(rows)
        tokens: list[list[int]] = [[] for _ in rows]
        logps = [0.0] * len(rows)
        done: dict[int, Sample] = {}
        active = list(range(len(rows)))  # active[j] = row index of batch position j
        eos = torch.tensor(sorted(self.eos_ids), dtype=torch.long, device=dev)
        any_stop = any(r.stop for r in rows)
        tail = 4 * max((len(s) for r in rows for s in r.stop), default=0) + 4

        for step in range(params.max_tokens):
            u = torch.cat([torch.rand(1, generator=gens[i]) for i in active])
            new, lp = sample_tokens(logits, params.temperature, params.top_p, u)
            new_l, lp_l = new.tolist(), lp.tolist()
            is_eos = torch.isin(new, eos).tolist() if len(eos) else [False] * len(active)
            keep: list[int] = []
            for j, i in enumerate(active):
                tokens[i].append(new_l[j])
                logps[i] += lp_l[j]
                reason = None
                cut: int | None = None
                if is_eos[j]:
                    reason = "stop"
                elif any_stop and rows[i].stop:
                    tail_text = self.tokenizer.decode(tokens[i][-tail:], skip_special_tokens=True)
                    if find_stop(tail_text, rows[i].stop) is not None:
                        full = self.tokenizer.decode(tokens[i], skip_special_tokens=True)
                        cut = find_stop(full, rows[i].stop)
                        reason = "stop" if cut is not None else None
                if reason is None and step == params.max_tokens - 1:
                    reason = "length"
                if reason is None:
                    keep.append(j)
                    continue
                text = self.tokenizer.decode(tokens[i], skip_special_tokens=True)
                if cut is not None:
                    text, at_stop[i] = text[:cut], True
                r = rows[i]
                done[i] = Sample(r.problem_id, r.sample_idx, text, len(tokens[i]), reason, logps[i],
                                 prompt_tokens=len(prompts[r.prompt_pos]),
                                 reasoning_tokens=reasoning_token_count(tokens[i], text, self.tokenizer))
            if not keep:
                break
            if len(keep) < len(active):
                sel = torch.tensor(keep, dtype=torch.long, device=dev)
                cache.batch_select_indices(sel)
                mask, next_pos, new = mask.index_select(0, sel), next_pos.index_select(0, sel), new.index_select(0, sel)
                active = [active[j] for j in keep]
            logits, mask = self._step(cache, new, mask, next_pos)
            next_pos = next_pos + 1
        assert len(done) == len(rows), "every row of a chunk must finish"
        return [done[i] for i in range(len(rows))], at_stop


def _chunks(requests: Sequence[SampleRequest], size: int) -> Iterator[list[tuple[SampleRequest, tuple[int, ...]]]]:
    """Cut requests into chunks of at most ``size`` rows; a request with more indices spans chunks."""
    chunk: list[tuple[SampleRequest, tuple[int, ...]]] = []
    room = size
    for req in requests:
        idxs = tuple(req.sample_indices)
        while idxs:
            take, idxs = idxs[:room], idxs[room:]
            chunk.append((req, take))
            room -= len(take)
            if room == 0:
                yield chunk
                chunk, room = [], size
    if chunk:
        yield chunk


def _eos_ids(lm: Any, tokenizer: Any) -> set[int]:
    ids: set[int] = set()
    gen = getattr(lm, "generation_config", None)
    eos = getattr(gen, "eos_token_id", None) if gen is not None else None
    for value in (eos, tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif value:
            ids.update(int(v) for v in value)
    return ids
