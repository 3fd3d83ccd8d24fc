"""``--keep-best METRIC`` (``apps/trainer/best.py``) on a tiny random Gemma 3 with a held-out task whose grades are
scripted per step: the kept step is the first evaluated one until a later one beats it beyond the paired bootstrap CI,
a higher point estimate inside the noise replaces nothing, CHECKPOINT/best holds exactly the weights of that step (the
export of a run asked for that many steps), `bonbench run --model CHECKPOINT/best` evaluates it, and both manifests
record it; a metric the evaluation does not compute is one `error:` line before training."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import trainer_plugin  # noqa: F401  (registers tiny_train)
from test_sampler_hf import build_tiny_model
from trainer_scripted_eval import SCRIPT, AtStep

from bonbench.apps.cli import main
from bonbench.apps.trainer.best import beats
from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.loop import train


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_tiny_model(tmp_path_factory.mktemp("best") / "model").path


def _cfg(tiny: str, out: Path, **kw: Any) -> TrainConfig:
    base = dict(task="tiny_train", objective="test_rloo", name="t", model=tiny, steps=4, prompts_per_step=2, group=2,
                out=str(out), save_every=1, dtype="float32", lr=5e-2, warmup=0, progress=False)
    base.update(kw)
    return TrainConfig(**base)


def test_the_rule_needs_the_whole_interval_on_the_better_side() -> None:
    assert beats({"lo": 0.01, "hi": 0.5}, "higher") and not beats({"lo": 0.0, "hi": 0.5}, "higher")
    assert beats({"lo": -0.5, "hi": -0.01}, "lower") and not beats({"lo": -0.5, "hi": 0.0}, "lower")


def test_keep_best_keeps_the_step_that_beats_the_kept_one_beyond_noise(tiny: str, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str],
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    SCRIPT.clear()
    SCRIPT.update({0: [0] * 8,
                   1: [1] + [0] * 7,  # +0.125 over step 0: inside the noise (the interval reaches 0)
                   2: [1] * 6 + [0] * 2,  # +0.75 over step 0: kept
                   3: [1] * 8, 4: [1] * 8})  # +0.25 over step 2 from two problems: inside the noise
    with caplog.at_level(logging.INFO, logger="bonbench.apps.trainer"):
        folder = train(_cfg(tiny, tmp_path / "a", eval_task="scripted_eval", eval_every=1, eval_metrics=("pass@1",),
                            eval_n=1, keep_best="pass@1"), callbacks=[AtStep()])
    kept_lines = [m for m in caplog.messages if m.startswith("keeping step")]
    assert [line.split()[2] for line in kept_lines] == ["0", "2"]  # step 0 first, then step 2 alone
    assert kept_lines[1].startswith("keeping step 2 as the best at pass@1 (+0.750 [")
    assert caplog.messages[-1] == (f"best evaluated step at pass@1: 2 of 4; evaluate it with "
                                   f"`bonbench run --model {tmp_path / 'a' / 'checkpoints' / 't' / 'best'}`")
    evals = {e["step"]: e for e in map(json.loads, (folder / "evals.jsonl").read_text().splitlines())}
    assert [evals[s]["metrics"]["pass@1"]["value"] for s in range(5)] == [0.0, 0.125, 0.75, 1.0, 1.0]
    assert evals[1]["vs_step0"]["pass@1"]["lo"] <= 0 < evals[2]["vs_step0"]["pass@1"]["lo"]
    best = json.loads((folder / "best" / "bonbench_manifest.json").read_text())
    manifest = json.loads((folder / "bonbench_manifest.json").read_text())
    assert best["keep_best"]["step"] == 2 and best["steps"] == 2 and [r["step"] for r in best["log"]] == [0, 1]
    assert manifest["keep_best"] == best["keep_best"] and best["keep_best"]["metric"] == "pass@1"
    assert "entirely above 0" in best["keep_best"]["rule"] and manifest["steps"] == 4
    # the kept copy is the export of the weights after 2 steps: a run asked for 2 steps exports the same bytes
    two = train(_cfg(tiny, tmp_path / "b", steps=2))
    assert best["weights_sha256"] == json.loads((two / "bonbench_manifest.json").read_text())["weights_sha256"]
    assert best["weights_sha256"] != manifest["weights_sha256"]
    # a loadable checkpoint: `bonbench run --model CHECKPOINT/best`
    capsys.readouterr()
    assert main(["run", "--task", "tiny_train", "--model", str(folder / "best"), "--backend", "hf", "--n", "2",
                 "--metric", "pass@1", "--out", str(tmp_path / "runs")]) == 0
    run = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert json.loads((run / "config.json").read_text())["config"]["model"] == str(folder / "best")


@pytest.mark.parametrize("args, message", [
    (["--eval-task", "tiny_train", "--eval-metric", "pass@1", "--keep-best", "pass@2"],
     "--keep-best pass@2: the evaluation does not compute pass@2"),
    (["--eval-task", "tiny_train", "--keep-best", "pass@"], "--keep-best pass@: "),
    (["--keep-best", "pass@1"], "add --eval-task TASK"),
])
def test_bad_keep_best_is_one_line_before_training(tiny: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   args: list[str], message: str) -> None:
    base = ["train", "--task", "tiny_train", "--objective", "test_rloo", "--name", "x", "--model", tiny,
            "--out", str(tmp_path), "--steps", "1"]
    code = main(base + args)
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "checkpoints").exists()


def test_the_kept_step_is_read_back_and_a_cut_swap_repaired(tmp_path: Path) -> None:
    from bonbench.apps.trainer.best import kept_step

    assert kept_step(tmp_path) is None
    old = tmp_path / "best.old"
    old.mkdir()
    (old / "bonbench_manifest.json").write_text(json.dumps({"keep_best": {"metric": "pass@1", "step": 3, "rule": "r"}}))
    (tmp_path / "best").mkdir()  # killed between the two renames: best/ not complete, best.old/ is the kept copy
    assert kept_step(tmp_path) == 3 and not old.exists()
    assert json.loads((tmp_path / "best" / "bonbench_manifest.json").read_text())["keep_best"]["step"] == 3
