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

``--verifier learned:PATH`` scores with such a folder (``LearnedVerifier``); each row records the
tokens the backbone read and one forward pass (``Score.tokens``, ``Score.calls``). Its fingerprint is the
weights' sha256 and the base model's fingerprint, so scores of an older training are never reused
(stored scores and bon@k values are keyed by it). The run id does not change with the verifier:
a run directory is a pool of samples that every verifier scores (``bonbench.core.config``).

``find_verifier`` is how a run without ``--verifier`` picks a learned verifier by default: the
newest finished folder under ``<out>/verifiers`` of the run's task family that learned from samples
of the run's model (same model fingerprint).

This module reads JSON only; the model (torch) loads on a verifier's first ``score``
(``bonbench.plugins.verifiers.model``). File names and the manifest reader are in ``manifest``
(shared with the model). ``learned:`` is a verifier scheme registered through the
``bonbench.verifiers`` entry points (``learned_verifier``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bonbench.api.task import task_family
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Grade, Problem, Sample, Score
from bonbench.core.registry import load_target
from bonbench.plugins.verifiers.manifest import (
    MANIFEST,
    PREFIX,
    VERIFIERS_DIR,
    VERSION,
    display_name,
    read_verifier_manifest,
    verifier_text,
)

# the model imports torch (about a second): loaded as a lazy target on the first score, so that
# planning a run or listing verifiers never pays for it
LOAD_MODEL = "bonbench.plugins.verifiers.model:load_verifier_model"

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
        if self._model is None:
            self._model = load_target(LOAD_MODEL)(self.folder, self.manifest)
        ids = self._model.encode([verifier_text(problems[s.problem_id], s.completion) for s in samples])
        values = self._model.score_ids(ids, self.batch_size)
        # cost: the tokens the backbone read (after truncation) and one forward per sample (its batch's)
        return [Score(s.problem_id, s.sample_idx, self.name, float(v), tokens=len(x), calls=1)
                for s, v, x in zip(samples, values, ids, strict=True)]


def learned_verifier(spec: str) -> LearnedVerifier:
    """learned:PATH  a folder from `bonbench train-verifier`; e.g. learned:results/verifiers/math-gemma-3-270m-head"""
    path = spec[len(PREFIX):] if spec.startswith(PREFIX) else spec
    if not path:
        raise BonbenchError("--verifier learned: needs a folder, "
                            "e.g. --verifier learned:results/verifiers/math-gemma-3-270m-head")
    return LearnedVerifier(path)
