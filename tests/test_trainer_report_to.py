"""``--report-to tensorboard|wandb`` (``apps/trainer/loggers.py``) on a tiny random Gemma 3: the event files TensorBoard
reads back (its own ``EventAccumulator``) and the offline W&B run file (read with wandb's own record reader) hold every
step's log.jsonl row under TRL's names and every evaluation with its interval ends, at the right steps; a missing package
is one `error:` line before training."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import trainer_plugin  # noqa: F401  (registers tiny_train)
from test_sampler_hf import build_tiny_model

from bonbench.apps.cli import main
from bonbench.apps.trainer import loggers
from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.loop import train


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_tiny_model(tmp_path_factory.mktemp("report") / "model").path


def _cfg(tiny: str, out: Path, **kw: Any) -> TrainConfig:
    base = dict(task="tiny_train", objective="test_rloo", name="t", model=tiny, steps=3, prompts_per_step=2, group=2,
                out=str(out), save_every=1, dtype="float32", lr=5e-2, warmup=0, progress=False, eval_task="tiny_train",
                eval_every=2, eval_metrics=("pass@1",), eval_n=2)
    base.update(kw)
    return TrainConfig(**base)


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _expected(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """What the loggers must hold, from log.jsonl and evals.jsonl (written independently of loggers.NAMES)."""
    want: dict[str, list[tuple[int, float]]] = {}
    tokens = 0
    for row in _rows(folder / "log.jsonl"):
        done = row["step"] + 1
        tokens += row["tokens"]
        for ours, trl in [("reward", "reward"), ("reward_std", "reward_std"), ("kl_ref", "kl"), ("entropy", "entropy"),
                          ("loss", "loss"), ("lr", "learning_rate"), ("grad_norm", "grad_norm"),
                          ("completion_length", "completions/mean_length"), ("clipped_ratio", "completions/clipped_ratio"),
                          ("clip_frac", "clip_ratio/region_mean"), ("seconds", "step_time")]:
            want.setdefault(f"train/{trl}", []).append((done, row[ours]))
        want.setdefault("train/num_tokens", []).append((done, tokens))
    for e in _rows(folder / "evals.jsonl"):
        m = e["metrics"]["pass@1"]
        want.setdefault("eval/pass@1", []).append((e["step"], m["value"]))
        want.setdefault("eval/pass@1/ci_lo", []).append((e["step"], m["ci95"][0]))
        want.setdefault("eval/pass@1/ci_hi", []).append((e["step"], m["ci95"][1]))
        if "vs_step0" in e:
            want.setdefault("eval/pass@1/vs_step0_lo", []).append((e["step"], e["vs_step0"]["pass@1"]["lo"]))
    return want


def test_tensorboard_event_files_hold_the_log_under_trl_names(tiny: str, tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    folder = train(_cfg(tiny, tmp_path, report_to="tensorboard"))
    acc = EventAccumulator(str(folder / "tensorboard"))
    acc.Reload()
    want = _expected(folder)
    assert set(want) <= set(acc.Tags()["scalars"])
    assert [s for s, _ in want["eval/pass@1"]] == [0, 2, 3] and [s for s, _ in want["train/reward"]] == [1, 2, 3]
    for tag, points in want.items():
        got = [(e.step, e.value) for e in acc.Scalars(tag)]
        assert [s for s, _ in got] == [s for s, _ in points], tag
        assert [v for _, v in got] == pytest.approx([v for _, v in points], rel=1e-6), tag  # float32 in the file


def test_wandb_offline_run_holds_the_log_under_trl_names(tiny: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wandb")
    from wandb.proto import wandb_internal_pb2

    monkeypatch.delenv("WANDB_MODE", raising=False)  # offline is the default here
    monkeypatch.setenv("WANDB_SILENT", "true")
    folder = train(_cfg(tiny, tmp_path, report_to="wandb"))
    [run_file] = (folder / "wandb").glob("offline-run-*/run-*.wandb")
    got: dict[str, list[tuple[int, float]]] = {}
    for data in _wandb_records(run_file.read_bytes()):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(data)
        if record.WhichOneof("record_type") != "history":
            continue
        items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item}
        for key, value in items.items():
            if key.startswith(("train/", "eval/")):
                got.setdefault(key, []).append((int(items["_step"]), value))
    want = _expected(folder)
    assert set(want) <= set(got)
    for key, points in want.items():
        assert [s for s, _ in got[key]] == [s for s, _ in points], key
        assert [v for _, v in got[key]] == pytest.approx([v for _, v in points], rel=1e-12), key


def _wandb_records(data: bytes) -> list[bytes]:
    """The records of a ``.wandb`` file: a 7-byte header (``:W&B``, magic, version), then LevelDB's log
    format in 32 KiB blocks, each chunk ``crc32c u32, length u16, type u8`` (1 full, 2 first, 3 middle,
    4 last); wandb 0.31's Python package no longer ships its reader."""
    assert data[:4] == b":W&B"
    block, pos, out, buf = 32768, 7, [], b""
    while pos + 7 <= len(data):
        left = block - pos % block
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if left < 7 or (kind == 0 and length == 0):  # a block's padding
            pos += left
            continue
        buf += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            out.append(buf)
            buf = b""
    return out


def test_a_missing_package_is_one_line(tiny: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(loggers.PACKAGES, "tensorboard", "no_such_tensorboard_module")
    code = main(["train", "--task", "tiny_train", "--objective", "test_rloo", "--name", "x", "--model", tiny,
                 "--out", str(tmp_path), "--steps", "1", "--report-to", "tensorboard"])
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert err.startswith("error: --report-to tensorboard needs the no_such_tensorboard_module package: pip install "
                          "'bonbench[tensorboard]'")
    assert not (tmp_path / "checkpoints").exists()


def test_a_metric_without_interval_is_logged_without_its_bounds() -> None:
    # IMDB's kl_bon@k is closed form: evals.jsonl holds "ci95": [null, null]; `--report-to tensorboard` on an IMDB
    # run with evaluation crashed on it (TypeError from float(None)) when the row was logged
    row = {"step": 3, "metrics": {"kl_bon@4": {"value": 0.59, "ci95": [None, None]},
                                  "mean": {"value": 0.7, "ci95": [0.6, 0.8]}},
           "vs_step0": {"kl_bon@4": {"diff": 0.0, "lo": 0.0, "hi": 0.0}}}
    assert loggers.eval_scalars(row) == {"eval/kl_bon@4": 0.59, "eval/mean": 0.7, "eval/mean/ci_lo": 0.6,
                                         "eval/mean/ci_hi": 0.8, "eval/kl_bon@4/vs_step0": 0.0,
                                         "eval/kl_bon@4/vs_step0_lo": 0.0, "eval/kl_bon@4/vs_step0_hi": 0.0}
