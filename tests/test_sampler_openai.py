"""The openai backend against a local fault-injecting OpenAI-compatible server (a real ``vllm serve``:
tests/test_vllm_serve.py).

``FakeServer`` answers ``/v1/models``, ``/v1/completions`` and ``/v1/chat/completions`` from a script
(the text depends on the request's seed, so tests can check which seed a sample was drawn with) and
can be told to drop connections, answer 500 / 429 / 400, answer slowly, send malformed JSON or an
HTML page with status 200, ask to be retried later (Retry-After in seconds or as an HTTP date), send
its headers and then hang, trickle its answer a byte at a time, or answer 3 choices to n = 1.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from bonbench.api.sampler import SampleRequest, SamplingParams, sample_seed
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Prompt
from bonbench.core.served import OpenAIOptions, base_url, served_model
from bonbench.core.served_answers import retry_after
from bonbench.plugins.samplers.openai_backend import OpenAISampler

REPO = Path(__file__).resolve().parents[1]
TOKEN_LPS = (-0.5, -0.25, -0.125)  # the script's three "tokens"


def script_text(seed: int) -> str:
    """The fake server's completion for a request with ``seed``; the text after STOP must be cut."""
    return f"ans{seed % 9973} STOP tail"


class FakeServer:
    """An OpenAI-compatible server on 127.0.0.1 in a thread; ``faults`` are consumed one per
    generation request: ``drop`` (close without answering), ``500``, ``429``, ``400``, ``slow``,
    ``malformed`` (status 200, a JSON body cut short), ``html`` (status 200, a proxy's HTML page),
    ``retry-after=S`` (429 with ``Retry-After: S``), ``retry-date=S`` (503 with ``Retry-After`` an HTTP
    date S seconds ahead), ``hang`` (headers, then nothing until the server stops), ``trickle`` (the
    answer one byte every ``trickle_s``), ``choices3`` (3 choices for a request of n = 1)."""

    def __init__(self, model: str = "served-model", slow_s: float = 1.0, trickle_s: float = 0.5) -> None:
        self.model, self.slow_s, self.trickle_s = model, slow_s, trickle_s
        self.stopping = threading.Event()  # releases hanging and trickling handlers when the test ends
        self.faults: deque[str] = deque()
        self.fail_after: int | None = None  # answer 400 to every generation request after this many
        self.models_fault: str | None = None  # "html": GET /v1/models answers a proxy's HTML page
        self.bodies: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, doc: dict[str, Any] | str, content_type: str = "application/json",
                      headers: dict[str, str] | None = None, fault: str = "ok") -> None:
                data = (doc if isinstance(doc, str) else json.dumps(doc)).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                if fault == "hang":
                    self.wfile.flush()
                    server.stopping.wait(60)
                    self.close_connection = True
                    return
                if fault == "trickle":
                    for i in range(len(data)):
                        if server.stopping.wait(server.trickle_s):
                            break
                        try:
                            self.wfile.write(data[i:i + 1])
                            self.wfile.flush()
                        except OSError:  # the client gave up on us
                            break
                    self.close_connection = True
                    return
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models" and server.models_fault == "html":
                    self._send(200, "<html><body>Sign in to continue</body></html>", content_type="text/html")
                elif self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": [
                        {"id": server.model, "object": "model", "created": 0, "owned_by": "test", "root": "/models/x"}]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with server.lock:
                    fault = server.faults.popleft() if server.faults else "ok"
                    server.bodies.append({"path": self.path, "fault": fault, "t": time.monotonic(), **body})
                    done = sum(1 for b in server.bodies if b["fault"] == "ok")
                    if server.fail_after is not None and done > server.fail_after:
                        fault = "400"
                if fault == "drop":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault in ("500", "429", "400"):
                    self._send(int(fault), {"error": {"message": f"injected {fault}", "type": "test"}})
                    return
                if fault == "malformed":
                    self._send(200, '{"id": "x", "object": "text_completion", "choices": [{"text": "ans')
                    return
                if fault == "html":
                    self._send(200, "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>",
                               content_type="text/html")
                    return
                if fault.startswith("retry-after="):
                    self._send(429, {"error": {"message": "slow down"}}, headers={"Retry-After": fault.split("=")[1]})
                    return
                if fault.startswith("retry-date="):
                    when = formatdate(time.time() + float(fault.split("=")[1]), usegmt=True)
                    self._send(503, {"error": {"message": "overloaded"}}, headers={"Retry-After": when})
                    return
                if fault == "slow":
                    time.sleep(server.slow_s)
                text = script_text(int(body.get("seed", 0)))
                toks = ["a", "b", "c"]
                if self.path.endswith("/chat/completions"):
                    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop",
                              "logprobs": {"content": [{"token": t, "logprob": lp, "bytes": None, "top_logprobs": []}
                                                       for t, lp in zip(toks, TOKEN_LPS, strict=True)]}}
                    obj = "chat.completion"
                else:
                    choice = {"index": 0, "text": text, "finish_reason": "stop",
                              "logprobs": {"tokens": toks, "token_logprobs": list(TOKEN_LPS), "text_offset": [0, 1, 2],
                                           "top_logprobs": None}}
                    obj = "text_completion"
                choices = [choice] if fault != "choices3" else [{**choice, "index": i} for i in range(3)]
                self._send(200, {"id": "x", "object": obj, "created": 0, "model": server.model, "choices": choices,
                                 "usage": {"prompt_tokens": 1, "completion_tokens": 3, "total_tokens": 4}},
                           fault=fault if fault in ("hang", "trickle") else "ok")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def generations(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.bodies)

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as s:
        yield s


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fast(*urls: str, **kw: Any) -> OpenAIOptions:
    return OpenAIOptions(endpoints=urls, api_key="test", retry_wait=0.01, request_timeout=5.0, **kw)


def sampler_for(opts: OpenAIOptions, seed: int = 3) -> OpenAISampler:
    return OpenAISampler(served_model("served-model", opts), seed=seed, options=opts)


PARAMS = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=32, seed=3, stop=("STOP",))


def test_the_per_sample_seed_is_the_one_stored_runs_were_drawn_with() -> None:
    # hf and openai runs drew their samples with these seeds: a change would redraw stored keys differently
    assert sample_seed(0, "p", 0) == 3479207433225186374
    assert sample_seed(3, "math/1", 7) == 6362177577789679240


def test_base_url() -> None:
    assert base_url("http://h:8000") == base_url("http://h:8000/v1/") == "http://h:8000/v1"
    with pytest.raises(BonbenchError, match="not a URL"):
        base_url("h:8000")


def test_samples_keys_stop_and_logprobs(server: FakeServer) -> None:
    sampler = sampler_for(fast(server.url))
    reqs = [SampleRequest(Prompt("p1", text="Q1"), (0, 2)),
            SampleRequest(Prompt("p2", messages=({"role": "user", "content": "Q2"},), stop=("tail",)), (5,))]
    got = [s for group in sampler.generate(reqs, PARAMS) for s in group]
    assert sorted(s.key for s in got) == [("p1", 0), ("p1", 2), ("p2", 5)]
    for s in got:
        assert s.completion == f"ans{sample_seed(3, s.problem_id, s.sample_idx) % 9973} "  # cut at STOP
        assert s.finish_reason == "stop" and s.n_tokens == 3
        assert s.prompt_tokens == 1  # the server's usage count of the prompt it read
        assert s.logprob == pytest.approx(sum(TOKEN_LPS))
    bodies = server.generations()
    assert len(bodies) == 3 and all(b["n"] == 1 and b["model"] == "served-model" for b in bodies)
    assert {b["seed"] for b in bodies} == {sample_seed(3, "p1", 0), sample_seed(3, "p1", 2), sample_seed(3, "p2", 5)}
    base = [b for b in bodies if b["path"] == "/v1/completions"]
    chat = [b for b in bodies if b["path"] == "/v1/chat/completions"]
    assert len(base) == 2 and len(chat) == 1
    assert base[0]["stop"] == ["STOP"] and chat[0]["stop"] == ["STOP", "tail"]
    assert base[0]["logprobs"] == 0 and chat[0]["logprobs"] is True
    assert (base[0]["temperature"], base[0]["top_p"], base[0]["max_tokens"]) == (0.7, 0.9, 32)


def test_retries_recover(server: FakeServer) -> None:
    server.slow_s = 1.0
    server.faults.extend(["drop", "500", "429", "slow"])
    sampler = sampler_for(OpenAIOptions(endpoints=(server.url,), api_key="t", retry_wait=0.01, request_timeout=0.3))
    got = [s for g in sampler.generate([SampleRequest(Prompt("p", text="Q"), (0,))], PARAMS) for s in g]
    assert [s.key for s in got] == [("p", 0)]
    assert [b["fault"] for b in server.generations()] == ["drop", "500", "429", "slow", "ok"]


def _one(sampler: OpenAISampler) -> list[Any]:
    return [s for g in sampler.generate([SampleRequest(Prompt("p", text="Q"), (0,))], PARAMS) for s in g]


def test_bad_answers_are_retried(server: FakeServer) -> None:
    """Malformed JSON, an HTML page with status 200 and 3 choices for n = 1 are retried, not crashes."""
    server.faults.extend(["malformed", "html", "choices3"])
    got = _one(sampler_for(fast(server.url)))
    assert [s.key for s in got] == [("p", 0)] and got[0].completion == f"ans{sample_seed(3, 'p', 0) % 9973} "
    assert [b["fault"] for b in server.generations()] == ["malformed", "html", "choices3", "ok"]


@pytest.mark.parametrize("fault, said", [
    ("malformed", "HTTP 200 with malformed JSON (Unterminated string"),
    ("html", "HTTP 200 with an HTML page (text/html), not JSON: '<html><head><title>502 Bad Gateway"),
    ("choices3", "3 choices for a request of n = 1"),
])
def test_bad_answers_every_time_end_in_one_line(server: FakeServer, fault: str, said: str) -> None:
    server.faults.extend([fault] * 3)
    with pytest.raises(BonbenchError) as err:
        _one(sampler_for(fast(server.url, max_attempts=3)))
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"endpoint {server.url}: no answer after 3 attempts ({said}")
    assert msg.endswith("check that --endpoint is the address of an OpenAI-compatible server (vllm serve, SGLang, TGI), "
                        "or drop it")


def test_retry_after_is_honoured_in_seconds_and_as_a_date(server: FakeServer, capfd: pytest.CaptureFixture[str]) -> None:
    server.faults.extend(["retry-after=1", "retry-date=2"])
    assert len(_one(sampler_for(fast(server.url)))) == 1  # retry_wait 0.01: without Retry-After, 10 ms gaps
    t = [b["t"] for b in server.generations()]
    assert len(t) == 3
    assert t[1] - t[0] >= 1.0  # asked for 1 s
    assert t[2] - t[1] >= 0.9  # an HTTP date 2 s ahead, truncated to whole seconds: at least ~1 s
    assert "HTTP 429, waiting 1 s as the server asks (Retry-After)" in capfd.readouterr().err


def test_retry_after_parsing() -> None:
    now = 1_000_000.0
    assert retry_after({"retry-after": "7"}, now) == 7.0
    assert retry_after({"retry-after": formatdate(now + 30, usegmt=True)}, now) == pytest.approx(30.0)
    assert retry_after({"retry-after": formatdate(now - 30, usegmt=True)}, now) == 0.0  # already past
    assert retry_after({"retry-after-ms": "250", "retry-after": "9"}, now) == 0.25
    assert retry_after({"retry-after": "soon"}, now) is None and retry_after({}, now) is None


def test_a_long_retry_after_is_capped_and_said(server: FakeServer, monkeypatch: pytest.MonkeyPatch,
                                               capfd: pytest.CaptureFixture[str]) -> None:
    from bonbench.core import served

    monkeypatch.setattr(served, "RETRY_AFTER_CAP_S", 0.2)
    server.faults.append("retry-after=3600")
    assert len(_one(sampler_for(fast(server.url)))) == 1
    assert "HTTP 429 asks to wait 3600 s (Retry-After); waiting 0.2 s, bonbench's cap" in capfd.readouterr().err


@pytest.mark.parametrize("fault", ["hang", "trickle"])
def test_a_stalled_answer_hits_the_request_deadline(fault: str, capfd: pytest.CaptureFixture[str]) -> None:
    """Headers then nothing, or one byte every 0.3 s (each byte restarts a read timeout): the total
    deadline ends the request and the retry gets the sample."""
    with FakeServer(trickle_s=0.3) as server:
        server.faults.append(fault)
        opts = OpenAIOptions(endpoints=(server.url,), api_key="t", retry_wait=0.01, request_timeout=1.0)
        got = _one(sampler_for(opts))
        assert [s.key for s in got] == [("p", 0)]
        assert [b["fault"] for b in server.generations()] == [fault, "ok"]
    assert f"warning: endpoint {server.url}: no complete answer within 1 s; retrying" in capfd.readouterr().err


def test_a_server_that_always_stalls_is_one_error_naming_the_flag() -> None:
    with FakeServer() as server:
        server.faults.extend(["hang"] * 2)
        opts = OpenAIOptions(endpoints=(server.url,), api_key="t", retry_wait=0.01, request_timeout=0.5, max_attempts=2)
        with pytest.raises(BonbenchError, match=r"no answer after 2 attempts \(no complete answer within 0.5 s\); "
                                                r"raise --request-timeout"):
            _one(sampler_for(opts))


def test_consumer_stopping_early_then_resuming(server: FakeServer) -> None:
    sampler = sampler_for(fast(server.url, concurrency=1))
    reqs = [SampleRequest(Prompt("p", text="Q"), tuple(range(6)))]
    gen = sampler.generate(reqs, PARAMS)
    first = [s for _, g in zip(range(2), gen, strict=False) for s in g]
    gen.close()  # like a Ctrl-C in the store: in-flight requests are cancelled, nothing raises
    have = {s.key for s in first}
    missing = tuple(i for i in range(6) if ("p", i) not in have)
    rest = [s for g in sampler.generate([SampleRequest(Prompt("p", text="Q"), missing)], PARAMS) for s in g]
    keys = sorted(s.key for s in first + rest)
    assert keys == [("p", i) for i in range(6)]
    # every sample was drawn with its own key's seed, whichever call drew it
    assert all(s.completion == f"ans{sample_seed(3, 'p', s.sample_idx) % 9973} " for s in first + rest)


def test_gives_up_after_max_attempts_and_fails_fast_on_400(server: FakeServer) -> None:
    server.faults.extend(["500"] * 3)
    sampler = sampler_for(fast(server.url, max_attempts=3))
    with pytest.raises(BonbenchError, match=r"no answer after 3 attempts \(HTTP 500\); the server is failing or overloaded: "
                                            r"check its log, lower --concurrency, or drop --endpoint$"):
        list(sampler.generate([SampleRequest(Prompt("p", text="Q"), (0,))], PARAMS))
    server.faults.append("400")
    with pytest.raises(BonbenchError, match="HTTP 400"):
        list(sampler.generate([SampleRequest(Prompt("p", text="Q"), (0,))], PARAMS))
    assert len(server.generations()) == 4


def test_two_endpoints_share_the_work() -> None:
    with FakeServer(slow_s=0.05) as a, FakeServer(slow_s=0.05) as b:
        a.faults.extend(["slow"] * 20)
        b.faults.extend(["slow"] * 20)
        sampler = sampler_for(fast(a.url, b.url, concurrency=2))
        reqs = [SampleRequest(Prompt(f"p{i}", text="Q"), tuple(range(4))) for i in range(3)]
        got = [s.key for g in sampler.generate(reqs, PARAMS) for s in g]
        assert sorted(got) == sorted((f"p{i}", j) for i in range(3) for j in range(4))
        assert len(a.generations()) > 0 and len(b.generations()) > 0
        assert len(a.generations()) + len(b.generations()) == 12


def test_an_endpoint_dying_mid_call_hands_its_work_to_the_others(capfd: pytest.CaptureFixture[str]) -> None:
    with FakeServer() as a, FakeServer() as b:
        sampler = sampler_for(fast(a.url, b.url, concurrency=2, max_attempts=2))
        reqs = [SampleRequest(Prompt(f"p{i}", text="Q"), tuple(range(5))) for i in range(4)]
        gen = sampler.generate(reqs, PARAMS)
        got = [s for _, g in zip(range(3), gen, strict=False) for s in g]
        a.faults.extend(["500"] * 1000)  # a goes down for good after the first samples
        got += [s for g in gen for s in g]
        keys = [s.key for s in got]
        assert sorted(keys) == sorted((f"p{i}", j) for i in range(4) for j in range(5))  # each key exactly once
        assert len(set(keys)) == len(keys)
        # the requests a failed were redrawn on b with their own seeds
        assert all(s.completion == f"ans{sample_seed(3, s.problem_id, s.sample_idx) % 9973} " for s in got)
        assert sampler.endpoints_down == [a.url]
        assert any(x["fault"] == "500" for x in a.generations())
        assert f"warning: endpoint {a.url}: no answer after 2 attempts (HTTP 500)" in capfd.readouterr().err


def test_every_endpoint_down_is_one_error() -> None:
    with FakeServer() as a, FakeServer() as b:
        sampler = sampler_for(fast(a.url, b.url, max_attempts=2))
        a.faults.extend(["500"] * 100)
        b.faults.extend(["500"] * 100)
        with pytest.raises(BonbenchError, match=r"no answer after 2 attempts \(HTTP 500\).*; every endpoint is down"):
            list(sampler.generate([SampleRequest(Prompt("p", text="Q"), (0, 1, 2))], PARAMS))


def test_other_served_model_is_a_one_line_error() -> None:
    with FakeServer(model="other-model") as s:
        with pytest.raises(BonbenchError) as err:
            served_model("served-model", fast(s.url))
    msg = str(err.value)
    assert "\n" not in msg and "other-model" in msg and "--model" in msg


def test_an_html_model_list_is_one_line_naming_the_endpoint() -> None:
    with FakeServer() as s:
        s.models_fault = "html"
        with pytest.raises(BonbenchError) as err:
            served_model("served-model", fast(s.url, max_attempts=2))
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"endpoint {s.url}: no answer after 2 attempts (HTTP 200 with an HTML page")
    assert "OpenAI-compatible server" in msg


def test_fingerprint_is_model_and_root_not_endpoint() -> None:
    with FakeServer() as a, FakeServer() as b, FakeServer(model="m2") as c:
        fa, fb = served_model("served-model", fast(a.url)), served_model("served-model", fast(a.url, b.url))
        assert fa == fb and fa.fingerprint.startswith("served:") and fa.path == "/models/x"
        assert served_model("m2", fast(c.url)).fingerprint != fa.fingerprint


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    pp = os.pathsep.join(filter(None, [str(REPO), str(REPO / ".pp"), os.environ.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "bonbench.apps.cli", "run", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": pp, **(env or {})})


def test_cli_never_answering_endpoint_is_a_one_line_error(tmp_path: Path, data_dir: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    r = _cli("--task", "math", "--limit", "1", "--n", "1", "--metric", "pass@1", "--backend", "openai",
             "--endpoint", url, "--model", "m", "--data-dir", str(data_dir), "--out", str(tmp_path))
    assert r.returncode == 1
    assert r.stderr.strip() == (f"error: endpoint {url}: no answer after 5 attempts (connection refused); "
                                "start the server or drop --endpoint")


def test_cli_html_answers_end_in_one_line_and_the_timeout_is_a_flag(tmp_path: Path, data_dir: Path) -> None:
    common = ("--task", "math", "--limit", "1", "--n", "1", "--metric", "pass@1", "--backend", "openai",
              "--model", "served-model", "--data-dir", str(data_dir), "--out", str(tmp_path))
    with FakeServer() as server:
        server.faults.extend(["html"] * 5)
        r = _cli(*common, "--endpoint", server.url)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: endpoint {server.url}: no answer after 5 attempts "
                                                   "(HTTP 200 with an HTML page (text/html)"), r.stderr
    with FakeServer() as server:
        r = _cli(*common, "--endpoint", server.url, "--request-timeout", "7.5")
        assert r.returncode == 0, r.stderr
    (cfg_path,) = tmp_path.glob("runs/math/*/*/config.json")
    assert json.loads(cfg_path.read_text())["config"]["engine_args"]["request_timeout"] == 7.5
    r = _cli(*common, "--endpoint", server.url, "--request-timeout", "0")
    assert r.returncode == 1 and r.stderr.strip() == "error: --request-timeout must be > 0 (got 0)"


def _samples(root: Path) -> list[dict[str, Any]]:
    (path,) = root.glob("runs/math/*/*/samples.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_cli_kill_and_resume_each_key_once(tmp_path: Path, data_dir: Path) -> None:
    common = ("--task", "math", "--limit", "2", "--n", "4", "--metric", "pass@1,4", "--backend", "openai",
              "--model", "served-model", "--concurrency", "1", "--data-dir", str(data_dir), "--out", str(tmp_path))
    with FakeServer() as first:
        first.fail_after = 3  # the 4th sample fails (HTTP 400, not retried): the run stops there
        r = _cli(*common, "--endpoint", first.url)
        assert r.returncode == 1 and "HTTP 400" in r.stderr
    kept = _samples(tmp_path)
    assert 1 <= len(kept) <= 3
    with FakeServer() as second:  # another endpoint URL: the same run (endpoints are not hashed)
        r = _cli(*common, "--endpoint", second.url)
        assert r.returncode == 0, r.stderr
        asked = second.generations()
    rows = _samples(tmp_path)
    keys = [(s["problem_id"], s["sample_idx"]) for s in rows]
    assert len(keys) == len(set(keys)) == 8
    assert len(asked) == 8 - len(kept)  # only the missing keys were requested
    assert {b["seed"] for b in asked}.isdisjoint({sample_seed(0, s["problem_id"], s["sample_idx"]) for s in kept})
    (cfg_path,) = tmp_path.glob("runs/math/*/*/config.json")
    cfg = json.loads(cfg_path.read_text())
    assert cfg["config"]["engine_args"]["endpoints"] == [second.url]
    assert "api_key" not in cfg["config"]["engine_args"] and cfg["hashed"]["backend"] == "openai"
