"""``train_verifier``: assemble the training rows, check them, compute features, fit the head (and
with ``--method lora`` the adapters), save the weights and write the manifest last, so a folder with
``bonbench_verifier.json`` is a finished verifier (see the package docstring for the steps).

Held-out quality (AUROC on problems of the training runs that the head, or the adapters, did not
see) is reported in the manifest; evaluation on other runs is ``bonbench eval-verifier``.
This module writes the verifier folder; it does not sample.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bonbench.apps.verifier_training.features import FeatureCache, extract_features
from bonbench.apps.verifier_training.fit import auroc, check_class_counts, fit_head, split_problems
from bonbench.apps.verifier_training.lora import train_lora
from bonbench.apps.verifier_training.request import TrainVerifierRequest
from bonbench.apps.verifier_training.training_data import TrainingData, assemble, check_no_eval_problems
from bonbench.core import outputs, settings
from bonbench.core.config import model_slug
from bonbench.core.errors import BonbenchError
from bonbench.core.models import EMBEDDED_MODEL, ResolvedModel, resolve_model
from bonbench.core.provenance import git_sha
from bonbench.core.store import atomic_write_json, read_run_json
from bonbench.pipeline.progress import Progress, no_progress
from bonbench.plugins.verifiers import model as vm
from bonbench.plugins.verifiers.manifest import (
    FEATURES_DIR,
    FORMAT,
    MANIFEST,
    VERIFIERS_DIR,
    model_type,
    verifier_text,
    weights_sha256,
)

TRAIN_CONFIG = "train_verifier_config.json"


def default_name(family: str, policy: str, method: str) -> str:
    """The verifier folder's name when ``--name`` is not given."""
    return f"{family}-{model_slug(policy)}-{method}"


@dataclass(frozen=True)
class Fitted:
    """What the fitting step produced: the model to save, the held-out report and the training facts."""

    model: vm.VerifierModel
    heldout: Mapping[str, Any]
    training: Mapping[str, Any]


def _recorded_settings(req: TrainVerifierRequest, data: TrainingData, base: ResolvedModel) -> tuple[Path, dict[str, Any]]:
    """The verifier folder and the settings recorded in it; a folder trained with other settings or
    data is refused (a rerun with the same ones resumes)."""
    folder = Path(req.out) / VERIFIERS_DIR / (req.name or default_name(data.family, data.policy["name"], req.method))
    recorded = {**req.settings(), "base_fingerprint": base.fingerprint, "data_fingerprint": data.fingerprint(),
                "format": FORMAT}
    if req.method == "lora":  # older LoRA folders trained on every problem: their saved state must not resume here
        recorded["lora_fit"] = "problems not held out"
    cfg_path = folder / TRAIN_CONFIG
    if cfg_path.exists():
        old = read_run_json(cfg_path)
        diff = sorted(k for k in set(old) | set(recorded) if old.get(k) != recorded.get(k))
        if diff:
            raise BonbenchError(f"verifier folder {str(folder)!r} was trained with other settings or data ({', '.join(diff)}); "
                                "pass another --name, or the same flags and runs to resume")
    return folder, recorded


def _fit(req: TrainVerifierRequest, data: TrainingData, base: ResolvedModel, model: vm.VerifierModel,
         feats: torch.Tensor, folder: Path, progress: Progress, feature_rate: float | None) -> Fitted:
    """The held-out report first (a probe fit on the other problems), then the shipped head, then
    with ``lora`` the adapters. ``feature_rate``: samples per second of the feature step (recorded)."""
    labels = np.array([r.label for r in data.rows])
    held = split_problems(data.rows, req.val_fraction, req.seed)
    groups = [r.problem.id for r in data.rows]
    held_rows = [r for r, h in zip(data.rows, held, strict=True) if h]
    val: dict[str, Any] = {"n_problems": len({r.problem.id for r in held_rows}), "n_samples": len(held_rows)}
    probe: vm.ScalarHead | None = None
    if held.any() and (~held).any():
        probe = vm.ScalarHead(feats.shape[1])
        t1 = time.time()
        probe_fit = fit_head(probe, feats[~held], labels[~held], [g for g, h in zip(groups, held, strict=True) if not h],
                             req.folds, req.seed)
        probe_seconds = time.time() - t1
        with torch.no_grad():
            val_scores = torch.sigmoid(probe(feats[held])).double().numpy()
        val.update({"auroc": auroc(labels[held], val_scores), "C": probe_fit["C"], "cv_auroc_train_part": probe_fit["cv_auroc"]})
    # LoRA with a held-out part starts from the probe and never sees the held-out problems, so the held-out
    # AUROC reported is its own (the price: it learns from the other 1 - val_fraction of the problems only);
    # otherwise the head is refit on every problem
    lora_from_probe = req.method == "lora" and probe is not None
    if lora_from_probe:
        start_head, fit, head_seconds = probe, probe_fit, probe_seconds
    else:
        t1 = time.time()
        fit = fit_head(model.head, feats, labels, groups, req.folds, req.seed)
        start_head, head_seconds = model.head, time.time() - t1
    training: dict[str, Any] = {"feature_samples_per_s": feature_rate, "head_fit_s": head_seconds, **fit}
    if req.method == "lora":
        model = vm.VerifierModel(base, method="lora", dtype=req.dtype, max_length=req.max_length,
                                 lora={"rank": req.lora_rank, "alpha": req.lora_alpha})
        model.head.load_state_dict(start_head.state_dict())  # type: ignore[union-attr]  # the probe: lora_from_probe
        fit_rows = [r for r, h in zip(data.rows, held, strict=True) if not h] if lora_from_probe else list(data.rows)
        training["lora"] = {**train_lora(model, fit_rows, req, folder, progress), "n_samples": len(fit_rows)}
        if lora_from_probe:
            scores = model.score_texts([verifier_text(r.problem, r.sample.completion) for r in held_rows], req.batch_size)
            val["head_auroc"] = val["auroc"]  # the starting head's, for comparison
            val["auroc"] = auroc([r.label for r in held_rows], scores)
    return Fitted(model=model, heldout=val, training=training)


def _manifest(req: TrainVerifierRequest, data: TrainingData, base: ResolvedModel, fitted: Fitted, feats: torch.Tensor,
              excluded: Mapping[str, Any], folder: Path) -> dict[str, Any]:
    """``bonbench_verifier.json``: what was trained, from what, and how well it did."""
    labels = np.array([r.label for r in data.rows])
    # the features are on the host, the head where the model is (the GPU when there is one)
    train_auroc = auroc(labels, fitted.model.score_features(feats)) if req.method == "head" else None
    return {
        "format": FORMAT,
        "bonbench_verifier": 1,
        "method": req.method,
        "task_family": data.family,
        "tasks": list(data.tasks),
        "base": {"name": base.name, "path": base.path, "fingerprint": base.fingerprint, "model_type": model_type(base.path),
                 "revision": base.revision},
        "policy": dict(data.policy),
        "data": {"fingerprint": data.fingerprint(), "runs": list(data.runs), "n_samples": len(data.rows),
                 "n_problems": len({r.problem.id for r in data.rows}), "n_correct": int(labels.sum())},
        "eval_excluded": dict(excluded),
        "hyper": {**req.settings(), "feature": "last-token and mean final hidden state", "text": "verifier_text v1"},
        "metrics": {"heldout": dict(fitted.heldout), "train_auroc": train_auroc},
        "training": dict(fitted.training),
        "git_sha": git_sha(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "weights_sha256": weights_sha256(folder),
    }


def train_verifier(req: TrainVerifierRequest, progress: Progress = no_progress) -> Path:
    """Assemble, check, featurise, fit, save; returns the verifier folder (see the package docstring)."""
    if req.method not in ("head", "lora"):
        raise BonbenchError(f"unknown --method {req.method!r}; use head (frozen backbone + trained head) or lora")
    settings.check(req)  # the ranges its fields declare, as the CLI checks them; API callers too
    data = assemble(req.run_dirs, data_dir=req.data_dir, family=req.task)
    data, excluded = check_no_eval_problems(data, data_dir=req.data_dir, drop=req.drop_eval_overlap)
    check_class_counts(data.rows, req.min_class)
    base = resolve_model(req.model or EMBEDDED_MODEL)
    folder, recorded = _recorded_settings(req, data, base)
    torch.manual_seed(req.seed)
    # loaded before the folder is touched: a damaged --model is an error that leaves a finished verifier whole
    model = vm.VerifierModel(base, method="head", dtype=req.dtype, max_length=req.max_length)
    outputs.ensure_dir(folder)
    atomic_write_json(folder / TRAIN_CONFIG, recorded)
    t0 = time.time()
    cache = FeatureCache(folder / FEATURES_DIR)
    n_cached = len(cache.load())
    feats = extract_features(model, data.rows, cache, req.batch_size, progress)
    seconds, fresh = time.time() - t0, len(data.rows) - n_cached
    fitted = _fit(req, data, base, model, feats, folder, progress, fresh / seconds if fresh > 0 and seconds > 0 else None)
    # a finished verifier stays usable until its weights are about to change: a rerun that fails before
    # this point (damaged training state, full disk) leaves the previous manifest and weights whole
    (folder / MANIFEST).unlink(missing_ok=True)  # unfinished until the manifest is written again
    fitted.model.save(folder)
    atomic_write_json(folder / MANIFEST, _manifest(req, data, base, fitted, feats, excluded, folder))
    return folder
