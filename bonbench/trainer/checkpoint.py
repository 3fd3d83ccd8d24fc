"""A checkpoint folder ``results/checkpoints/<name>/``: resumable state, logs, and the export.

Layout::

    train_config.json      the TrainConfig it was trained with (resume checks it)
    training_state/        trainable weights, AdamW and scheduler state, EMA, value head and its AdamW, RNG,
                           step (atomic)
    log.jsonl              one row per optimiser step (reward, KL, entropy, grad norm/variance, speed)
    rollouts.jsonl         every rollout sample, keyed (step, problem_id, sample_idx), with reward and weight
    ref_samples.jsonl      M reference samples per prompt with rewards (vBoN), keyed (problem_id, sample_idx)
    config.json of the model, *.safetensors, tokenizer files, bonbench_manifest.json   (the export)

The training state is written to a temporary folder and renamed into place, so a SIGKILL leaves
either the previous state or the new one. Rows of ``log.jsonl`` / ``rollouts.jsonl`` past the saved
step are dropped on resume (they are redone identically: sampling seeds derive from the step).
The manifest is written last: a folder with a manifest is a finished, loadable checkpoint
(``bonbench.models`` refuses a folder with training state and no manifest). In a data-parallel job
only rank 0 writes here; every rank reads the same saved state on resume.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import torch

from bonbench.errors import BonbenchError
from bonbench.models import CHECKPOINT_MANIFEST, TRAINING_STATE
from bonbench.store import atomic_write_json, read_json
from bonbench.trainer.config import TrainConfig

TRAIN_CONFIG = "train_config.json"


class CheckpointDir:
    """Files of one checkpoint folder (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.state_dir = self.root / TRAINING_STATE
        self.log_path = self.root / "log.jsonl"
        self.rollouts_path = self.root / "rollouts.jsonl"
        self.ref_samples_path = self.root / "ref_samples.jsonl"
        self.manifest_path = self.root / CHECKPOINT_MANIFEST

    # ---------------------------------------------------------------- config

    def check_or_write_config(self, cfg: TrainConfig, write: bool = True) -> None:
        """First run: record the config. Later runs: the same settings (steps may grow) or an error.
        ``write=False`` checks only (the ranks of a data-parallel job other than rank 0)."""
        path = self.root / TRAIN_CONFIG
        if path.exists():
            old = read_json(path)
            diff = cfg.differences(old)
            if diff:
                raise BonbenchError(f"checkpoint {self.root.name!r} was trained with other settings ({', '.join(diff)}); "
                                    "use another --name, or the settings in its train_config.json to resume")
        if write:
            self.root.mkdir(parents=True, exist_ok=True)
            atomic_write_json(path, cfg.to_json())

    # ---------------------------------------------------------------- state

    def saved_step(self) -> int:
        """Steps completed by the saved state (0 when there is none)."""
        meta = self.state_dir / "state.json"
        return int(read_json(meta)["step"]) if meta.exists() else 0

    def save_state(self, step: int, weights: Mapping[str, torch.Tensor], optimizer: Any, scheduler: Any,
                   ema: Mapping[str, torch.Tensor] | None, value: Mapping[str, Any] | None = None) -> None:
        tmp = self.root / (TRAINING_STATE + ".tmp")
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        torch.save(dict(weights), tmp / "weights.pt")
        torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                    "ema": dict(ema) if ema is not None else None,
                    "value": dict(value) if value is not None else None}, tmp / "optimizer.pt")
        torch.save({"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state(),
                    "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}, tmp / "rng.pt")
        atomic_write_json(tmp / "state.json", {"step": step})
        old = self.root / (TRAINING_STATE + ".old")
        if old.exists():
            shutil.rmtree(old)
        if self.state_dir.exists():
            os.replace(self.state_dir, old)
        os.replace(tmp, self.state_dir)
        if old.exists():
            shutil.rmtree(old)

    def load_state(self) -> dict[str, Any]:
        """Weights, optimizer/scheduler/EMA/value-head state and the step; RNG states are restored here."""
        if not (self.state_dir / "state.json").exists():
            old = self.root / (TRAINING_STATE + ".old")
            if old.exists():  # killed between the two renames: the previous state is complete
                os.replace(old, self.state_dir)
        weights = torch.load(self.state_dir / "weights.pt", map_location="cpu", weights_only=True)
        opt = torch.load(self.state_dir / "optimizer.pt", map_location="cpu", weights_only=False)
        rng = torch.load(self.state_dir / "rng.pt", map_location="cpu", weights_only=False)
        random.setstate(rng["python"])
        np.random.set_state(rng["numpy"])
        torch.set_rng_state(rng["torch"])
        if rng.get("cuda") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(rng["cuda"])
        return {"weights": weights, **opt, "step": self.saved_step()}

    # ---------------------------------------------------------------- rows

    def append_rows(self, path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
        with path.open("a", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, sort_keys=True) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def read_rows(self, path: Path) -> list[dict[str, Any]]:
        if not path.exists():
            return []
        rows = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue  # a torn last line from a kill
        return rows

    def truncate_after(self, step: int) -> None:
        """Drop log and rollout rows of steps >= ``step`` (not covered by the saved state)."""
        for path in (self.log_path, self.rollouts_path):
            rows = [r for r in self.read_rows(path) if int(r["step"]) < step]
            tmp = path.with_suffix(".tmp")
            tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
            os.replace(tmp, path)

    def write_manifest(self, doc: Mapping[str, Any]) -> None:
        atomic_write_json(self.manifest_path, dict(doc))

    def clear_export(self) -> None:
        """Remove an older export's manifest first: until the new one is complete the folder is not loadable."""
        if self.manifest_path.exists():
            self.manifest_path.unlink()
