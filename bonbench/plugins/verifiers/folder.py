"""Learned-verifier folders: layout, manifest, lookup, and the ``learned:PATH`` verifier.

A verifier folder (``bonbench train-verifier`` writes it, by default ``results/verifiers/<name>/``)::

    bonbench_verifier.json       the manifest, written last (a folder without it is unfinished): base
                                 model (name, path, fingerprint, model type), the policy whose samples
                                 it learned from (name, fingerprint, model type), task family, data
                                 fingerprint and runs, the evaluation sets checked for overlap,
                                 hyper-parameters, git sha, metrics, sha256 of the weights
    head.safetensors             the scalar head (feature mean and scale, a linear layer)
    adapter/                     LoRA adapters of the backbone (peft), method ``lora`` only
    features/, training_state/   training caches (resume); not read when scoring
    train_verifier_config.json   the settings a resumed training must share

``--verifier learned:PATH`` scores with such a folder (``LearnedVerifier``). Its fingerprint is the
weights' sha256 and the base model's fingerprint, so scores of an older training are never reused
(stored scores and bon@k values are keyed by it). The run id does not change with the verifier:
a run directory is a pool of samples that every verifier scores (``bonbench.core.config``).

``find_verifier`` is how a run without ``--verifier`` picks a learned verifier by default: the
newest finished folder under ``<out>/verifiers`` of the run's task family that learned from samples
of the run's model (same model fingerprint).

This module reads JSON only; the model (torch) loads on a verifier's first ``score``
(``bonbench.plugins.verifiers.model``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from bonbench.core.errors import BonbenchError
from bonbench.core.records import Grade, Problem, Sample, Score
from bonbench.api.task import task_family as declared_family

MANIFEST = "bonbench_verifier.json"
HEAD_FILE = "head.safetensors"
ADAPTER_DIR = "adapter"
FEATURES_DIR = "features"
FORMAT = 1  # bump when the folder layout or the feature definition changes
VERSION = 1  # the Verifier protocol's version: bump when scoring changes
DEFAULT_MAX_LENGTH = 512
PREFIX = "learned:"
VERIFIERS_DIR = "verifiers"



def task_family(task: str) -> str:
    """The family task ``task`` declares (``Task.family``): a verifier trained on one task's train
    split scores the family's evaluation tasks. A name no longer registered is a family of one."""
    return declared_family(task)


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
        doc["base"]["name"], doc["base"]["path"], doc["base"]["fingerprint"], doc["weights_sha256"]  # noqa: B018
        doc["method"], doc["policy"]["fingerprint"], doc["policy"]["model_type"], doc["task_family"]  # noqa: B018
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BonbenchError(f"{path} is not a bonbench verifier manifest ({exc}); retrain the verifier with "
                            "`bonbench train-verifier`") from None
    return doc


def find_verifier(out: Path, task: str, policy_fingerprint: str) -> Path | None:
    """The newest finished verifier folder under ``<out>/verifiers`` for ``task``'s family that learned
    from samples of the model with ``policy_fingerprint``; None when there is none."""
    root = Path(out) / VERIFIERS_DIR
    found: list[tuple[str, str, Path]] = []
    for path in sorted(root.glob(f"*/{MANIFEST}")) if root.is_dir() else ():
        try:
            doc = read_verifier_manifest(path.parent)
        except BonbenchError:
            continue  # a broken or old folder is not a default; naming it explicitly gives the error
        if doc["task_family"] == task_family(task) and doc["policy"]["fingerprint"] == policy_fingerprint:
            found.append((str(doc.get("created", "")), path.parent.name, path.parent))
    return max(found)[2] if found else None


def display_name(spec: str) -> str:
    """A verifier spec as tables, legends and the gate name it: ``learned:PATH`` by its folder name
    (the path differs per machine), anything else as it is. Pure: no file is read."""
    if not spec.startswith(PREFIX):
        return spec
    return PREFIX + Path(spec[len(PREFIX):].rstrip("/")).name


class LearnedVerifier:
    """``--verifier learned:PATH``: P(correct) from a verifier folder (see the module docstring).

    Building it reads the manifest only; the model loads on the first ``score``."""

    uses_grades = False
    version = VERSION

    def __init__(self, folder: str | Path, batch_size: int = 16) -> None:
        self.folder = Path(folder).expanduser()
        self.manifest = read_verifier_manifest(self.folder)
        self.name = display_name(PREFIX + str(self.folder.resolve()))
        self.fingerprint = f"w:{self.manifest['weights_sha256'][:16]}|base:{self.manifest['base']['fingerprint']}"
        self.batch_size = batch_size
        self._model: Any = None

    def check_policy(self, family: str | None, task: str | None = None) -> None:
        """Refuse samples of another model family, or of a task of another family, than it learned from."""
        want = self.manifest["policy"]["model_type"]
        if family is not None and want is not None and family != want:
            raise BonbenchError(f"verifier {self.folder.name!r} learned from samples of a {want} model, not {family}; "
                                "train one on this model's samples with `bonbench train-verifier --samples-from RUN_DIR`")
        if task is not None and task_family(task) != self.manifest["task_family"]:
            raise BonbenchError(f"verifier {self.folder.name!r} learned {self.manifest['task_family']} problems, not task "
                                f"{task!r}; train one on {task} samples with `bonbench train-verifier`")

    def score(self, problems: Mapping[str, Problem], samples: Sequence[Sample],
              grades: Mapping[tuple[str, int], Grade]) -> list[Score]:
        from bonbench.plugins.verifiers.model import load_verifier_model, verifier_text

        if self._model is None:
            self._model = load_verifier_model(self.folder, self.manifest)
        texts = [verifier_text(problems[s.problem_id], s.completion) for s in samples]
        values = self._model.score_texts(texts, self.batch_size)
        return [Score(s.problem_id, s.sample_idx, self.name, float(v)) for s, v in zip(samples, values, strict=True)]


def learned_verifier(spec: str) -> LearnedVerifier:
    """``learned:PATH`` -> the verifier (manifest read, model not loaded)."""
    path = spec[len(PREFIX):] if spec.startswith(PREFIX) else spec
    if not path:
        raise BonbenchError("--verifier learned: needs a folder, e.g. --verifier learned:results/verifiers/math-gemma-3-270m-head")
    return LearnedVerifier(path)
