"""The engine's own output (vLLM / torch chatter) goes to a log file unless --debug; real errors stay
visible. The mechanism is tested with writes at the file-descriptor level (what C++ code and logging
handlers bound at import time do), Python warnings and a crash; the vllm backend uses it around
import and engine start-up (``VLLMSampler.__init__``)."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from bonbench.core.engines import quiet_log_level
from bonbench.core.errors import BonbenchError
from bonbench.plugins.samplers.engine_log import engine_output

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BONBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("BONBENCH_DEBUG", raising=False)
    return tmp_path / "cache"


def chatter() -> None:
    os.write(1, b"INFO 11-24 engine config: model=gemma\n")  # fd level, like vLLM's handlers and C++ prints
    os.write(2, b"WARNING libtcmalloc is not found in LD_PRELOAD\n")
    warnings.warn("TypedStorage is deprecated", UserWarning, stacklevel=1)


def test_chatter_goes_to_the_log_not_the_terminal(capfd: pytest.CaptureFixture[str]) -> None:
    with engine_output("vllm") as log:
        chatter()
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert log is not None and log.parent.name == "logs"
    text = log.read_text()
    assert "engine config" in text and "libtcmalloc" in text and "TypedStorage is deprecated" in text
    print("after")  # the descriptors are back
    assert capfd.readouterr().out == "after\n"


def test_debug_shows_everything(capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BONBENCH_DEBUG", "1")
    assert quiet_log_level() == "DEBUG"
    with pytest.warns(UserWarning, match="TypedStorage"):  # shown as a warning, not swallowed into a log
        with engine_output("vllm") as log:
            chatter()
    out, err = capfd.readouterr()
    assert log is None and "engine config" in out and "libtcmalloc" in err


def test_a_crash_shows_the_log_tail_and_an_error_line_stays_one_line(capfd: pytest.CaptureFixture[str]) -> None:
    assert quiet_log_level() == "ERROR"
    with pytest.raises(RuntimeError, match="engine core died"):
        with engine_output("vllm"):
            os.write(2, b"ERROR worker: CUDA out of memory\n")
            raise RuntimeError("engine core died")
    err = capfd.readouterr().err
    assert "vllm engine log (" in err and "ERROR worker: CUDA out of memory" in err
    with pytest.raises(BonbenchError):
        with engine_output("vllm"):
            os.write(2, b"noise\n")
            raise BonbenchError("vllm cannot be imported: ...")
    assert capfd.readouterr().err == ""  # the CLI prints the one error line; no log tail beside it


def test_the_vllm_backend_starts_its_engine_inside_the_block() -> None:
    import ast

    tree = ast.parse((REPO / "bonbench" / "plugins" / "samplers" / "vllm.py").read_text())
    init = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    block = next(n for n in ast.walk(init) if isinstance(n, ast.With))
    calls = {ast.unparse(c.func) for c in ast.walk(block) if isinstance(c, ast.Call)}
    assert "engine_output" in ast.unparse(block.items[0].context_expr)
    assert {"import_vllm", "vllm.LLM", "self.llm.get_tokenizer"} <= calls


@pytest.mark.slow
def test_a_real_vllm_run_prints_no_engine_chatter(tmp_path: Path, data_dir: Path) -> None:
    """``bonbench run --backend vllm`` on the embedded model: stderr holds bonbench's own lines (the
    preload restart, the verifier line, progress), not vLLM's start-up log; --debug shows it."""
    pytest.importorskip("vllm")
    pp = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": pp,
           "BONBENCH_CACHE": os.environ.get("BONBENCH_CACHE", str(Path.home() / ".cache/bonbench"))}
    cmd = [sys.executable, "-m", "bonbench.apps.cli", "run", "--task", "math", "--limit", "1", "--n", "1", "--metric", "pass@1",
           "--max-tokens", "8", "--backend", "vllm", "--data-dir", str(data_dir), "--out", str(tmp_path)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "INFO" not in r.stderr and "WARNING" not in r.stderr, r.stderr
