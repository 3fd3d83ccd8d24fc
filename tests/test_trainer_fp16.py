"""``--dtype float16`` training scales the loss (torch's GradScaler) so that small gradients do not
underflow. Found on an H100 (scripts/gpu_check.sh): one LoRA step on a random Gemma 3 270M had a
gradient norm of 0.0088 in bf16 and exactly 0.0 in fp16. The tiny model's gradients are larger, so the
CPU tests scale the weights down until fp16 without loss scaling underflows the same way."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

import trainer_plugin  # noqa: F401  (registers tiny_train)
from test_sampler_hf import build_tiny_model

from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.loop import Trainer, train
from bonbench.apps.trainer.setup import prepare_training

PAIRS = [([1, 3, 4, 10], [3, 4]), ([1, 5], [6, 3, 3, 7]), ([1, 4, 4, 4, 5], [5]), ([1, 6], [9])]
WEIGHTS = np.array([0.5, -1.25, 2.0, 0.75])
GROUPS = [[0, 1], [2, 3]]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_tiny_model(tmp_path_factory.mktemp("fp16") / "model").path


def _trainer(tiny: str, out: Path, dtype: str, **kw: Any) -> Trainer:
    return Trainer(prepare_training(_cfg(tiny, out, dtype, **kw)))


def _cfg(tiny: str, out: Path, dtype: str, **kw: Any) -> TrainConfig:
    base = {"task": "tiny_train", "objective": "test_rloo", "name": "t", "model": tiny, "steps": 1, "prompts_per_step": 2,
            "group": 4, "out": str(out), "save_every": 1, "dtype": dtype, "lr": 5e-2, "warmup": 0, "progress": False}
    return TrainConfig(**{**base, **kw})


def test_small_float16_gradients_survive(tiny: str, tmp_path: Path) -> None:
    """The loss is linear in the weights, so the gradient at 1e-7 of them is 1e-4 of the gradient at
    1e-3 of them (same model, same LoRA initialisation). Unscaled fp16 gave 0.0 at 1e-7 here (a relative
    error of 1); float32 meets the check to 3e-7."""
    trainer = _trainer(tiny, tmp_path, "float16")
    grads = {}
    for size in (1e-3, 1e-7):
        stats = trainer._optimise_grads(PAIRS, size * WEIGHTS, GROUPS)
        grads[size] = torch.cat([p.grad.flatten().double() for p in trainer.policy.trainable()])
        assert stats["grad_norm"] == pytest.approx(float(grads[size].norm()), rel=1e-4)  # read unscaled
    assert float(grads[1e-7].norm()) > 0
    assert float((grads[1e-7] * 1e4 - grads[1e-3]).norm() / grads[1e-3].norm()) < 0.01


def test_float16_overflow_skips_the_step_and_halves_the_scale(tiny: str, tmp_path: Path) -> None:
    """At full size the first scaled gradient overflows fp16: the step is skipped, not taken with inf."""
    trainer = _trainer(tiny, tmp_path, "float16")
    before = [p.detach().clone() for p in trainer.policy.trainable()]
    stats = trainer._optimise(PAIRS, WEIGHTS, GROUPS, 0.0)
    assert stats["loss_scale"] == 2.0 ** 16 and not np.isfinite(stats["grad_norm"])
    assert all(torch.equal(a, p) for a, p in zip(before, trainer.policy.trainable(), strict=True))
    assert trainer.scaler.get_scale() == 2.0 ** 15
    small = trainer._optimise(PAIRS, 1e-3 * WEIGHTS, GROUPS, 0.0)  # fits at the halved scale: taken
    assert small["loss_scale"] == 2.0 ** 15 and np.isfinite(small["grad_norm"])
    assert any(not torch.equal(a, p) for a, p in zip(before, trainer.policy.trainable(), strict=True))


def test_bf16_and_float32_leave_the_scaler_off(tiny: str, tmp_path: Path) -> None:
    for dtype in ("bfloat16", "float32"):
        trainer = _trainer(tiny, tmp_path / dtype, dtype)
        assert not trainer.scaler.is_enabled()
        assert "loss_scale" not in trainer._optimise(PAIRS, WEIGHTS, GROUPS, 0.0)


def test_float16_resume_restores_the_loss_scale(tiny: str, tmp_path: Path) -> None:
    """The scale is part of the saved state: a resumed run continues at the scale the run had reached."""
    first = _trainer(tiny, tmp_path, "float16")
    first._optimise(PAIRS, WEIGHTS, GROUPS, 0.0)  # overflows: the scale halves
    first._save(1)
    resumed = _trainer(tiny, tmp_path, "float16")
    assert resumed.scaler.get_scale() == 2.0 ** 16
    assert resumed._restore() == 1
    assert resumed.scaler.get_scale() == 2.0 ** 15 and resumed.scaler.state_dict() == first.scaler.state_dict()


def test_float16_run_resumed_equals_an_uninterrupted_one(tiny: str, tmp_path: Path) -> None:
    """Three steps at once, or one then a resumed two more: the same scaler state and weights."""
    whole = train(_cfg(tiny, tmp_path / "whole", "float16", steps=3))
    train(_cfg(tiny, tmp_path / "split", "float16", steps=1))
    split = train(_cfg(tiny, tmp_path / "split", "float16", steps=3))
    a = torch.load(whole / "training_state" / "optimizer.pt", weights_only=False)["scaler"]
    b = torch.load(split / "training_state" / "optimizer.pt", weights_only=False)["scaler"]
    assert a == b and a["scale"] > 0
    wa = torch.load(whole / "training_state" / "weights.pt", weights_only=True)
    wb = torch.load(split / "training_state" / "weights.pt", weights_only=True)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
