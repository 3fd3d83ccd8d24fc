"""``--eval-max-tokens``: the held-out evaluation's sample length is its own setting (a run trained at
128 tokens on MATH, whose task default is 512, is evaluated at the length the leaderboard used), it
reaches the evaluation's run config and samples, it is not part of what is trained, and without
``--eval-task`` it is one `error:` line before training."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import trainer_plugin  # noqa: F401  (registers tiny_train)
from test_sampler_hf import build_tiny_model

from bonbench.apps.cli import main
from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.loop import train


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_tiny_model(tmp_path_factory.mktemp("evaltok") / "model").path


def _cfg(tiny: str, out: Path, **kw: object) -> TrainConfig:
    return TrainConfig(task="tiny_train", objective="test_rloo", name="t", model=tiny, steps=1, prompts_per_step=2,
                       group=2, out=str(out), dtype="float32", warmup=0, progress=False, eval_task="tiny_train",
                       eval_n=2, **kw)  # type: ignore[arg-type]  # the keyword settings of one test


def test_the_evaluation_samples_at_its_own_length(tiny: str, tmp_path: Path) -> None:
    folder = train(_cfg(tiny, tmp_path, eval_max_tokens=1))
    runs = sorted((folder / "evals" / "runs" / "tiny_train").glob("*/*/config.json"))
    assert len(runs) == 2  # step 0 and the end
    for path in runs:
        assert json.loads(path.read_text())["config"]["max_tokens"] == 1
        rows = [json.loads(line) for line in (path.parent / "samples.jsonl").read_text().splitlines()]
        assert rows and all(r["n_tokens"] <= 1 for r in rows)
    # what is trained does not depend on it: the same checkpoint resumes with another length
    assert _cfg(tiny, tmp_path, eval_max_tokens=1).differences(_cfg(tiny, tmp_path, eval_max_tokens=7).to_json()) == []


@pytest.mark.parametrize("args, message", [
    (["--eval-max-tokens", "8"], "add --eval-task TASK"),
    (["--eval-task", "tiny_train", "--eval-max-tokens", "0"], "--eval-max-tokens"),
])
def test_bad_eval_max_tokens_is_one_line_before_training(tiny: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str], args: list[str],
                                                         message: str) -> None:
    code = main(["train", "--task", "tiny_train", "--objective", "test_rloo", "--name", "x", "--model", tiny,
                 "--out", str(tmp_path), "--steps", "1"] + args)
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "checkpoints").exists()
