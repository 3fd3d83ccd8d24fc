"""Learned-verifier folders, the shared bottom: file names, the manifest reader, weight digests.

Both the folder logic (``bonbench.plugins.verifiers.folder``: lookup, the ``learned:`` scheme) and
the model (``bonbench.plugins.verifiers.model``: torch) read these, so they live below both. The
folder layout is described in ``folder``'s docstring. This module reads JSON and bytes only.

It writes nothing (``bonbench.apps.verifier_training.train`` writes the manifest, last), loads no
weights and imports no torch: hashing the weight files reads their bytes, loading them is ``model``'s.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from bonbench.core.errors import BonbenchError
from bonbench.core.records import Problem

MANIFEST = "bonbench_verifier.json"
HEAD_FILE = "head.safetensors"
ADAPTER_DIR = "adapter"
FEATURES_DIR = "features"
FORMAT = 1  # bump when the folder layout or the feature definition changes
VERSION = 1  # the Verifier protocol's version: bump when scoring changes
DEFAULT_MAX_LENGTH = 512
PREFIX = "learned:"
VERIFIERS_DIR = "verifiers"


def model_type(path: str) -> str | None:
    """The ``model_type`` in a model folder's config.json (its family: gemma3_text, qwen2, ...);
    None when ``path`` is not a local folder (a hub id, a served model)."""
    cfg = Path(path) / "config.json"
    if not cfg.is_file():
        return None
    try:
        return str(json.loads(cfg.read_text()).get("model_type") or "") or None
    except (OSError, ValueError):
        return None


def weights_sha256(folder: Path) -> str:
    """sha256 over the head file and the adapter files (relative names and bytes), in name order."""
    folder = Path(folder)
    h = hashlib.sha256()
    for p in [folder / HEAD_FILE] + sorted((folder / ADAPTER_DIR).rglob("*")):
        if p.is_file():
            h.update(f"\0{p.relative_to(folder)}\0".encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def read_verifier_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of a finished verifier folder, checked for the fields scoring needs."""
    folder = Path(folder)
    path = folder / MANIFEST
    if not path.is_file():
        if folder.is_dir() and (folder / FEATURES_DIR).is_dir():
            raise BonbenchError(f"verifier folder {str(folder)!r} has no {MANIFEST}: its training has not finished; "
                                "rerun the same `bonbench train-verifier` command to resume it")
        raise BonbenchError(f"{str(folder)!r} is not a verifier folder (no {MANIFEST}); train one with "
                            "`bonbench train-verifier --task T --samples-from RUN_DIR`")
    try:
        doc = json.loads(path.read_text())
        if int(doc["format"]) != FORMAT:
            raise ValueError(f"format {doc['format']}, this bonbench reads {FORMAT}")
        # a KeyError unless every field is there
        doc["base"]["name"], doc["base"]["path"], doc["base"]["fingerprint"], doc["weights_sha256"]
        doc["method"], doc["policy"]["fingerprint"], doc["policy"]["model_type"], doc["task_family"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BonbenchError(f"{path} is not a bonbench verifier manifest ({exc}); retrain the verifier with "
                            "`bonbench train-verifier`") from None
    return doc


def display_name(spec: str) -> str:
    """A verifier spec as tables, legends and the gate name it: ``learned:PATH`` by its folder name
    (the path differs per machine), anything else as it is. Pure: no file is read."""
    if not spec.startswith(PREFIX):
        return spec
    return PREFIX + Path(spec[len(PREFIX):].rstrip("/")).name


def verifier_text(problem: Problem, completion: str) -> str:
    """What the verifier reads: the problem, then the completion (the same for training and scoring)."""
    return f"Problem:\n{problem.input.strip()}\n\nSolution:\n{completion.strip()}"
