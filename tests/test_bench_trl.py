"""benchmarks/bench_trl.py: bad input is a one-line error before anything heavy is loaded.

The measurement itself (two real trainers on Gemma, minutes each) is run by hand; its figures are
in docs/bench-trl.md.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_trl.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=60)


def test_a_missing_trl_path_names_the_install_command(tmp_path: Path) -> None:
    out = _run("--trl-path", str(tmp_path / "nowhere"))
    assert out.returncode == 1
    assert out.stderr.startswith("error: --trl-path")
    assert "pip install --no-deps --target" in out.stderr


def test_a_micro_batch_that_does_not_divide_the_rollout_batch_is_refused(tmp_path: Path) -> None:
    out = _run("--trl-path", str(tmp_path), "--group", "8", "--prompts-per-step", "1", "--micro-batch", "3")
    assert out.returncode == 1
    assert out.stderr.startswith("error: --micro-batch must divide")


def test_without_trl_the_error_says_pip_install_trl(tmp_path: Path) -> None:
    # an empty --trl-path adds nothing; the venv has no trl of its own (it is installed for the benchmark only)
    code = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('trl') else 1)"
    if subprocess.run([sys.executable, "-c", code]).returncode == 0:
        pytest.skip("trl is importable here: the missing-trl message cannot be provoked")
    out = _run()
    assert out.returncode == 1
    assert out.stderr.strip() == "error: trl is not installed; pip install trl (or --trl-path DIR)"
