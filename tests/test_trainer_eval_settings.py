"""Evaluation settings changed on resume (``apps/trainer/evaluate.py``): step 0 is evaluated again with
the base weights under the new settings, so every later step is paired with a step 0 sampled as it was;
two evaluations whose samples were drawn under other settings (another length limit) are never paired."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import trainer_plugin  # noqa: F401  (registers tiny_train)
from test_sampler_hf import build_tiny_model

from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.evaluate import comparable, settings
from bonbench.apps.trainer.loop import train


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_tiny_model(tmp_path_factory.mktemp("evalset") / "model").path


def _cfg(tiny: str, out: Path, **kw: Any) -> TrainConfig:
    base = dict(task="tiny_train", objective="test_rloo", name="t", model=tiny, steps=3, prompts_per_step=2, group=4,
                out=str(out), save_every=1, dtype="float32", lr=5e-2, warmup=0, progress=False,
                eval_task="tiny_train", eval_every=2, eval_metrics=("pass@1,2",), eval_n=3, eval_max_tokens=6)
    base.update(kw)
    return TrainConfig(**base)


def _evals(folder: Path) -> dict[int, dict[str, Any]]:
    return {r["step"]: r for r in map(json.loads, (folder / "evals.jsonl").read_text().splitlines())}


def _completions(run: str) -> dict[tuple[str, int], str]:
    rows = map(json.loads, (Path(run) / "samples.jsonl").read_text().splitlines())
    return {(r["problem_id"], r["sample_idx"]): r["completion"] for r in rows}


def test_a_resume_with_other_evaluation_settings_evaluates_step_0_again(tiny: str, tmp_path: Path) -> None:
    # trained 2 steps evaluating 2 samples of 4 tokens, resumed to 3 steps with 3 samples of 6 tokens
    resumed = train(_cfg(tiny, tmp_path / "resumed", steps=2, eval_n=2, eval_max_tokens=4))
    old_step0 = _evals(resumed)[0]["run"]
    assert settings(_evals(resumed)[0])["max_tokens"] == 4
    train(_cfg(tiny, tmp_path / "resumed"))
    fresh = train(_cfg(tiny, tmp_path / "fresh"))  # the new settings from the start
    got, want = _evals(resumed), _evals(fresh)
    assert sorted(got) == sorted(want) == [0, 2, 3]
    # step 0 again: the new settings, and exactly the samples the fresh run drew with its LoRA at zero
    assert got[0]["run"] != old_step0 and settings(got[0]) == settings(want[0])
    assert _completions(got[0]["run"]) == _completions(want[0]["run"])
    assert got[0]["metrics"] == want[0]["metrics"]
    # step 2 (evaluated again on resume, as it is due) and step 3 are paired with it, as in the fresh
    # run (same weights: the hf backend resumes exactly)
    for step in (2, 3):
        assert settings(got[step]) == settings(want[step]) and got[step]["metrics"] == want[step]["metrics"]
        assert got[step]["vs_step0"] == want[step]["vs_step0"] and got[step]["vs_step0"]["pass@1"]["n_problems"] == 3


def test_evaluations_under_other_settings_are_not_paired(tiny: str, tmp_path: Path) -> None:
    short = train(_cfg(tiny, tmp_path / "short", steps=2, eval_max_tokens=4))
    long = train(_cfg(tiny, tmp_path / "long", steps=2))
    assert comparable(_evals(short)[0], _evals(short)[2]) and comparable(_evals(long)[0], _evals(long)[2])
    assert not comparable(_evals(short)[2], _evals(long)[0])  # 4 tokens against 6: another quantity
