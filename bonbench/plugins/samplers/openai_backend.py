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

Work sharing: every ``--endpoint`` gets ``concurrency`` workers that pull from one queue, so a faster
endpoint takes more work (least-loaded). Connection errors, timeouts, 429 and 5xx, and bad answers
(malformed JSON, an HTML page with status 200, a choice count other than n: ``openai_answers.py``
checks the raw body, since the client would raise a bare ``JSONDecodeError`` or return a ``str``)
are retried with exponential backoff, or after the ``Retry-After`` the server asked for (capped at
``RETRY_AFTER_CAP_S``, said on stderr), ``max_attempts`` tries in all. Every try has a total
deadline (``request_timeout``, ``--request-timeout``, default 120 s) from sending to the last byte
of the answer: httpx's read timeout restarts with every byte, so a trickling server would otherwise
stall the run. A stall and a long Retry-After are said once per endpoint on stderr. Failover: an
endpoint that exhausts its tries is
dropped for the rest of the call (a warning on stderr), its request goes back on the queue and the
surviving endpoints finish the work; only when every endpoint is down is it a one-line
``BonbenchError`` naming the fix. Other HTTP errors (400: prompt too long, 404 ...) fail at once.
Samples are yielded one by one as they arrive, so the run store keeps every finished one.

Log-probabilities: ``logprobs=0`` (completions) / ``logprobs=True, top_logprobs=0`` (chat) and
``Sample.logprob`` = the sum of the returned token log-probabilities, ``n_tokens`` their count (else
the usage count). They are what the server reports: start vLLM with
``--logprobs-mode processed_logprobs`` to get the vllm backend's convention (the sampling policy's
log-probability); vLLM's default reports the raw model's. A stop string the server did not honour
is cut here as well (text only; the token count and log-probability stay the server's).

``served_model`` checks (GET ``/v1/models``) that every endpoint serves ``--model`` and builds the
model's identity: a served model's weights are unknown here, so its fingerprint hashes the model id
and the ``root`` the server reports (vLLM: the folder or hub id it loaded).

This module does not start servers, render prompts or choose the backend (``select.py`` does).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bonbench.api.sampler import SampleRequest, SamplingParams, sample_seed
from bonbench.core.errors import BonbenchError
from bonbench.core.models import ResolvedModel
from bonbench.core.records import Prompt, Sample
from bonbench.plugins.samplers.openai_answers import RETRY_AFTER_CAP_S, BadAnswer, answer_json, choices_of, retry_after

T = TypeVar("T")
DEFAULT_REQUEST_TIMEOUT_S = 120.0


def _default_api_key() -> str:
    return os.environ.get("OPENAI_API_KEY") or "EMPTY"


@dataclass(frozen=True)
class OpenAIOptions:
    """Client settings of the openai backend. ``endpoints``: base URLs (``/v1`` is added when
    missing); ``concurrency``: requests in flight per endpoint; ``max_attempts``: tries per request
    (connection errors, timeouts, 429, 5xx, bad answers), waiting ``retry_wait`` * 2^attempt seconds
    (at most 30) between them, or the server's ``Retry-After`` (at most ``RETRY_AFTER_CAP_S``);
    ``request_timeout``: seconds one request may take in all, from sending it to the last byte of the answer
    (``--request-timeout``). None of these change the samples, so none is hashed; ``api_key`` is
    never recorded."""

    endpoints: tuple[str, ...] = ()
    concurrency: int = 8
    api_key: str = field(default_factory=_default_api_key, repr=False)
    max_attempts: int = 5
    retry_wait: float = 0.5
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT_S

    def recorded(self) -> dict[str, Any]:
        """The settings as recorded in config.json (provenance): everything but the API key."""
        return {"endpoints": list(self.endpoints), "concurrency": self.concurrency,
                "max_attempts": self.max_attempts, "retry_wait": self.retry_wait, "request_timeout": self.request_timeout}


def base_url(endpoint: str) -> str:
    """``http://host:8000`` or ``http://host:8000/v1/`` -> ``http://host:8000/v1``."""
    url = endpoint.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise BonbenchError(f"--endpoint {endpoint!r} is not a URL: give e.g. http://127.0.0.1:8000")
    return url if url.endswith("/v1") else url + "/v1"


def _check_options(opts: OpenAIOptions) -> None:
    if not opts.endpoints:
        raise BonbenchError("the openai backend needs a server: --endpoint URL (repeatable), e.g. "
                            "--endpoint http://127.0.0.1:8000 after `vllm serve MODEL`")
    if opts.concurrency < 1 or opts.max_attempts < 1:
        raise BonbenchError("--concurrency and max_attempts must be at least 1")
    if not opts.request_timeout > 0:
        raise BonbenchError(f"--request-timeout must be a positive number of seconds (got {opts.request_timeout:g})")


def _retryable(exc: BaseException) -> str | None:
    """Why ``exc`` is worth another try (a short reason), or None."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return "timed out"
    if isinstance(exc, openai.APIConnectionError):
        seen: BaseException | None = exc
        while seen is not None:  # httpx says "All connection attempts failed"; its cause says why
            if isinstance(seen, ConnectionRefusedError) or "refused" in str(seen).lower():
                return "connection refused"
            seen = seen.__cause__ or seen.__context__
        first = str(exc.__cause__ or exc).splitlines()
        return f"connection failed: {first[0] if first else type(exc.__cause__ or exc).__name__}"
    if isinstance(exc, openai.APIStatusError) and (exc.status_code == 429 or exc.status_code >= 500):
        return f"HTTP {exc.status_code}"
    return None


class EndpointDown(BonbenchError):
    """An endpoint exhausted its tries on retryable failures (down, overloaded, timing out, bad answers)."""


def _fix_for(kind: str) -> str:
    """The fix a user can apply when an endpoint keeps failing in this way."""
    if kind == "bad":
        return "check that --endpoint is the address of an OpenAI-compatible server (vllm serve, SGLang, TGI), or drop it"
    if kind == "slow":
        return "raise --request-timeout, lower --concurrency, or drop --endpoint"
    if kind == "busy":
        return "the server is failing or overloaded: check its log, lower --concurrency, or drop --endpoint"
    return "start the server or drop --endpoint"


class _Warnings:
    """Retry warnings on stderr, each (endpoint, kind of failure) once per call: a server failing
    every request must not print a line per request, but a stall must not be silent either."""

    def __init__(self) -> None:
        self.seen: set[tuple[str, str]] = set()

    def once(self, endpoint: str, kind: str, text: str) -> None:
        if (endpoint, kind) not in self.seen:
            self.seen.add((endpoint, kind))
            print(f"warning: endpoint {endpoint}: {text}", file=sys.stderr)


async def _with_retries(endpoint: str, opts: OpenAIOptions, call: Callable[[], Awaitable[T]],
                        warn: _Warnings | None = None) -> T:
    """``await call()`` within ``opts.request_timeout`` seconds in all (a trickling answer included),
    retried on connection errors, timeouts, 429, 5xx and bad answers (``BadAnswer``) with
    exponential backoff, or after the ``Retry-After`` the server asked for (capped)."""
    import openai

    warn = warn or _Warnings()
    reason, kind, wait = "", "down", 0.0
    for attempt in range(opts.max_attempts):
        if attempt:
            await asyncio.sleep(wait)
        asked: float | None = None
        try:
            # a total deadline: httpx's read timeout restarts with every byte, so a server that
            # trickles one byte every few seconds would never time out on it alone
            return await asyncio.wait_for(call(), timeout=opts.request_timeout)
        except TimeoutError:
            reason, kind = f"no complete answer within {opts.request_timeout:g} s", "slow"
        except BadAnswer as exc:
            reason, kind = str(exc), "bad"
        except openai.APIError as exc:
            why = _retryable(exc)
            if why is None:
                status = getattr(exc, "status_code", None)
                msg = str(getattr(exc, "message", exc)).splitlines()[0][:300]
                raise BonbenchError(f"endpoint {endpoint}: request failed ({f'HTTP {status}: ' if status else ''}{msg})") from exc
            reason, kind = why, ("slow" if why == "timed out" else "busy" if why.startswith("HTTP") else "down")
            if isinstance(exc, openai.APIStatusError):
                asked = retry_after(exc.response.headers)
        wait = min(opts.retry_wait * 2 ** attempt, 30.0)
        last = attempt + 1 == opts.max_attempts
        if asked is not None:
            wait = max(wait, min(asked, RETRY_AFTER_CAP_S))
            if asked > RETRY_AFTER_CAP_S and not last:
                warn.once(endpoint, "cap", f"{reason} asks to wait {asked:g} s (Retry-After); waiting "
                          f"{RETRY_AFTER_CAP_S:g} s, bonbench's cap, then retrying")
            elif asked >= 1.0 and not last:
                warn.once(endpoint, "asked", f"{reason}, waiting {asked:g} s as the server asks (Retry-After)")
        if kind == "slow" and not last:
            # quick failures end in one error line within seconds; a stall is worth saying at once
            warn.once(endpoint, kind, f"{reason}; retrying (up to {opts.max_attempts} attempts per request)")
    raise EndpointDown(f"endpoint {endpoint}: no answer after {opts.max_attempts} attempts ({reason}); {_fix_for(kind)}")


def _client(endpoint: str, opts: OpenAIOptions) -> Any:
    import openai

    return openai.AsyncOpenAI(base_url=base_url(endpoint), api_key=opts.api_key, max_retries=0, timeout=opts.request_timeout)


async def _json(raw: Any) -> dict[str, Any]:
    """The checked JSON object of a raw answer (``with_raw_response``: the body as received), else ``BadAnswer``."""
    return answer_json(raw.status_code, raw.headers.get("content-type", ""), raw.text)


def served_model(model: str | None, opts: OpenAIOptions) -> ResolvedModel:
    """Check that every endpoint serves ``model`` (GET /v1/models) and return its identity.

    The fingerprint hashes the model id and the ``root`` the servers report (their model folder or
    hub id; the id itself when a server reports none); endpoints reporting different roots are an error.
    """
    _check_options(opts)

    async def roots() -> list[tuple[str, list[tuple[str, str]]]]:
        out = []
        for ep in opts.endpoints:
            client = _client(ep, opts)
            try:
                async def models(client: Any = client) -> list[tuple[str, str]]:  # this endpoint's client
                    doc = await _json(await client.models.with_raw_response.list())
                    data = doc.get("data")
                    if not isinstance(data, list) or not all(isinstance(m, dict) and m.get("id") for m in data):
                        raise BadAnswer("a /v1/models answer without a 'data' list of models with ids")
                    return [(str(m["id"]), str(m.get("root") or m["id"])) for m in data]

                out.append((ep, await _with_retries(ep, opts, models)))
            finally:
                await client.close()
        return out

    listed = asyncio.run(roots())
    if model is None:
        ids = sorted({i for _, ms in listed for i, _ in ms})
        raise BonbenchError(f"--backend openai needs --model, the served model id (served: {', '.join(ids) or 'none'})")
    found: set[str] = set()
    for ep, served in listed:
        match = [root for i, root in served if i == model]
        if not match:
            names = ", ".join(i for i, _ in served) or "none"
            raise BonbenchError(f"endpoint {ep} does not serve model {model!r} (it serves: {names}); "
                                "pass the served name as --model, or start the server with that name")
        found.add(match[0])
    if len(found) > 1:
        raise BonbenchError(f"the endpoints serve {model!r} from different roots ({', '.join(sorted(found))}): "
                            "give endpoints that serve the same model")
    root = found.pop()
    digest = hashlib.sha256(f"openai\0{model}\0{root}".encode()).hexdigest()[:16]
    return ResolvedModel(name=model, path=root, is_chat=False, fingerprint=f"served:{digest}")


@dataclass(frozen=True)
class _Job:
    prompt: Prompt
    sample_idx: int


class OpenAISampler:
    """Sampler protocol implementation on OpenAI-compatible HTTP servers."""

    name = "openai"

    def __init__(self, model: ResolvedModel, *, seed: int, options: OpenAIOptions) -> None:
        _check_options(options)
        self.model = model.name
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
        if not jobs:
            return
        loop = asyncio.new_event_loop()
        clients = {ep: _client(ep, self.options) for ep in self.options.endpoints}
        queue: asyncio.Queue[_Job] = asyncio.Queue()
        results: asyncio.Queue[Sample | BaseException] = asyncio.Queue()
        for job in jobs:
            queue.put_nowait(job)

        down: set[str] = set()
        warn = _Warnings()

        async def worker(ep: str) -> None:
            # Workers block on the queue rather than leaving when it is empty: a job can come back
            # from an endpoint that went down, and a live endpoint must still be there to take it.
            # The consumer cancels every worker once it has all the samples.
            while ep not in down:
                job = await queue.get()
                if ep in down:  # went down while this worker waited: hand the job on
                    queue.put_nowait(job)
                    return
                try:
                    results.put_nowait(await self._draw(ep, clients[ep], job, params, warn))
                except EndpointDown as exc:
                    queue.put_nowait(job)  # failover: a surviving endpoint draws it, same seed
                    if ep not in down:
                        down.add(ep)
                        self.endpoints_down.append(ep)
                        alive = [e for e in self.options.endpoints if e not in down]
                        if not alive:
                            results.put_nowait(BonbenchError(f"{exc}; every endpoint is down"
                                                             if len(self.options.endpoints) > 1 else str(exc)))
                        else:
                            print(f"warning: {exc}; its requests move to {', '.join(alive)}", file=sys.stderr)
                    return
                except BaseException as exc:  # handed to the consumer, which raises it
                    results.put_nowait(exc)
                    if isinstance(exc, asyncio.CancelledError):
                        raise
                    return

        # interleaved, so that every endpoint starts with work when there is enough of it
        tasks = [loop.create_task(worker(ep)) for _ in range(self.options.concurrency) for ep in self.options.endpoints]
        try:
            for _ in range(len(jobs)):
                got = loop.run_until_complete(results.get())
                if isinstance(got, BaseException):
                    raise got
                yield [got]
        finally:
            for t in tasks:
                t.cancel()
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            for c in clients.values():
                loop.run_until_complete(c.close())
            loop.close()

    def close(self) -> None:
        return None

    # ------------------------------------------------------------------ internals

    async def _draw(self, ep: str, client: Any, job: _Job, params: SamplingParams, warn: _Warnings) -> Sample:
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
            doc = await _json(raw)
            # checked inside the retried call: a server that answers 3 choices (or none) to n = 1 is
            # as broken as one sending HTML, and the next try may be answered by a healthy replica
            return {"choice": choices_of(doc, 1, chat)[0], "usage": doc.get("usage")}

        got = await _with_retries(ep, self.options, call, warn)
        choice, usage = got["choice"], got["usage"]
        lp = choice.get("logprobs") if isinstance(choice.get("logprobs"), Mapping) else {}
        if not chat:
            text = choice.get("text") or ""
            token_lps = list(lp["token_logprobs"]) if isinstance(lp.get("token_logprobs"), list) else None
        else:
            text = ((choice["message"].get("content") or "")
                    if isinstance(choice["message"].get("content"), (str, type(None))) else "")
            content = lp.get("content")
            token_lps = ([c.get("logprob") for c in content if isinstance(c, Mapping)]
                         if isinstance(content, list) and content else None)
        completion_tokens = usage.get("completion_tokens") if isinstance(usage, Mapping) else None
        n_tokens = len(token_lps) if token_lps is not None else int(completion_tokens or 0)
        logprob = float(sum(x for x in token_lps if isinstance(x, (int, float)))) if token_lps is not None else None
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        cut = min((text.find(s) for s in stop if s and s in text), default=-1)
        if cut >= 0:  # a server that ignored the stop strings
            text, finish = text[:cut], "stop"
        return Sample(problem_id=prompt.problem_id, sample_idx=job.sample_idx, completion=text, n_tokens=n_tokens,
                      finish_reason=finish, logprob=logprob)
