"""Backbone features of training rows, cached on disk in chunks so a killed training resumes where
it stopped, and the guard every torch save of this package goes through (``saving``).

This module computes and stores features; it fits nothing.
"""

from __future__ import annotations

import contextlib
import pickle
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch

from bonbench.apps.verifier_training.training_data import LabelledSample
from bonbench.core import outputs
from bonbench.core.errors import BonbenchError
from bonbench.pipeline.progress import Progress
from bonbench.plugins.verifiers import model as vm
from bonbench.plugins.verifiers.manifest import verifier_text

FEATURE_CHUNK = 256


class FeatureCache:
    """Features of training rows in ``features/part-NNNNN.pt`` files ({"keys", "feats"}), written
    atomically one chunk at a time, so a killed run keeps every finished chunk."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def load(self) -> dict[tuple[str, str, int], torch.Tensor]:
        out: dict[tuple[str, str, int], torch.Tensor] = {}
        for part in sorted(self.root.glob("part-*.pt")):
            try:
                blob = torch.load(part, weights_only=True)
                pairs = list(zip(blob["keys"], blob["feats"], strict=True))
            except (RuntimeError, EOFError, OSError, ValueError, KeyError, TypeError, pickle.UnpicklingError) as exc:
                # parts are renamed into place whole, so this one was damaged after it was written
                raise BonbenchError(f"cached features {part} are damaged ({str(exc).splitlines()[0][:80]}); delete that "
                                    "file and rerun: its samples' features are computed again") from None
            for key, row in pairs:
                out[tuple(key)] = row
        return out

    def append(self, keys: Sequence[tuple[str, str, int]], feats: torch.Tensor) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        n = len(list(self.root.glob("part-*.pt")))
        tmp = self.root / f".part-{n:05d}.tmp"
        with saving(tmp, "the features computed so far are kept"):
            torch.save({"keys": [list(k) for k in keys], "feats": feats.contiguous()}, tmp)
            tmp.rename(self.root / f"part-{n:05d}.pt")


@contextlib.contextmanager
def saving(tmp: Path, kept: str) -> Iterator[None]:
    """Around a torch/safetensors save to ``tmp``: a full disk or a read-only folder (an OSError, or
    the RuntimeError torch's writer raises for it) removes ``tmp`` and is a one-line BonbenchError."""
    try:
        yield
    except (OSError, RuntimeError) as exc:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and outputs.os_error_message(tmp, exc) is None:
            raise
        if isinstance(exc, RuntimeError) and "writ" not in str(exc).lower():
            raise  # not a write failure: a bug, shown as such
        raise BonbenchError(f"cannot write {tmp.parent} ({str(exc).splitlines()[0][:100]}): free space on that "
                            f"filesystem or make it writable, then rerun the same command; {kept}") from None


def extract_features(model: vm.VerifierModel, rows: Sequence[LabelledSample], cache: FeatureCache,
                     batch_size: int, progress: Progress) -> torch.Tensor:
    """[N, 2H] features of ``rows`` (in order), computing only those not cached yet."""
    have = cache.load()
    todo = [r for r in rows if r.key not in have]
    total = len(todo)
    if total:
        progress("features", 0, total)
    for start in range(0, total, FEATURE_CHUNK):
        chunk = todo[start:start + FEATURE_CHUNK]
        feats = model.features([verifier_text(r.problem, r.sample.completion) for r in chunk], batch_size,
                               lambda k: progress("features", k, total))
        cache.append([r.key for r in chunk], feats)
        have.update({r.key: f for r, f in zip(chunk, feats, strict=True)})
    return torch.stack([have[r.key] for r in rows]) if rows else torch.empty(0)
