"""A search run on the vllm backend from the command line: the run builds its engine with what the
vLLM step sampler needs (prefix caching on, chunked prefill off: ``vllm_steps.step_engine_args``),
so ``bonbench run --strategy ... --backend vllm`` searches on vllm-cpu too (without those settings
the step sampler refuses the engine in one line). The embedded Gemma 3 270M is the policy and a
tiny Math-Shepherd PRM the scorer, on one real MATH problem.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from prm_models import build_math_shepherd

from bonbench.apps.cli import main

pytestmark = pytest.mark.slow


def test_a_beam_search_run_on_the_vllm_backend(tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("vllm")
    if "VLLM_CPU_KVCACHE_SPACE" not in os.environ:
        monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")  # the 270M model needs little; shared machines have little
    prm = build_math_shepherd(tmp_path / "math-shepherd-mistral-7b-prm")
    out = tmp_path / "out"
    args = ["run", "--task", "math", "--limit", "1", "--n", "4", "--strategy", "beam", "-S", "width=2",
            "-S", "max_iterations=2", "--verifier", f"prm:{prm}", "--backend", "vllm", "--dtype", "float32",
            "--max-model-len", "2048", "--max-tokens", "24", "--temperature", "0.8", "--data-dir", str(data_dir),
            "--out", str(out), "--n-boot", "20"]
    assert main(args) == 0
    (cfg,) = out.glob("runs/math/*/*/config.json")
    root = cfg.parent
    samples = [json.loads(line) for line in (root / "samples.jsonl").read_text().splitlines()]
    assert sorted(s["sample_idx"] for s in samples) == [0, 1, 2, 3]
    ledger = [json.loads(line) for line in (root / "search" / "ledger.jsonl").read_text().splitlines()]
    assert len(ledger) == 1
    metrics = json.loads((root / "metrics.json").read_text())["metrics"]
    assert "bon@4" in metrics
    assert main(args) == 0  # resumes: nothing left to search, the same samples
    assert len((root / "samples.jsonl").read_text().splitlines()) == 4
