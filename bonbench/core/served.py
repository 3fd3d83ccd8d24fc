"""The served-model client: the one way bonbench talks to OpenAI-compatible servers.

The ``openai`` sampler (``bonbench.plugins.samplers.openai_backend``) and the LLM judge
(the ``judge:`` verifiers) send their requests through this module, so both behave the
same: ``OpenAIOptions`` (endpoints, concurrency, tries, deadline); ``with_retries`` (connection
errors, timeouts, 429 and 5xx, and bad answers (``served_answers``) retried with exponential backoff
or after the server's ``Retry-After``, capped at ``RETRY_AFTER_CAP_S``; a total deadline per try,
since httpx's read timeout restarts with every byte); ``on_endpoints`` (every endpoint gets
``concurrency`` workers pulling from one queue, so a faster endpoint takes more work; an endpoint
that exhausts its tries is dropped and its job goes to the survivors: failover); and
``served_model`` (GET ``/v1/models``: every endpoint serves the model; its identity).

A stall and a long Retry-After are said once per endpoint on stderr; only when every endpoint is down
is it a one-line ``BonbenchError`` naming the fix. Other HTTP errors (400: prompt too long, 404 ...)
fail at once.

This module builds no request body and reads no answer's content: its callers do (a sample and a
judge's verdict need different things). ``openai`` is imported only inside functions.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bonbench.core.errors import BonbenchError
from bonbench.core.models import ResolvedModel
from bonbench.core.served_answers import RETRY_AFTER_CAP_S, BadAnswer, answer_json, retry_after

T = TypeVar("T")
DEFAULT_REQUEST_TIMEOUT_S = 120.0


def default_api_key() -> str:
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
    api_key: str = field(default_factory=default_api_key, repr=False)
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


def check_options(opts: OpenAIOptions) -> None:
    if not opts.endpoints:
        raise BonbenchError("the openai backend needs a server: --endpoint URL (repeatable), e.g. "
                            "--endpoint http://127.0.0.1:8000 after `vllm serve MODEL`")
    if opts.concurrency < 1 or opts.max_attempts < 1:
        raise BonbenchError("--concurrency and max_attempts must be at least 1")
    if not opts.request_timeout > 0:
        raise BonbenchError(f"--request-timeout must be a positive number of seconds (got {opts.request_timeout:g})")


def retryable(exc: BaseException) -> str | None:
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
    """An endpoint exhausted its tries on retryable failures (down, overloaded, timing out, bad answers);
    ``reason`` is the last failure in a few words (``connection refused``, ``HTTP 503``)."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason


def fix_for(kind: str) -> str:
    """The fix a user can apply when an endpoint keeps failing in this way."""
    if kind == "bad":
        return "check that --endpoint is the address of an OpenAI-compatible server (vllm serve, SGLang, TGI), or drop it"
    if kind == "slow":
        return "raise --request-timeout, lower --concurrency, or drop --endpoint"
    if kind == "busy":
        return "the server is failing or overloaded: check its log, lower --concurrency, or drop --endpoint"
    return "start the server or drop --endpoint"


class Warnings:
    """Retry warnings on stderr, each (endpoint, kind of failure) once per call: a server failing
    every request must not print a line per request, but a stall must not be silent either."""

    def __init__(self) -> None:
        self.seen: set[tuple[str, str]] = set()

    def once(self, endpoint: str, kind: str, text: str) -> None:
        if (endpoint, kind) not in self.seen:
            self.seen.add((endpoint, kind))
            print(f"warning: endpoint {endpoint}: {text}", file=sys.stderr)


async def with_retries(endpoint: str, opts: OpenAIOptions, call: Callable[[], Awaitable[T]],
                        warn: Warnings | None = None) -> T:
    """``await call()`` within ``opts.request_timeout`` seconds in all (a trickling answer included),
    retried on connection errors, timeouts, 429, 5xx and bad answers (``BadAnswer``) with
    exponential backoff, or after the ``Retry-After`` the server asked for (capped)."""
    import openai

    warn = warn or Warnings()
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
            why = retryable(exc)
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
    raise EndpointDown(f"endpoint {endpoint}: no answer after {opts.max_attempts} attempts ({reason}); {fix_for(kind)}", reason)


def client(endpoint: str, opts: OpenAIOptions) -> Any:
    import openai

    return openai.AsyncOpenAI(base_url=base_url(endpoint), api_key=opts.api_key, max_retries=0, timeout=opts.request_timeout)


async def answer_of(raw: Any) -> dict[str, Any]:
    """The checked JSON object of a raw answer (``with_raw_response``: the body as received), else ``BadAnswer``."""
    return answer_json(raw.status_code, raw.headers.get("content-type", ""), raw.text)


def served_model(model: str | None, opts: OpenAIOptions) -> ResolvedModel:
    """Check that every endpoint serves ``model`` (GET /v1/models) and return its identity.

    The fingerprint hashes the model id and the ``root`` the servers report (their model folder or
    hub id; the id itself when a server reports none); endpoints reporting different roots are an error.
    """
    check_options(opts)

    async def roots() -> list[tuple[str, list[tuple[str, str]]]]:
        out = []
        for ep in opts.endpoints:
            api = client(ep, opts)
            try:
                async def models(api: Any = api) -> list[tuple[str, str]]:  # this endpoint's client
                    doc = await answer_of(await api.models.with_raw_response.list())
                    data = doc.get("data")
                    if not isinstance(data, list) or not all(isinstance(m, dict) and m.get("id") for m in data):
                        raise BadAnswer("a /v1/models answer without a 'data' list of models with ids")
                    return [(str(m["id"]), str(m.get("root") or m["id"])) for m in data]

                out.append((ep, await with_retries(ep, opts, models)))
            finally:
                await api.close()
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


J = TypeVar("J")
R = TypeVar("R")


@dataclass(frozen=True)
class _Done:
    """One result of a job (boxed: a result may itself be an exception object)."""

    value: Any


def on_endpoints(jobs: Sequence[J], opts: OpenAIOptions, work: Callable[[str, Any, J, Warnings], Awaitable[R]],
                 on_down: Callable[[str], None] | None = None) -> Iterator[R]:
    """``await work(endpoint, client, job, warn)`` for every job, spread over the endpoints; each
    result is yielded as it arrives (in no particular order).

    ``work`` calls ``with_retries`` itself. When it raises ``EndpointDown`` the endpoint is dropped
    (``on_down(endpoint)``, a warning on stderr) and the job goes back on the queue for a surviving
    endpoint; when none survives, or ``work`` raises anything else, the error is raised here. If the
    consumer stops early (an exception, ``close()``), the jobs in flight are cancelled.
    """
    check_options(opts)
    if not jobs:
        return
    loop = asyncio.new_event_loop()
    clients = {ep: client(ep, opts) for ep in opts.endpoints}
    queue: asyncio.Queue[J] = asyncio.Queue()
    results: asyncio.Queue[_Done | BaseException] = asyncio.Queue()
    for job in jobs:
        queue.put_nowait(job)
    down: set[str] = set()
    warn = Warnings()

    async def worker(ep: str) -> None:
        # Workers block on the queue rather than leaving when it is empty: a job can come back
        # from an endpoint that went down, and a live endpoint must still be there to take it.
        # The consumer cancels every worker once it has all the results.
        while ep not in down:
            job = await queue.get()
            if ep in down:  # went down while this worker waited: hand the job on
                queue.put_nowait(job)
                return
            try:
                results.put_nowait(_Done(await work(ep, clients[ep], job, warn)))
            except EndpointDown as exc:
                queue.put_nowait(job)  # failover: a surviving endpoint takes it
                if ep not in down:
                    down.add(ep)
                    if on_down is not None:
                        on_down(ep)
                    alive = [e for e in opts.endpoints if e not in down]
                    if not alive:
                        results.put_nowait(BonbenchError(f"{exc}; every endpoint is down"
                                                         if len(opts.endpoints) > 1 else str(exc)))
                    else:
                        print(f"warning: {exc}; its requests move to {', '.join(alive)}", file=sys.stderr)
                return
            except BaseException as exc:  # handed to the consumer, which raises it
                results.put_nowait(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                return

    # interleaved, so that every endpoint starts with work when there is enough of it
    tasks = [loop.create_task(worker(ep)) for _ in range(opts.concurrency) for ep in opts.endpoints]
    try:
        for _ in range(len(jobs)):
            got = loop.run_until_complete(results.get())
            if isinstance(got, BaseException):
                raise got
            yield got.value
    finally:
        for t in tasks:
            t.cancel()
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        for c in clients.values():
            loop.run_until_complete(c.close())
        loop.close()
