"""The step sampler over OpenAI-compatible servers (``OpenAIStepSampler``) against a scripted server.

``StepServer`` plays a model whose text is a function of the request's seed (``script``): a few
steps separated by the delimiter, then EOS. It honours ``stop`` and names the matched stop string as
vLLM does (``stop_reason``), or, told so, as SGLang does (``matched_stop``), ignores ``stop``,
rejects it (400), names no stop string, or fails a request with 500 once. The tests check
``HFStepSampler``'s semantics (finish kinds, the delimiter cut, to_end, greedy, a row a function of
its seed and not of its batch), the retries, the refusals before sampling, and a beam search end to
end. The real ``vllm serve``: tests/test_vllm_serve.py.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from search_scripts import TableScorer, hashed_score

from bonbench.api.sampler import SamplingParams
from bonbench.api.search.contract import make_strategy
from bonbench.api.search.records import Prefix, SearchProblem
from bonbench.core.errors import BonbenchError
from bonbench.core.served import OpenAIOptions, served_model
from bonbench.plugins.samplers.openai_backend import OpenAISampler
from bonbench.plugins.samplers.openai_steps import PROBE_PROMPT, OpenAIStepSampler

DELIMITER = "\n\n"
MODEL = "served-model"


def script(prompt: str, seed: int, temperature: float) -> str:
    """The scripted model's whole continuation (one character = one token): greedy ignores the seed."""
    if prompt == PROBE_PROMPT:
        return " eight, nine"
    s = 0 if temperature == 0 else seed
    depth = prompt.count(DELIMITER)
    return DELIMITER.join(f"s{depth + k}.{s % 97}" for k in range(1 + s % 3)) + ("" if s % 5 else DELIMITER + "tail")


class StepServer:
    """The scripted server (module docstring); ``mode``: ``vllm``, ``sglang``, ``ignore-stop``,
    ``reject-stop``, ``no-stop-name``; ``faults``: "500" answers, consumed one per generation request."""

    def __init__(self, mode: str = "vllm", root: str = "/m") -> None:
        self.mode, self.root = mode, root  # root: the model folder GET /v1/models reports
        self.faults: list[str] = []
        self.bodies: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, doc: dict[str, Any]) -> None:
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "root": server.root}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                server.bodies.append(body)
                if server.faults:
                    self._send(int(server.faults.pop()), {"error": {"message": "injected"}})
                    return
                if server.mode == "reject-stop" and body.get("stop"):
                    self._send(400, {"error": {"message": "Unrecognized request argument supplied: stop"}})
                    return
                choice, tokens = server.choice(body)  # per request: the handler threads run at once
                self._send(200, {"id": "x", "object": "text_completion", "model": MODEL,
                                 "choices": [choice],
                                 "usage": {"prompt_tokens": len(body["prompt"]), "completion_tokens": tokens,
                                           "prompt_tokens_details": {"cached_tokens": len(body["prompt"]) // 2}}})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def choice(self, body: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """The request's choice and its completion tokens."""
        text = script(body["prompt"], int(body["seed"]), float(body["temperature"]))
        stops = [] if self.mode == "ignore-stop" else body.get("stop") or []
        at = min(((text.find(s), s) for s in stops if s in text), default=None)
        matched: str | None = None
        if at is not None:
            text, matched, tokens, finish = text[:at[0]], at[1], at[0] + len(at[1]), "stop"
        else:
            tokens, finish = len(text) + 1, "stop"  # + EOS
        if tokens > body["max_tokens"]:
            text, matched, tokens, finish = text[:body["max_tokens"]], None, body["max_tokens"], "length"
        choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": finish, "logprobs": None}
        if self.mode in ("vllm", "ignore-stop"):
            choice["stop_reason"] = matched
        elif self.mode == "sglang":
            choice["matched_stop"] = matched
        return choice, tokens

    def __enter__(self) -> StepServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[StepServer]:
    with StepServer() as s:
        yield s


def step_sampler(url: str, max_tokens: int = 64, **kw: Any) -> OpenAIStepSampler:
    opts = OpenAIOptions(endpoints=(url,), api_key="test", retry_wait=0.01, request_timeout=5.0, **kw)
    sampler = OpenAISampler(served_model(MODEL, opts), seed=0, options=opts)
    return OpenAIStepSampler(sampler, SamplingParams(temperature=0.8, max_tokens=max_tokens), DELIMITER)


PREFIXES = ([Prefix("Q:", (), seed=s) for s in range(10)] + [Prefix("Q:", ("s0.1",), seed=s) for s in range(3)]
            + [Prefix("Q:", (), seed=11, greedy=True), Prefix("Q:", (), seed=12, greedy=True),
               Prefix("Q:", (), seed=4, to_end=True)])


@pytest.mark.parametrize("mode", ["vllm", "sglang"])
def test_steps_have_the_hf_step_semantics(mode: str) -> None:
    with StepServer(mode) as server:
        got = step_sampler(server.url).continue_prefixes(PREFIXES)
        sent = server.bodies[1:]  # after the probe
    for p, c in zip(PREFIXES, got, strict=True):
        whole = script(p.prompt + "".join(s + DELIMITER for s in p.steps), p.seed, 0.0 if p.greedy else 0.8)
        if p.to_end:  # no stop string: the whole text to EOS, delimiters and all
            assert (c.text, c.finish, c.tokens) == (whole, "end", len(whole) + 1) and DELIMITER in c.text
        elif DELIMITER in whole:  # the first step, the delimiter cut off, its tokens counted
            first = whole.split(DELIMITER)[0]
            assert (c.text, c.finish, c.tokens) == (first, "step", len(first) + len(DELIMITER))
        else:
            assert (c.text, c.finish) == (whole, "end")
        assert c.prompt_tokens == len(p.prompt) + sum(len(s) + 2 for s in p.steps) and c.cached_tokens == c.prompt_tokens // 2
    assert {c.finish for c in got} == {"step", "end"}
    assert got[13] == got[14], "greedy is one path whatever the seed"
    asked = sorted(repr((b["prompt"], b["seed"], b["temperature"], b.get("stop"))) for b in sent)
    assert asked == sorted(repr((p.prompt + "".join(s + DELIMITER for s in p.steps), p.seed, 0.0 if p.greedy else 0.8,
                                 None if p.to_end else [DELIMITER])) for p in PREFIXES)  # one request per prefix


def test_a_row_depends_on_its_seed_not_its_batch(server: StepServer) -> None:
    sampler = step_sampler(server.url)
    together = sampler.continue_prefixes(PREFIXES)
    assert [sampler.continue_prefixes([p])[0] for p in PREFIXES[:5]] == together[:5]
    assert sampler.continue_prefixes(PREFIXES[::-1])[::-1] == together


def test_max_tokens_is_length_and_failed_requests_are_retried(server: StepServer) -> None:
    sampler = step_sampler(server.url, max_tokens=3)
    server.faults = ["500", "500"]
    got = sampler.continue_prefixes([Prefix("Q:", (), seed=7)])
    assert got[0].finish == "length" and got[0].tokens == 3 and len(got[0].text) == 3
    assert len(server.bodies) == 1 + 3  # the probe, two failures, the answer


@pytest.mark.parametrize("mode,said", [("ignore-stop", "ignores stop strings"),
                                       ("reject-stop", "HTTP 400"),
                                       ("no-stop-name", "does not say which stop string")])
def test_a_server_without_stop_string_support_is_refused_before_sampling(mode: str, said: str) -> None:
    with StepServer(mode) as server:
        with pytest.raises(BonbenchError, match=said) as info:
            step_sampler(server.url)
        assert len(server.bodies) == 1 and server.bodies[0]["prompt"] == PROBE_PROMPT  # the probe alone
    assert "\n" not in str(info.value)


def test_a_beam_search_over_a_server(server: StepServer) -> None:
    problem = SearchProblem("p", "Q:", "Q")

    def run() -> Any:
        return make_strategy("beam", width=2, max_iterations=3).search(
            problem, step_sampler(server.url), TableScorer(lambda p: hashed_score(p, "openai")), n=4, seed=0)

    got, again = run(), run()
    assert [c.text for c in got.candidates] == [c.text for c in again.candidates]
    assert len(got.candidates) == 4 and all(c.finish == "end" for c in got.candidates)
    assert got.cost.generated_tokens == sum(n.tokens for n in got.tree) > 0
    assert 0 < got.cost.cached_prompt_tokens < got.cost.prompt_tokens


def test_the_tasks_stop_strings_end_a_solution_as_on_the_other_backends(server: StepServer) -> None:
    # a few-shot base model's next exemplar starts after a delimiter: the task's stop "\n\ns1" must
    # end the solution whose next step would start "s1", and a solution run to the end stops there too
    opts = OpenAIOptions(endpoints=(server.url,), api_key="test", retry_wait=0.01, request_timeout=5.0)
    sampler = OpenAISampler(served_model(MODEL, opts), seed=0, options=opts)
    steps = OpenAIStepSampler(sampler, SamplingParams(temperature=0.8, max_tokens=64, stop=("\n\ns1",)), DELIMITER)
    after, whole = steps.continue_prefixes([Prefix("Q:", ("s0.1",), seed=1), Prefix("Q:", (), seed=1, to_end=True)])
    assert (after.text, after.finish) == ("", "end")
    assert whole.finish == "end" and "s1" not in whole.text and whole.text.startswith("s0.")
    # the to_end request carries the task's stops (the two requests run at once: found by prompt, not by order)
    assert next(b for b in server.bodies if b.get("prompt") == "Q:")["stop"] == ["\n\ns1"]
