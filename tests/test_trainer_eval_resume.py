"""A `bonbench train` killed in the middle of a held-out evaluation (tests/run_train_eval_kill.py: the process dies
like a SIGKILL once the evaluation of step 2 has written 4 of its 12 samples) resumes both: the same command redoes the
step the saved state lacks, completes that evaluation's run by sampling only the keys the kill left missing, and ends
with every evaluation key exactly once, the same samples and evals.jsonl rows as an uninterrupted run, and its final
weights (torch.equal)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

from test_sampler_hf import build_tiny_model

HERE = Path(__file__).parent
CLI = [sys.executable, str(HERE / "run_train_eval_kill.py"), "--"]


def _args(tiny: str, out: Path) -> list[str]:
    return ["train", "--task", "tiny_train", "--objective", "test_rloo", "--name", "t", "--model", tiny, "--steps", "4",
            "--prompts-per-step", "2", "--group", "2", "--dtype", "float32", "--lr", "5e-2", "--warmup", "0",
            "--out", str(out), "--eval-task", "tiny_train", "--eval-every", "2", "--eval-metric", "pass@1,2",
            "--eval-n", "4"]


def _run(cmd: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, env={**os.environ, **env})


def _samples(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """Each evaluated step's sample rows, in file order."""
    return {p.parent.parent.name: [json.loads(line) for line in p.read_text().splitlines()]
            for p in sorted((folder / "evals" / "runs" / "tiny_train").glob("*/*/samples.jsonl"))}


def test_a_kill_during_an_evaluation_resumes_training_and_the_evaluation(tmp_path: Path) -> None:
    tiny = build_tiny_model(tmp_path / "model").path
    plain = _run(CLI + _args(tiny, tmp_path / "plain"))
    assert plain.returncode == 0, plain.stderr[-2000:]
    killed = _run(CLI + _args(tiny, tmp_path / "killed"), KILL_EVAL_STEP="2", KILL_AFTER="4")
    assert killed.returncode == 137, killed.stderr[-2000:]
    folder = tmp_path / "killed" / "checkpoints" / "t"
    cut = _samples(folder)
    assert len(cut["t-step0"]) == 12 and 4 <= len(cut["t-step2"]) < 12  # killed inside step 2's sampling
    assert [json.loads(line)["step"] for line in (folder / "evals.jsonl").read_text().splitlines()] == [0]
    resumed = _run(CLI + _args(tiny, tmp_path / "killed"))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resuming at step 1 of 4" in resumed.stderr and "1 logged step after the last save is redone" in resumed.stderr
    done, want = _samples(folder), _samples(tmp_path / "plain" / "checkpoints" / "t")
    assert sorted(done) == sorted(want) == ["t-step0", "t-step2", "t-step4"]
    for step, rows in done.items():
        keys = Counter((r["problem_id"], r["sample_idx"]) for r in rows)
        assert len(keys) == 12 and set(keys.values()) == {1}, step  # every evaluation key exactly once
        assert rows[:len(cut.get(step, []))] == cut.get(step, [])  # what the kill left was kept, not redone
        by_key = {(r["problem_id"], r["sample_idx"]): r["completion"] for r in rows}
        assert by_key == {(r["problem_id"], r["sample_idx"]): r["completion"] for r in want[step]}, step

    def evals(root: Path) -> list[dict[str, Any]]:
        rows = [json.loads(line) for line in (root / "evals.jsonl").read_text().splitlines()]
        return [{k: v for k, v in r.items() if k != "run"} for r in rows]

    assert [r["step"] for r in evals(folder)] == [0, 2, 4]
    assert evals(folder) == evals(tmp_path / "plain" / "checkpoints" / "t")
    a = torch.load(folder / "training_state" / "weights.pt", weights_only=True)
    b = torch.load(tmp_path / "plain" / "checkpoints" / "t" / "training_state" / "weights.pt", weights_only=True)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


pytestmark = pytest.mark.timeout(1800)
