"""A default that changed in issue 24 (bon_rlb's p_estimate, vbon's ties) never resumes an older
checkpoint under the new estimator: new configs record the value they train with, and an older
record, which names none, compares as the old default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bonbench.api.objective import CHANGED_DEFAULTS, REGISTRY
from bonbench.apps.trainer.checkpoint import CheckpointDir
from bonbench.apps.trainer.config import TrainConfig, training_doc
from bonbench.core.errors import BonbenchError


@pytest.mark.parametrize("objective", sorted(CHANGED_DEFAULTS))
def test_new_configs_record_the_current_default(objective: str) -> None:
    cfg = TrainConfig(task="math", objective=objective, name="x")
    for key in CHANGED_DEFAULTS[objective]:
        assert cfg.objective_options[key] == REGISTRY[objective].options[key]
        assert cfg.objective_options[key] != CHANGED_DEFAULTS[objective][key]


@pytest.mark.parametrize("objective", sorted(CHANGED_DEFAULTS))
def test_an_old_record_means_the_old_default(objective: str) -> None:
    cfg = TrainConfig(task="math", objective=objective, name="x")
    old = {**cfg.to_json(), "objective_options": {}}  # written before the change: no value named
    assert cfg.differences(old) == ["objective_options"]
    same_as_old = TrainConfig(task="math", objective=objective, name="x",
                              objective_options=dict(CHANGED_DEFAULTS[objective]))
    assert same_as_old.differences(old) == []
    assert training_doc(old)["objective_options"] == CHANGED_DEFAULTS[objective]


def test_unchanged_objectives_keep_their_options_and_hash() -> None:
    cfg = TrainConfig(task="math", objective="passk", name="x", objective_options={"k": 4})
    assert dict(cfg.objective_options) == {"k": 4}
    assert cfg.differences({**cfg.to_json()}) == []


def test_resuming_an_old_bon_rlb_checkpoint_names_the_old_estimator(tmp_path: Path) -> None:
    cfg = TrainConfig(task="math", objective="bon_rlb", name="old", out=str(tmp_path))
    ckpt = CheckpointDir(tmp_path / "checkpoints" / "old")
    ckpt.root.mkdir(parents=True)
    (ckpt.root / "train_config.json").write_text(json.dumps({**cfg.to_json(), "objective_options": {}}))
    (ckpt.manifest_path).write_text("{}")  # a finished run: settings may not change
    with pytest.raises(BonbenchError, match="-O p_estimate=plugin"):
        ckpt.check_or_write_config(cfg)
