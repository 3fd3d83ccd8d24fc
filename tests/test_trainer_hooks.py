"""The training loop's hooks (``apps/trainer/hooks.py``) on a tiny random Gemma 3: a callback sees
the run begin, each step's logged row, then its save, and the end, in that order and naming the same
steps as the files; a callback that stops the run ends it after that step with its state saved
and exported, at exactly the weights of a run that was asked for that many steps."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

import trainer_plugin  # noqa: F401  (registers tiny_train)
from test_sampler_hf import build_tiny_model

from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.hooks import Callback, Callbacks
from bonbench.apps.trainer.loop import train


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_tiny_model(tmp_path_factory.mktemp("hooks") / "model").path


def _cfg(tiny: str, out: Path, **kw: Any) -> TrainConfig:
    base = dict(task="tiny_train", objective="test_rloo", name="t", model=tiny, steps=3, prompts_per_step=2, group=4,
                out=str(out), save_every=1, dtype="float32", lr=5e-2, warmup=0, progress=False)
    base.update(kw)
    return TrainConfig(**base)


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


class Recorder(Callback):
    def __init__(self, stop_after: int | None = None) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.stop_after = stop_after
        self.done = 0

    def on_train_begin(self, start: int, total: int) -> None:
        self.events.append(("begin", start, total))

    def on_step_end(self, done: int, row: Mapping[str, Any]) -> None:
        self.done = done
        self.events.append(("step", done, dict(row)))

    def on_checkpoint(self, done: int) -> None:
        self.events.append(("checkpoint", done))

    def should_stop(self) -> str | None:
        return "enough" if self.stop_after is not None and self.done >= self.stop_after else None

    def on_train_end(self, done: int) -> None:
        self.events.append(("end", done))


def test_a_callback_sees_each_step_its_save_and_the_end(tiny: str, tmp_path: Path) -> None:
    rec = Recorder()
    progress: list[tuple[int, int]] = []
    folder = train(_cfg(tiny, tmp_path), lambda done, total, row: progress.append((done, total)), [rec])
    log = _rows(folder / "log.jsonl")
    kinds = [e[0] for e in rec.events]
    assert kinds == ["begin", "step", "checkpoint", "step", "checkpoint", "step", "checkpoint", "end"]
    assert rec.events[0] == ("begin", 0, 3) and rec.events[-1] == ("end", 3)
    assert [e[1] for e in rec.events if e[0] == "checkpoint"] == [1, 2, 3]
    # on_step_end(done, row): the row just appended to log.jsonl, of the step done - 1
    assert [(e[1], e[2]) for e in rec.events if e[0] == "step"] == [(row["step"] + 1, row) for row in log]
    assert progress == [(0, 3), (1, 3), (2, 3), (3, 3)]  # on_step(done, total, row) is a callback too


def test_a_callback_that_stops_ends_at_the_weights_of_a_shorter_run(tiny: str, tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    rec = Recorder(stop_after=2)
    with caplog.at_level(logging.INFO, logger="bonbench.apps.trainer"):
        stopped = train(_cfg(tiny, tmp_path / "a", steps=4, save_every=3), callbacks=[rec])
    assert "stopping after step 2 of 4: enough" in caplog.text
    # asked after each step's row, saved at the stop although --save-every 3 was not due
    assert [e[0] for e in rec.events] == ["begin", "step", "step", "checkpoint", "end"]
    assert [row["step"] for row in _rows(stopped / "log.jsonl")] == [0, 1]
    assert json.loads((stopped / "training_state" / "state.json").read_text())["step"] == 2
    assert json.loads((stopped / "bonbench_manifest.json").read_text())["steps"] == 2
    short = train(_cfg(tiny, tmp_path / "b", steps=2))
    got = torch.load(stopped / "training_state" / "weights.pt", weights_only=True)
    want = torch.load(short / "training_state" / "weights.pt", weights_only=True)
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in got)


def test_callbacks_call_each_in_order_and_the_first_reason_wins() -> None:
    class Says(Callback):
        def __init__(self, reason: str | None, seen: list[str]) -> None:
            self.reason, self.seen = reason, seen

        def on_checkpoint(self, done: int) -> None:
            self.seen.append(f"{self.reason}:{done}")

        def should_stop(self) -> str | None:
            return self.reason

    seen: list[str] = []
    hooks = Callbacks([Says(None, seen), Says("kl", seen), Says("entropy", seen)])
    hooks.on_checkpoint(5)
    assert seen == ["None:5", "kl:5", "entropy:5"]
    assert hooks.should_stop() == "kl"
    assert Callbacks([Says(None, seen)]).should_stop() is None
