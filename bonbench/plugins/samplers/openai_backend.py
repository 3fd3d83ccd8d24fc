"""The ``openai`` backend: sample from OpenAI-compatible servers (``vllm serve``, SGLang, TGI, ...).

Plain-text prompts go to ``/v1/completions``, chat prompts (``Prompt.messages``) to
``/v1/chat/completions``, through the maintained ``openai`` client (``AsyncOpenAI``, driven by an
asyncio loop that ``generate`` runs step by step in the calling thread).

Requests: one HTTP request per sample (``n=1``) with ``seed`` = ``sample_seed(run seed, problem_id,
sample_idx)`` (``bonbench.api.sampler``), the per-sample seed the hf backend uses too. So a sample's
seed never depends on which other samples were missing, which endpoint drew it or in what order: a
resumed or grown run asks for the
same seeds it would have asked for in one go. Whether the same seed gives the same text is the
server's business (vLLM: yes for the same model, batch effects aside). Prefix sharing across a
problem's n samples is left to the server's prefix cache (on by default in vLLM).

Work sharing, retries and failover are the served-model client's (``bonbench.core.served``, shared
with the LLM judge): every ``--endpoint`` gets ``concurrency`` workers that pull from one queue, so a
faster endpoint takes more work; connection errors, timeouts, 429 and 5xx, and bad answers (malformed
JSON, an HTML page with status 200, a choice count other than n: ``bonbench.core.served_answers``)
are retried with backoff or after the server's ``Retry-After``, each try under a total deadline
(``--request-timeout``, default 120 s); an endpoint that exhausts its tries is dropped and the
surviving endpoints finish the work. The choice count is checked inside the retried call.
Samples are yielded one by one as they arrive, so the run store keeps every finished one.

Log-probabilities: ``logprobs=0`` (completions) / ``logprobs=True, top_logprobs=0`` (chat) and
``Sample.logprob`` = the sum of the returned token log-probabilities, ``n_tokens`` their count (else
the usage count). They are what the server reports: start vLLM with
``--logprobs-mode processed_logprobs`` to get the vllm backend's convention (the sampling policy's
log-probability); vLLM's default reports the raw model's. A stop string the server did not honour
is cut here as well (text only; the token count and log-probability stay the server's).
``Sample.reasoning_tokens``: the server's ``completion_tokens_details.reasoning_tokens`` when it gives
one (OpenAI's reasoning models; ``n_tokens`` is then ``completion_tokens``, trace included), else the
returned tokens up to the last ``</think>`` of the text, else None.

This module does not start servers, render prompts or choose the backend (``select.py`` does).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bonbench.api.sampler import SampleRequest, SamplingParams, sample_seed
from bonbench.core.models import ResolvedModel
from bonbench.core.reasoning import reasoning_piece_count
from bonbench.core.records import Prompt, Sample
from bonbench.core.served import OpenAIOptions, Warnings, answer_of, check_options, on_endpoints, with_retries
from bonbench.core.served_answers import choices_of


@dataclass(frozen=True)
class _Job:
    prompt: Prompt
    sample_idx: int


class OpenAISampler:
    """Sampler protocol implementation on OpenAI-compatible HTTP servers."""

    name = "openai"

    def __init__(self, model: ResolvedModel, *, seed: int, options: OpenAIOptions) -> None:
        check_options(options)
        self.model = model.name
        self.root = model.path  # the model folder or hub id the servers report: where a step sampler finds its tokenizer
        self.is_chat = model.is_chat
        self.fingerprint = model.fingerprint
        self.seed = seed
        self.options = options
        self.requests_per_endpoint: dict[str, int] = {ep: 0 for ep in options.endpoints}
        self.endpoints_down: list[str] = []  # endpoints dropped by failover, in the order they went down

    def generate(self, requests: Sequence[SampleRequest], params: SamplingParams) -> Iterator[list[Sample]]:
        """Draw every requested sample (one HTTP request each) and yield each as it arrives.

        If the consumer stops early (an exception, ``close()`` of the generator), requests in flight
        are cancelled and their samples are lost (they were not stored, so a rerun asks for them again).
        """
        assert params.seed == self.seed, (
            f"SamplingParams.seed={params.seed} but the sampler was built with seed={self.seed}; "
            "build both from the run's seed"
        )
        jobs = [_Job(r.prompt, i) for r in requests for i in r.sample_indices]

        async def draw(ep: str, api: Any, job: _Job, warn: Warnings) -> Sample:
            return await self._draw(ep, api, job, params, warn)

        for sample in on_endpoints(jobs, self.options, draw, on_down=self.endpoints_down.append):
            yield [sample]

    def close(self) -> None:
        return None

    # ------------------------------------------------------------------ internals

    async def _draw(self, ep: str, client: Any, job: _Job, params: SamplingParams, warn: Warnings) -> Sample:
        """One sample from endpoint ``ep``."""
        prompt = job.prompt
        stop = list(dict.fromkeys(params.stop + prompt.stop))
        common: dict[str, Any] = dict(model=self.model, n=1, temperature=params.temperature, top_p=params.top_p,
                                      max_tokens=params.max_tokens,
                                      seed=sample_seed(self.seed, prompt.problem_id, job.sample_idx))
        if stop:
            common["stop"] = stop

        chat = prompt.messages is not None

        async def call() -> Mapping[str, Any]:
            self.requests_per_endpoint[ep] += 1
            if not chat:
                raw = await client.completions.with_raw_response.create(prompt=prompt.text, logprobs=0, **common)
            else:
                raw = await client.chat.completions.with_raw_response.create(
                    messages=list(prompt.messages or ()), logprobs=True, top_logprobs=0, **common)
            doc = await answer_of(raw)
            # checked inside the retried call: a server that answers 3 choices (or none) to n = 1 is
            # as broken as one sending HTML, and the next try may be answered by a healthy replica
            return {"choice": choices_of(doc, 1, chat)[0], "usage": doc.get("usage")}

        got = await with_retries(ep, self.options, call, warn)
        choice, usage = got["choice"], got["usage"]
        lp = choice.get("logprobs") if isinstance(choice.get("logprobs"), Mapping) else {}
        if not chat:
            text = choice.get("text") or ""
            token_lps = list(lp["token_logprobs"]) if isinstance(lp.get("token_logprobs"), list) else None
            pieces = lp.get("tokens")
        else:
            text = ((choice["message"].get("content") or "")
                    if isinstance(choice["message"].get("content"), (str, type(None))) else "")
            content = lp.get("content")
            token_lps = ([c.get("logprob") for c in content if isinstance(c, Mapping)]
                         if isinstance(content, list) and content else None)
            pieces = [c.get("token") for c in content if isinstance(c, Mapping)] if isinstance(content, list) else None
        completion_tokens = usage.get("completion_tokens") if isinstance(usage, Mapping) else None
        prompt_tokens = usage.get("prompt_tokens") if isinstance(usage, Mapping) else None
        n_tokens = len(token_lps) if token_lps is not None else int(completion_tokens or 0)
        logprob = float(sum(x for x in token_lps if isinstance(x, (int, float)))) if token_lps is not None else None
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        cut = min((text.find(s) for s in stop if s and s in text), default=-1)
        if cut >= 0:  # a server that ignored the stop strings
            text, finish = text[:cut], "stop"
        reasoning = served_reasoning(usage)
        if reasoning is not None and isinstance(completion_tokens, int):
            n_tokens = completion_tokens  # the logprobs cover the visible answer only
        else:
            reasoning = piece_reasoning(pieces, text)
        return Sample(problem_id=prompt.problem_id, sample_idx=job.sample_idx, completion=text, n_tokens=n_tokens,
                      finish_reason=finish, logprob=logprob, reasoning_tokens=reasoning,
                      prompt_tokens=prompt_tokens if isinstance(prompt_tokens, int) else None)


def served_reasoning(usage: Any) -> int | None:
    """The server's own count of reasoning tokens (``usage.completion_tokens_details.reasoning_tokens``: OpenAI's
    reasoning models, whose trace is not in the text but is in ``completion_tokens``); None when it gives none."""
    details = usage.get("completion_tokens_details") if isinstance(usage, Mapping) else None
    counted = details.get("reasoning_tokens") if isinstance(details, Mapping) else None
    return counted if isinstance(counted, int) and counted > 0 else None


def piece_reasoning(pieces: Any, text: str) -> int | None:
    """The sampled tokens' texts up to the last ``</think>`` (``bonbench.core.reasoning``); None without them."""
    if isinstance(pieces, list) and pieces and all(isinstance(x, str) for x in pieces) and "".join(pieces) == text:
        return reasoning_piece_count(pieces, text)
    return None
