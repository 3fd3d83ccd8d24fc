"""Offline without ``--data-dir`` (issue 29 §7): the one-line error comes within seconds, not after
the hub libraries' five retries (``bonbench.core.data``: one probe of the hub, then offline mode).

The hub is made unreachable on purpose (``HF_ENDPOINT`` on a reserved address, ``HF_HOME`` an empty
cache), so these tests mean the same on a machine with internet.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bonbench.core import data

UNREACHABLE = "https://192.0.2.1"  # TEST-NET-1 (RFC 5737): never routed


def _offline_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("BONBENCH_DATA_DIR", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")}
    return {**env, "HF_ENDPOINT": UNREACHABLE, "HF_HOME": str(tmp_path / "hf"), **extra}


def test_a_command_without_data_dir_fails_offline_in_one_line_within_seconds(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "bonbench.apps.cli", "run", "--task", "math", "--limit", "1", "--backend", "hf",
           "--metric", "pass@1", "--dry-run", "--out", str(tmp_path / "results")]
    start = time.monotonic()
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=_offline_env(tmp_path))
    took = time.monotonic() - start
    assert res.returncode == 1, res.stderr[-3000:]
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, res.stderr[-3000:]  # no retry chatter from the hub libraries
    assert lines[0].startswith("error: cannot reach the hub (192.0.2.1:443) and 'EleutherAI/hendrycks_math' is not in "
                               "the local Hugging Face cache; pass --data-dir DIR (or set BONBENCH_DATA_DIR)"), lines[0]
    assert took < 30.0, took  # ~1 s here (the CLI's start-up); the five retries took 25 s or more


def test_offline_asked_for_skips_the_probe_and_still_names_the_fix(tmp_path: Path) -> None:
    with socket.socket() as server:  # an endpoint that counts connections
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.settimeout(0.0)
        env = _offline_env(tmp_path, HF_ENDPOINT=f"http://127.0.0.1:{server.getsockname()[1]}", HF_HUB_OFFLINE="1")
        res = subprocess.run([sys.executable, "-m", "bonbench.apps.cli", "run", "--task", "math500", "--limit", "1",
                              "--backend", "hf", "--metric", "pass@1", "--dry-run", "--out", str(tmp_path / "r")],
                             capture_output=True, text=True, timeout=300, env=env)
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody connected
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.returncode == 1 and len(lines) == 1, res.stderr[-3000:]
    assert "pass --data-dir DIR (or set BONBENCH_DATA_DIR)" in lines[0], lines[0]


def test_an_unreachable_hub_puts_the_hub_libraries_offline(tmp_path: Path) -> None:
    """Offline mode, so a dataset in the local cache still loads without retries: set both in the
    environment and in the settings of libraries imported before the probe."""
    script = textwrap.dedent("""
        import datasets.config, huggingface_hub.constants, os
        from bonbench.core.data import load_hub
        from bonbench.core.errors import BonbenchError
        try:
            load_hub("EleutherAI/hendrycks_math", "test", "algebra")
        except BonbenchError as exc:
            print(str(exc).split(";")[0])
        print(os.environ["HF_HUB_OFFLINE"], datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE)
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         env=_offline_env(tmp_path))
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.splitlines() == ["cannot reach the hub (192.0.2.1:443) and 'EleutherAI/hendrycks_math' is not in "
                                       "the local Hugging Face cache", "1 True True"]


def test_the_probe_is_bounded_even_when_connecting_hangs(monkeypatch: pytest.MonkeyPatch) -> None:
    def hang(*args: object, **kwargs: object) -> socket.socket:
        time.sleep(30)
        raise OSError("never")

    monkeypatch.setattr(data.socket, "create_connection", hang)
    start = time.monotonic()
    assert data.hub_reachable(timeout=0.3) is False
    assert time.monotonic() - start < 5.0


def test_the_probe_connects_where_the_hub_requests_would(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HF_ENDPOINT", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert data.hub_address() == ("huggingface.co", 443)
    monkeypatch.setenv("HF_ENDPOINT", "http://mirror.internal:8080")
    assert data.hub_address() == ("mirror.internal", 8080)
    monkeypatch.delenv("HF_ENDPOINT")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    assert data.hub_address() == ("proxy.internal", 3128)
    monkeypatch.setenv("NO_PROXY", "localhost,.huggingface.co")
    assert data.hub_address() == ("huggingface.co", 443)
    monkeypatch.setenv("NO_PROXY", "localhost")
    monkeypatch.delenv("HTTPS_PROXY")
    monkeypatch.setenv("all_proxy", "socks.internal:1080")
    assert data.hub_address() == ("socks.internal", 1080)
    monkeypatch.setenv("no_proxy", "*")
    assert data.hub_address() == ("huggingface.co", 443)
    monkeypatch.delenv("all_proxy")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        assert data.hub_reachable() is True
    assert data.hub_reachable() is False  # closed now
