"""Held-out evaluation during training (``apps/trainer/evaluate.py``) on a tiny random Gemma 3:
every evaluated step is a normal run of the runner under CHECKPOINT/evals/ (step 0's samples are
those of `bonbench run` on the base model with the same seed), one run directory per step, each paired to step 0 in
CHECKPOINT/evals.jsonl, and a run with evaluation ends at exactly the weights of the same run without it; bad evaluation
settings are one `error:` line before training starts."""

from __future__ import annotations

import json
import sys
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


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_tiny_model(tmp_path_factory.mktemp("eval") / "model").path


def _cfg(tiny: str, out: Path, **kw: Any) -> TrainConfig:
    base = dict(task="tiny_train", objective="test_rloo", name="t", model=tiny, steps=4, prompts_per_step=2, group=4,
                out=str(out), save_every=1, dtype="float32", lr=5e-2, warmup=0, progress=False)
    base.update(kw)
    return TrainConfig(**base)


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return torch.load(folder / "training_state" / "weights.pt", weights_only=True)


def test_evaluation_is_a_normal_run_per_step_and_leaves_training_alone(tiny: str, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    plain = train(_cfg(tiny, tmp_path / "plain"))
    watched = train(_cfg(tiny, tmp_path / "watched", eval_task="tiny_train", eval_every=2,
                         eval_metrics=("pass@1,2",), eval_n=3))
    a, b = _weights(plain), _weights(watched)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)  # evaluation moved nothing
    assert [r["step"] for r in map(json.loads, (watched / "log.jsonl").read_text().splitlines())] == [0, 1, 2, 3]
    runs = sorted((watched / "evals" / "runs" / "tiny_train").glob("*/*/metrics.json"))
    assert sorted(p.parent.parent.name for p in runs) == ["t-step0", "t-step2", "t-step4"]  # step 0, every 2, the end
    for path in runs:
        doc = json.loads(path.read_text())
        assert {"pass@1", "pass@2"} <= set(doc["metrics"]) and doc["n"] == 3
        config = json.loads((path.parent / "config.json").read_text())["config"]
        assert config["task_args"] == {} and config["backend"] == "hf" and config["seed"] == 0
        rows = (path.parent / "samples.jsonl").read_text().splitlines()
        assert len(rows) == 3 * 3  # the test split's 3 problems x --eval-n 3, independent of --group 4
    # evals.jsonl: one row per evaluated step, each metric paired to step 0 on the same problems
    evals = [json.loads(line) for line in (watched / "evals.jsonl").read_text().splitlines()]
    assert [e["step"] for e in evals] == [0, 2, 4] and "vs_step0" not in evals[0]
    docs = {e["step"]: json.loads((Path(e["run"]) / "metrics.json").read_text()) for e in evals}
    for e in evals[1:]:
        assert e["metrics"]["pass@2"] == docs[e["step"]]["metrics"]["pass@2"]
        for name in ("pass@1", "pass@2"):
            now, then = docs[e["step"]]["per_problem"][name], docs[0]["per_problem"][name]
            paired = e["vs_step0"][name]
            assert paired["diff"] == pytest.approx(sum(now[p] - then[p] for p in now) / len(now))
            assert paired["lo"] <= paired["diff"] <= paired["hi"] and paired["n_problems"] == 3
    # step 0 is the base model (LoRA starts at zero): the samples of `bonbench run` on it, same seed
    assert main(["run", "--task", "tiny_train", "--model", tiny, "--backend", "hf", "--dtype", "float32", "--n", "3",
                 "--metric", "pass@1,2", "--out", str(tmp_path / "base")]) == 0
    base_run = Path(capsys.readouterr().out.strip().splitlines()[-1])
    step0 = next(p.parent for p in runs if p.parent.parent.name == "t-step0")

    def completions(run: Path) -> dict[tuple[str, int], str]:
        rows = map(json.loads, (run / "samples.jsonl").read_text().splitlines())
        return {(r["problem_id"], r["sample_idx"]): r["completion"] for r in rows}

    assert completions(step0) == completions(base_run)
    # and a normal run: re-scored by `bonbench score`
    assert main(["score", str(step0), "--metric", "maj@2"]) == 0
    assert "maj@2" in json.loads((step0 / "metrics.json").read_text())["metrics"]


@pytest.mark.parametrize("args, message", [
    (["--eval-task", "tiny_train", "--eval-every", "0"], "--eval-every"),
    (["--eval-every", "2"], "add --eval-task TASK"),
    (["--eval-task", "nope"], "--eval-task nope: "),
    (["--eval-task", "tiny_train", "--eval-metric", "pass@4", "--eval-n", "2"], "--eval-task tiny_train: "),
    (["--eval-task", "tiny_train", "--eval-metric", "pass@"], "--eval-task tiny_train: "),
])
def test_bad_evaluation_settings_are_one_line_before_training(tiny: str, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str], args: list[str],
                                                              message: str) -> None:
    base = ["train", "--task", "tiny_train", "--objective", "test_rloo", "--name", "x", "--model", tiny,
            "--out", str(tmp_path), "--steps", "1"]
    code = main(base + args)
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "checkpoints").exists()  # before training started
