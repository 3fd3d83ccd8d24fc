"""A step sampler over OpenAI-compatible servers: continue a search's prefixes to the next step delimiter.

``OpenAIStepSampler`` wraps an ``OpenAISampler`` (its model, endpoints and client settings) as a
``bonbench.api.search.contract.StepSampler``, with ``HFStepSampler``'s semantics: a prefix's text
is the prompt followed by the steps so far, each ended by the delimiter; the continuation stops at
the next delimiter (finish ``"step"``, the delimiter cut off), at EOS (``"end"``) or at max tokens
(``"length"``); a ``to_end`` prefix runs with no stop string, a ``greedy`` one at temperature 0.

Requests: one ``/v1/completions`` request per prefix (``n=1``) with ``stop`` = [delimiter] and
``seed`` = the prefix's seed, spread over the endpoints and retried exactly as the openai backend's
samples are (``bonbench.core.served``: backoff, Retry-After, the total ``--request-timeout``,
failover to the surviving endpoints).

Step or end: a server answers ``finish_reason: "stop"`` for a stop string and for EOS alike. The
rule: ``"length"`` is ``"length"``; a ``"stop"`` is ``"step"`` when the server names the stop
string it matched and it is the delimiter (vLLM's ``stop_reason``, SGLang's ``matched_stop``), else
``"end"`` (vLLM names None at EOS, or the EOS token's id). A server that names neither cannot tell a
step from the end of a solution, so it is refused before sampling, as is one that ignores or
rejects ``stop``: the constructor sends each endpoint one probe request (a count the model is sure
to continue with a space, greedy, ``stop`` = [" "]) and a server whose answer does not stop there
and say so is one error line naming what it lacks.

The ledger: ``prompt_tokens`` is the server's ``usage.prompt_tokens``; ``cached_tokens`` its
``usage.prompt_tokens_details.cached_tokens`` (vLLM reports it with ``--enable-prompt-tokens-details``;
0 when the server does not say). Prefix caching is the server's (on by default in vLLM).

Chat prompts (``--prompt-style chat``) go to ``/v1/completions`` too: ``prompt_text`` renders the
messages here through the chat template of the model's tokenizer, loaded from the folder or hub id
the servers report (``GET /v1/models``' ``root``, else the served model id) from this machine's
disk or Hugging Face cache, never the network (``step_prompts``: the same text the hf and vllm
step samplers continue). A tokenizer that is not here, or one without a chat template, is one error
line naming the fix before the first continuation. ``/v1/chat/completions`` is not used: a partial
assistant turn can be continued there only through vLLM's ``continue_final_message=True`` with
``add_generation_prompt=False``, which renders through transformers' ``apply_chat_template``, and
that cuts the rendered chat at the end of the final message, trailing whitespace stripped when the
template trims the message (Gemma's ``| trim``): a partial solution ending in the delimiter
``"\n\n"`` would be continued without it. SGLang and other servers offer no such option.

What it does not do: start servers, or check that a seed reproduces a text (the server's business,
as for the openai backend).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bonbench.api.sampler import SamplingParams
from bonbench.api.search.records import Continuation, Finish, Prefix, cut_at_task_stop
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Prompt
from bonbench.core.served import Warnings, answer_of, client, on_endpoints, with_retries
from bonbench.core.served_answers import choices_of
from bonbench.plugins.samplers.openai_backend import OpenAISampler
from bonbench.plugins.samplers.step_prompts import chat_prefix_text

PROBE_PROMPT = "One, two, three, four, five, six, seven,"  # every model continues with " eight": a space at once
PROBE_STOP = " "
STOP_NAMES = ("stop_reason", "matched_stop")  # vLLM's and SGLang's name for the stop string a choice ended at


@dataclass(frozen=True)
class _Job:
    index: int
    prefix: Prefix


class OpenAIStepSampler:
    """The step sampler over ``sampler``'s servers with ``params`` (temperature, top_p, max_tokens per step)
    (module docstring). Building one probes every endpoint for stop-string support."""

    def __init__(self, sampler: OpenAISampler, params: SamplingParams, delimiter: str = "\n\n") -> None:
        if not delimiter:
            raise ValueError("a step sampler needs a non-empty step delimiter")
        self.sampler, self.params, self.delimiter = sampler, params, delimiter
        self.tokenizer: Any = None  # loaded at the first chat prompt (module docstring)
        self.probe()

    def prompt_text(self, prompt: Prompt) -> str:
        """A base prompt's text, or a chat prompt through the model's chat template, rendered here (module docstring)."""
        if prompt.messages is None:
            assert prompt.text is not None, "a Prompt has text or messages"
            return prompt.text
        if self.tokenizer is None:
            self.tokenizer = served_tokenizer(self.sampler.root, self.sampler.model)
        return chat_prefix_text(self.tokenizer, prompt.messages, self.sampler.model)

    def text(self, prefix: Prefix) -> str:
        """What the model continues: the prompt and the steps so far, each ended by the delimiter."""
        return prefix.prompt + "".join(step + self.delimiter for step in prefix.steps)

    def continue_prefixes(self, prefixes: Sequence[Prefix]) -> list[Continuation]:
        jobs = [_Job(i, p) for i, p in enumerate(prefixes)]
        out: dict[int, Continuation] = {}

        async def draw(ep: str, api: Any, job: _Job, warn: Warnings) -> tuple[int, Continuation]:
            return job.index, await self._draw(ep, api, job.prefix, warn)

        for index, cont in on_endpoints(jobs, self.sampler.options, draw, on_down=self.sampler.endpoints_down.append):
            out[index] = cont
        return [out[i] for i in range(len(prefixes))]

    def probe(self) -> None:
        """One greedy request per endpoint that must stop at a space and name the stop string it
        matched; else one error line naming what the server lacks (module docstring)."""
        opts = self.sampler.options

        async def ask_all() -> list[tuple[str, Mapping[str, Any]]]:
            answers = []
            for ep in opts.endpoints:
                api = client(ep, opts)
                try:
                    async def call(api: Any = api) -> Mapping[str, Any]:  # this endpoint's client
                        raw = await api.completions.with_raw_response.create(
                            model=self.sampler.model, prompt=PROBE_PROMPT, n=1, temperature=0.0, max_tokens=16,
                            seed=0, stop=[PROBE_STOP])
                        return choices_of(await answer_of(raw), 1, False)[0]

                    answers.append((ep, await with_retries(ep, opts, call)))
                finally:
                    await api.close()
            return answers

        try:
            answers = asyncio.run(ask_all())
        except BonbenchError as exc:  # a server that rejects `stop` or `seed` answers 400 here
            raise BonbenchError(f"a search needs stop strings and seeds, and the probe failed: {exc}") from None
        for ep, choice in answers:
            text = choice.get("text") or ""
            if PROBE_STOP in text:
                raise BonbenchError(f"endpoint {ep} ignores stop strings (it answered {text[:40]!r} past stop "
                                    f"{PROBE_STOP!r}), which a search needs: serve the model with vllm serve or sglang")
            if choice.get("finish_reason") != "stop" or _matched_stop(choice) != PROBE_STOP:
                raise BonbenchError(f"endpoint {ep} does not say which stop string ended a completion "
                                    f"(no {' or '.join(STOP_NAMES)}), so a search cannot tell a step from the end "
                                    "of a solution: serve the model with vllm serve or sglang")

    async def _draw(self, ep: str, api: Any, prefix: Prefix, warn: Warnings) -> Continuation:
        """One prefix's continuation from endpoint ``ep``."""
        body: dict[str, Any] = dict(model=self.sampler.model, prompt=self.text(prefix), n=1,
                                    temperature=0.0 if prefix.greedy else self.params.temperature,
                                    top_p=self.params.top_p, max_tokens=self.params.max_tokens, seed=prefix.seed)
        if not prefix.to_end:
            body["stop"] = [self.delimiter]
        elif self.params.stop:  # a solution run to its end still ends where the task's run would
            body["stop"] = list(self.params.stop)

        async def call() -> Mapping[str, Any]:
            self.sampler.requests_per_endpoint[ep] += 1
            doc = await answer_of(await api.completions.with_raw_response.create(**body))
            return {"choice": choices_of(doc, 1, False)[0], "usage": doc.get("usage")}

        got = await with_retries(ep, self.sampler.options, call, warn)
        return cut_at_task_stop(prefix, continuation(got["choice"], got["usage"], self.delimiter, to_end=prefix.to_end),
                                self.params.stop, self.delimiter)


def continuation(choice: Mapping[str, Any], usage: Any, delimiter: str, *, to_end: bool) -> Continuation:
    """A ``Continuation`` from one completion choice and the answer's usage (the rule: module docstring)."""
    text = choice.get("text") or ""
    finish: Finish
    if not to_end and delimiter in text:  # a server that stopped honouring stop after the probe
        text, finish = text[:text.index(delimiter)], "step"
    elif choice.get("finish_reason") == "length":
        finish = "length"
    else:
        finish = "step" if not to_end and _matched_stop(choice) == delimiter else "end"
    usage = usage if isinstance(usage, Mapping) else {}
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    read = usage.get("prompt_tokens")
    tokens = usage.get("completion_tokens")
    return Continuation(text, finish, tokens if isinstance(tokens, int) else 0, read if isinstance(read, int) else 0,
                        cached if isinstance(cached, int) else 0)


def _matched_stop(choice: Mapping[str, Any]) -> object:
    """The stop string the server says the choice ended at (None: EOS, or a server that does not say)."""
    return next((choice[k] for k in STOP_NAMES if choice.get(k) is not None), None)


def served_tokenizer(root: str, model: str) -> Any:
    """The tokenizer of a served model from this machine's disk or Hugging Face cache: the folder or
    hub id the servers report, else the served model id; one error line naming the fix when neither loads."""
    from transformers import AutoTokenizer

    for source in dict.fromkeys((root, model)):
        try:
            return AutoTokenizer.from_pretrained(source, local_files_only=True)
        except (OSError, ValueError):  # not a folder here, not in the cache: try the next name
            continue
    raise BonbenchError(f"a chat search over --backend openai renders {model!r}'s chat template here, and its tokenizer "
                        f"({root!r}, as the server reports it) is not on this machine: put the model's tokenizer files "
                        "at that path, or serve a hub id and fetch its tokenizer into the Hugging Face cache "
                        "(huggingface-cli download ID), or pass --prompt-style base")
