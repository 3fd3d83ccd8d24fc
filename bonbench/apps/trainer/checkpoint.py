"""A checkpoint folder ``results/checkpoints/<name>/``: resumable state, logs, and the export.

Layout::

    train_config.json      the TrainConfig it was trained with (resume checks it)
    training_state/        trainable weights, AdamW and scheduler state, EMA, value head and its AdamW, fp16 loss scale, RNG,
                           step (atomic)
    log.jsonl              one row per optimiser step (reward, KL, entropy, grad norm/variance, speed)
    rollouts.jsonl         every rollout sample, keyed (step, problem_id, sample_idx), with reward and weight
    ref_samples.jsonl      M reference samples per prompt with rewards (vBoN), keyed (problem_id, sample_idx)
    evals.jsonl, evals/    held-out evaluations (--eval-task): one row per evaluated step, and its run directories
    best/                  the best evaluated step's weights (--keep-best, best.py): a loadable export with its manifest
    config.json of the model, *.safetensors, tokenizer files, bonbench_manifest.json   (the export)

The training state is written to a temporary folder (every file fsynced) and renamed into place,
so a SIGKILL or a power cut leaves either the previous state or the new one; a kill between the
two renames leaves the previous one as ``training_state.old``, which is read (and renamed back)
on resume. Rows of ``log.jsonl`` / ``rollouts.jsonl`` past the saved step are dropped on resume
(they are redone identically: sampling seeds derive from the step); rows up to the saved step are
never dropped. A state file that is truncated or corrupt is a one-line error naming it, found
before any model loads, and nothing in the folder is changed by it.
The manifest is written last: a folder with a manifest is a finished, loadable checkpoint
(``bonbench.core.models`` refuses a folder with training state and no manifest). In a data-parallel job
only rank 0 writes here; every rank reads the same saved state on resume.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import shutil
import tempfile
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bonbench.api.objective import options_as_trained
from bonbench.apps.trainer.config import TrainConfig
from bonbench.core import outputs
from bonbench.core.errors import BonbenchError
from bonbench.core.models import CHECKPOINT_MANIFEST, TRAINING_STATE
from bonbench.core.store import atomic_write_json

TRAIN_CONFIG = "train_config.json"
STATE_FILES = ("weights.pt", "optimizer.pt", "rng.pt")
_UNREADABLE = (OSError, EOFError, RuntimeError, ValueError, KeyError, pickle.UnpicklingError, zipfile.BadZipFile)


def _fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (POSIX: the directory entry is data of the folder)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _save(obj: Any, path: Path) -> None:
    with path.open("wb") as fh:
        torch.save(obj, fh)
        fh.flush()
        os.fsync(fh.fileno())


class CheckpointDir:
    """Files of one checkpoint folder (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.state_dir = self.root / TRAINING_STATE
        self.old_state_dir = self.root / (TRAINING_STATE + ".old")
        self.log_path = self.root / "log.jsonl"
        self.rollouts_path = self.root / "rollouts.jsonl"
        self.ref_samples_path = self.root / "ref_samples.jsonl"
        self.evals_path = self.root / "evals.jsonl"  # one row per evaluated step (evaluate.py)
        self.manifest_path = self.root / CHECKPOINT_MANIFEST

    def check_writable(self, out: str) -> None:
        """Fail before any model loads when the folder could not be written (read-only, no permission,
        a file in the way): a temp file is made and removed in it, or in its nearest existing parent
        (no folder is created for a run that may still stop on other bad input)."""
        folder = self.root
        while not folder.exists() and folder.parent != folder:
            folder = folder.parent
        if not folder.is_dir():
            raise BonbenchError(f"{folder} is a file, but the checkpoint needs a folder there: move it or choose "
                                f"another --out (now {out!r})")
        try:
            fd, probe = tempfile.mkstemp(prefix=".bonbench-check.", suffix=".tmp", dir=folder)
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            reason = os.strerror(exc.errno) if exc.errno else str(exc)
            raise BonbenchError(f"cannot write the checkpoint folder {self.root} ({reason}: {folder}); pass a writable "
                                f"--out (now {out!r}) or make that folder writable") from None

    # ---------------------------------------------------------------- config

    def check_or_write_config(self, cfg: TrainConfig, write: bool = True) -> bool:
        """First run: record the config. Later runs: the same settings (steps may grow) or an error.
        A folder with nothing to resume (no saved state, no export: a run stopped in its first step
        or before its model loaded) takes the new settings, its rows are dropped, and True is returned.
        ``write=False`` checks only (the ranks of a data-parallel job other than rank 0)."""
        path = self.root / TRAIN_CONFIG
        restarted = False
        if path.exists():
            old = outputs.read_json(path, f"delete {self.root} to train {cfg.name!r} again, or use another --name")
            diff = cfg.differences(old)
            if diff and (self.saved_step() > 0 or self.manifest_path.exists()):
                raise BonbenchError(f"checkpoint {self.root.name!r} was trained with other settings ({', '.join(diff)}); "
                                    f"use another --name, or the settings in its train_config.json to resume"
                                    f"{_options_hint(old) if 'objective_options' in diff else ''}")
            restarted = bool(diff)
        if write:
            self.root.mkdir(parents=True, exist_ok=True)
            if restarted:  # rows of a run that saved nothing, drawn under other settings (reference samples too)
                for rows in (self.log_path, self.rollouts_path, self.ref_samples_path, self.evals_path):
                    rows.unlink(missing_ok=True)
                shutil.rmtree(self.root / "best", ignore_errors=True)  # best.KeepBest's copy of a step of that run
            atomic_write_json(path, cfg.to_json())
        return restarted

    # ---------------------------------------------------------------- state

    def _readable_state(self) -> Path | None:
        """The folder holding the newest complete state: ``training_state``, or ``training_state.old``
        after a kill between the two renames of ``save_state``; None when nothing was saved."""
        for folder in (self.state_dir, self.old_state_dir):
            if (folder / "state.json").exists():
                return folder
        return None

    def _broken(self, path: Path, why: str) -> BonbenchError:
        return BonbenchError(f"{path} is truncated or corrupt ({why}); the run cannot resume from it: delete "
                             f"{self.state_dir} to train {self.root.name!r} again from step 0, or use another --name "
                             "(nothing in the folder was changed)")

    def saved_step(self) -> int:
        """Steps completed by the saved state (0 when there is none)."""
        folder = self._readable_state()
        if folder is None:
            return 0
        meta = folder / "state.json"
        try:
            return int(json.loads(meta.read_text(encoding="utf-8"))["step"])
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise self._broken(meta, f"{type(exc).__name__}: {exc}".splitlines()[0]) from None

    def check_state(self) -> int:
        """The saved step, after a cheap check that every state file is a complete archive (a truncated
        torch file has lost its zip central directory): runs before the model loads."""
        step = self.saved_step()
        folder = self._readable_state()
        if folder is None:
            return step
        for name in STATE_FILES:
            path = folder / name
            try:
                with zipfile.ZipFile(path) as archive:
                    archive.infolist()
            except FileNotFoundError:
                raise self._broken(path, "missing") from None
            except (OSError, zipfile.BadZipFile) as exc:
                raise self._broken(path, str(exc).splitlines()[0]) from None
        return step

    def save_state(self, step: int, weights: Mapping[str, torch.Tensor], optimizer: Any, scheduler: Any,
                   ema: Mapping[str, torch.Tensor] | None, value: Mapping[str, Any] | None = None,
                   scaler: Mapping[str, Any] | None = None) -> None:
        """Write the resumable state of ``step`` completed steps: temp folder, each file fsynced, then
        renamed over the previous state. A full disk or a folder turned read-only is a one-line
        error and the previous state stays."""
        tmp = self.root / (TRAINING_STATE + ".tmp")
        try:
            if tmp.exists():
                shutil.rmtree(tmp)
            tmp.mkdir(parents=True)
            _save(dict(weights), tmp / "weights.pt")
            _save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                   "ema": dict(ema) if ema is not None else None,
                   "value": dict(value) if value is not None else None,
                   "scaler": dict(scaler) if scaler else None}, tmp / "optimizer.pt")
            _save({"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state(),
                   "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}, tmp / "rng.pt")
            atomic_write_json(tmp / "state.json", {"step": step})
            _fsync_dir(tmp)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise outputs.write_error(self.state_dir, exc) from None
        if self.old_state_dir.exists():
            shutil.rmtree(self.old_state_dir)
        if self.state_dir.exists():
            os.replace(self.state_dir, self.old_state_dir)
        os.replace(tmp, self.state_dir)
        _fsync_dir(self.root)
        if self.old_state_dir.exists():
            shutil.rmtree(self.old_state_dir)

    def load_state(self) -> dict[str, Any]:
        """Weights, optimizer/scheduler/EMA/value-head state and the step; RNG states are restored here."""
        if self._readable_state() == self.old_state_dir:  # killed between the two renames: the previous state
            if self.state_dir.exists():
                shutil.rmtree(self.state_dir)
            os.replace(self.old_state_dir, self.state_dir)
        step = self.saved_step()
        loaded = {}
        for name in STATE_FILES:
            path = self.state_dir / name
            try:
                loaded[name] = torch.load(path, map_location="cpu", weights_only=name == "weights.pt")
            except _UNREADABLE as exc:
                raise self._broken(path, str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
        rng = loaded["rng.pt"]
        random.setstate(rng["python"])
        np.random.set_state(rng["numpy"])
        torch.set_rng_state(rng["torch"])
        if rng.get("cuda") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(rng["cuda"])
        return {"weights": loaded["weights.pt"], **loaded["optimizer.pt"], "step": step}

    def exported_step(self) -> int | None:
        """Steps of the finished export (the manifest's), None without a readable manifest."""
        if not self.manifest_path.exists():
            return None
        try:
            return int(json.loads(self.manifest_path.read_text(encoding="utf-8"))["steps"])
        except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError):
            return None  # written atomically, so only a hand-edited manifest gets here: export again

    # ---------------------------------------------------------------- rows

    def append_rows(self, path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
        """Append rows (fsynced); a torn last line left by a kill is cut first, so no row is glued to it."""
        text = "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows)
        try:
            _cut_torn_tail(path)
            with path.open("a", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            raise outputs.write_error(path, exc) from None

    def read_rows(self, path: Path) -> list[dict[str, Any]]:
        if not path.exists():
            return []
        return outputs.read_jsonl_log(path, "delete that line (a later run redoes it) or use another --name",
                                      skip_torn=True)

    def truncate_after(self, step: int) -> int:
        """Drop log and rollout rows of steps >= ``step`` (not covered by the saved state; rows of the
        steps it covers are kept). Returns how many log rows were dropped."""
        dropped = 0
        for path in (self.log_path, self.rollouts_path):
            if not path.exists():
                continue
            rows = self.read_rows(path)
            keep = [r for r in rows if int(r["step"]) < step]
            if path == self.log_path:
                dropped = len({int(r["step"]) for r in rows} - {int(r["step"]) for r in keep})
            text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in keep)
            if text.encode("utf-8") != path.read_bytes():  # rewrite only when something goes
                outputs.write_text(path, text)
        return dropped

    def write_manifest(self, doc: Mapping[str, Any], folder: Path | None = None) -> None:
        """The manifest of the export in the checkpoint folder (or in ``folder``: a copy such as ``best/``)."""
        atomic_write_json(self.manifest_path if folder is None else folder / CHECKPOINT_MANIFEST, dict(doc))

    def clear_export(self) -> None:
        """Remove an older export's manifest first: until the new one is complete the folder is not loadable."""
        if self.manifest_path.exists():
            self.manifest_path.unlink()


def _cut_torn_tail(path: Path) -> None:
    """Truncate a last line without its newline (a writer killed mid-line)."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb+") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) == b"\n":
            return
        fh.seek(0)
        fh.truncate(fh.read().rfind(b"\n") + 1)


def _options_hint(old: Mapping[str, Any]) -> str:
    """The recorded objective options as -O flags: a record from before a default changed (issue 24)
    names none, yet trained with the old default, which resuming must name."""
    options = options_as_trained(str(old.get("objective", "")), old.get("objective_options") or {})
    flags = " ".join(f"-O {key}={json.dumps(value) if not isinstance(value, str) else value}"
                     for key, value in sorted(options.items()))
    return f" (it trained with {flags})" if flags else ""
