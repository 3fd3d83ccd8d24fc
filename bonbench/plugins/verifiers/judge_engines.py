"""The two engines of an LLM judge: a served model (any OpenAI-compatible endpoint) and a local one.

Each engine does two things in batches, and counts what it spent:
- ``reads(texts)``: the top log-probabilities of the token after each text (the verdict token);
- ``rationales(texts, seeds)``: one sampled continuation of each text (GenRM-CoT's rationale).

``ServedJudge`` sends one request per read or rationale through the served-model client
(``bonbench.core.served``: retries, Retry-After, a deadline per try, failover across endpoints):
``/v1/completions`` with ``logprobs=top`` and ``max_tokens=1`` (or ``/v1/chat/completions`` with
``top_logprobs``, ``api=chat``). Its ``tokens`` are the server's usage counts (prompt + completion)
and each request is one call. An answer without log-probabilities is a one-line error, not retried:
a server that drops them will keep dropping them. ``LocalJudge`` runs transformers: one forward of a
right-padded batch per read (right padding: a causal model never attends to the pads, so a batch
gives the scores batch size 1 gives), ``top`` of the log-softmax at each text's last token; a
rationale is sampled with ``generate`` from its own seed (batch 1), each new token one forward.

Neither engine builds prompts or turns log-probabilities into a score (``judge_prompt`` does).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bonbench.core.errors import BonbenchError
from bonbench.core.models import ResolvedModel
from bonbench.core.served import OpenAIOptions, Warnings, answer_of, on_endpoints, with_retries
from bonbench.core.served_answers import choices_of


@dataclass(frozen=True)
class Read:
    """The top ``(token, logprob)`` pairs of the verdict token, and what reading them cost."""

    top: tuple[tuple[str, float], ...]
    tokens: int | None
    calls: int


@dataclass(frozen=True)
class Rationale:
    """A sampled rationale and what sampling it cost (tokens read and generated)."""

    text: str
    tokens: int | None
    calls: int


def rationale_seed(seed: int, problem_id: str, sample_idx: int, j: int) -> int:
    """The seed of the ``j``-th rationale about one sample (independent of batches and endpoints)."""
    digest = hashlib.sha256(f"{seed}\0judge\0{problem_id}\0{sample_idx}\0{j}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & 0x7FFF_FFFF_FFFF_FFFF


def _cut(text: str, stop: Sequence[str]) -> str:
    cut = min((text.find(s) for s in stop if s and s in text), default=-1)
    return text[:cut] if cut >= 0 else text


def _usage_tokens(usage: Any) -> int | None:
    if not isinstance(usage, Mapping):
        return None
    counts = [usage.get("prompt_tokens"), usage.get("completion_tokens")]
    return sum(int(c) for c in counts if isinstance(c, int)) if isinstance(counts[0], int) else None


def _top_of(choice: Mapping[str, Any], chat: bool) -> tuple[tuple[str, float], ...] | None:
    """The first token's top log-probabilities in a choice, or None when the server sent none."""
    lp = choice.get("logprobs")
    if not isinstance(lp, Mapping):
        return None
    if chat:
        content = lp.get("content")
        first = content[0] if isinstance(content, list) and content and isinstance(content[0], Mapping) else {}
        pairs = [(str(t["token"]), float(t["logprob"])) for t in first.get("top_logprobs") or ()
                 if isinstance(t, Mapping) and isinstance(t.get("logprob"), (int, float))]
    else:
        tops = lp.get("top_logprobs")
        first = tops[0] if isinstance(tops, list) and tops and isinstance(tops[0], Mapping) else {}
        pairs = [(str(t), float(v)) for t, v in first.items() if isinstance(v, (int, float))]
    return tuple(pairs) or None


class NoLogprobs(BonbenchError):
    """A judge endpoint answered without top log-probabilities."""


class ServedJudge:
    """A judge served by OpenAI-compatible endpoints (``model``: the served model id)."""

    def __init__(self, model: str, options: OpenAIOptions, *, top: int, chat: bool, seed: int) -> None:
        self.model, self.options, self.top, self.chat, self.seed = model, options, top, chat, seed

    def _no_logprobs(self, ep: str) -> NoLogprobs:
        return NoLogprobs(f"judge endpoint {ep} answered without log-probabilities: serve the judge with "
                          f"log-probabilities on (vLLM: --max-logprobs {self.top} or more), or use another endpoint")

    async def _request(self, ep: str, api: Any, text: str, warn: Warnings, **params: Any) -> tuple[Mapping[str, Any], Any]:
        async def call() -> tuple[Mapping[str, Any], Any]:
            if self.chat:
                raw = await api.chat.completions.with_raw_response.create(
                    model=self.model, messages=[{"role": "user", "content": text}], n=1, **params)
            else:
                raw = await api.completions.with_raw_response.create(model=self.model, prompt=text, n=1, **params)
            doc = await answer_of(raw)
            return choices_of(doc, 1, self.chat)[0], doc.get("usage")

        return await with_retries(ep, self.options, call, warn)

    def _logprob_params(self) -> dict[str, Any]:
        return {"logprobs": True, "top_logprobs": self.top} if self.chat else {"logprobs": self.top}

    def reads(self, texts: Sequence[str]) -> list[Read]:
        async def read(ep: str, api: Any, job: tuple[int, str], warn: Warnings) -> tuple[int, Read]:
            # temperature 1: the sampled token is ignored, and vLLM's processed log-probabilities
            # equal the model's only when no temperature or truncation is applied
            choice, usage = await self._request(ep, api, job[1], warn, max_tokens=1, temperature=1.0, seed=self.seed,
                                                **self._logprob_params())
            top = _top_of(choice, self.chat)
            if top is None:
                raise self._no_logprobs(ep)
            return job[0], Read(top, _usage_tokens(usage), 1)

        got = dict(on_endpoints(list(enumerate(texts)), self.options, read))
        return [got[i] for i in range(len(texts))]

    def rationales(self, texts: Sequence[str], seeds: Sequence[int], *, temperature: float, max_tokens: int,
                   stop: Sequence[str]) -> list[Rationale]:
        async def sample(ep: str, api: Any, job: tuple[int, str, int], warn: Warnings) -> tuple[int, Rationale]:
            params: dict[str, Any] = {"max_tokens": max_tokens, "temperature": temperature, "seed": job[2]}
            if stop:
                params["stop"] = list(stop)
            choice, usage = await self._request(ep, api, job[1], warn, **params)
            if self.chat:
                content = choice["message"].get("content")
                text = content if isinstance(content, str) else ""
            else:
                text = choice.get("text") or ""
            return job[0], Rationale(_cut(text, stop), _usage_tokens(usage), 1)

        jobs = [(i, t, s) for i, (t, s) in enumerate(zip(texts, seeds, strict=True))]
        got = dict(on_endpoints(jobs, self.options, sample))
        return [got[i] for i in range(len(texts))]


class LocalJudge:
    """A judge run in this process by transformers (a local folder, a hub id or the embedded model)."""

    def __init__(self, model: ResolvedModel, *, top: int, batch_size: int, device: str, dtype: str) -> None:
        self.resolved, self.top, self.batch_size, self.device, self.dtype = model, top, batch_size, device, dtype
        self._loaded: tuple[Any, Any] | None = None

    def _load(self) -> tuple[Any, Any]:
        if self._loaded is None:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tok = AutoTokenizer.from_pretrained(self.resolved.path, revision=self.resolved.revision)
            model: Any = AutoModelForCausalLM.from_pretrained(self.resolved.path, revision=self.resolved.revision,
                                                              dtype=getattr(torch, self.dtype))
            self._loaded = (tok, model.to(self.device).eval())
        return self._loaded

    def reads(self, texts: Sequence[str]) -> list[Read]:
        import torch

        tok, model = self._load()
        out: list[Read] = []
        for start in range(0, len(texts), self.batch_size):
            ids = [tok(t)["input_ids"] for t in texts[start:start + self.batch_size]]
            width = max(len(i) for i in ids)
            pad = tok.pad_token_id if tok.pad_token_id is not None else 0
            batch = torch.tensor([i + [pad] * (width - len(i)) for i in ids])
            mask = torch.tensor([[1] * len(i) + [0] * (width - len(i)) for i in ids])
            with torch.no_grad():
                logits = model(input_ids=batch.to(self.device), attention_mask=mask.to(self.device)).logits
            last = logits[torch.arange(len(ids)), torch.tensor([len(i) - 1 for i in ids])].float().cpu()
            values, index = torch.log_softmax(last, dim=-1).topk(min(self.top, last.shape[-1]), dim=-1)
            for row, (v, ix) in enumerate(zip(values.tolist(), index.tolist(), strict=True)):
                out.append(Read(tuple((tok.decode([t]), lp) for t, lp in zip(ix, v, strict=True)), len(ids[row]), 1))
        return out

    def rationales(self, texts: Sequence[str], seeds: Sequence[int], *, temperature: float, max_tokens: int,
                   stop: Sequence[str]) -> list[Rationale]:
        import torch

        tok, model = self._load()
        out = []
        for text, seed in zip(texts, seeds, strict=True):
            ids = torch.tensor([tok(text)["input_ids"]], device=self.device)
            torch.manual_seed(seed)  # seeds the CUDA generators too
            with torch.no_grad():
                gen = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True,
                                     temperature=temperature, top_p=1.0, top_k=0, max_new_tokens=max_tokens,
                                     pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
            new = gen[0, ids.shape[1]:].tolist()
            out.append(Rationale(_cut(tok.decode(new, skip_special_tokens=True), stop), ids.shape[1] + len(new),
                                 max(len(new), 1)))
        return out
