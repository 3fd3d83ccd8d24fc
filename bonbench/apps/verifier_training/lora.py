"""``--method lora``: the backbone's LoRA adapters and the head fine-tuned together with binary
cross-entropy, resuming from ``training_state/`` (saved atomically every ``--save-every`` steps).

This module trains in place and saves the training state; the verifier folder's weights and
manifest are written by ``bonbench.apps.verifier_training.train``. It does not build the model or
attach the adapters (``bonbench.plugins.verifiers.model.VerifierModel`` does), and it neither reads
nor labels the training rows (``training_data``) nor chooses which problems are held out (``fit``, ``train``).
"""

from __future__ import annotations

import pickle
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bonbench.apps.verifier_training.features import saving
from bonbench.apps.verifier_training.request import TrainVerifierRequest
from bonbench.apps.verifier_training.training_data import LabelledSample
from bonbench.core.errors import BonbenchError
from bonbench.pipeline.progress import Progress
from bonbench.plugins.verifiers import model as vm
from bonbench.plugins.verifiers.manifest import verifier_text

STATE = "training_state"


def _resume(model: vm.VerifierModel, opt: torch.optim.Optimizer, state: Path) -> tuple[int, list[float]]:
    """Load the saved adapters, head and optimiser; returns (steps done, losses so far)."""
    if not (state / "state.pt").exists():
        return 0, []
    try:
        blob = torch.load(state / "state.pt", weights_only=False)
    except (RuntimeError, EOFError, OSError, ValueError, pickle.UnpicklingError) as exc:
        raise BonbenchError(f"the saved LoRA training state {state / 'state.pt'} is damaged "
                            f"({str(exc).splitlines()[0][:80]}); delete {state} and rerun to train the adapters "
                            "from the start") from None
    trainable = dict((n, p) for n, p in model.backbone.named_parameters() if p.requires_grad)
    with torch.no_grad():
        for n, t in blob["adapter"].items():
            trainable[n].copy_(t)
    model.head.load_state_dict(blob["head"])
    opt.load_state_dict(blob["optimizer"])
    return int(blob["step"]), list(blob["losses"])


def _save(model: vm.VerifierModel, opt: torch.optim.Optimizer, folder: Path, step: int, losses: list[float]) -> None:
    """The training state, written beside the old one and renamed over it (a kill keeps one whole)."""
    state, tmp = folder / STATE, folder / (STATE + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    adapter = {n: p.detach().cpu().clone() for n, p in model.backbone.named_parameters() if p.requires_grad}
    with saving(tmp, "the last saved training state is kept"):
        tmp.mkdir(parents=True)
        torch.save({"adapter": adapter, "head": model.head.state_dict(), "optimizer": opt.state_dict(),
                    "step": step, "losses": losses}, tmp / "state.pt")
        shutil.rmtree(state, ignore_errors=True)
        tmp.rename(state)


def train_lora(model: vm.VerifierModel, rows: Sequence[LabelledSample], req: TrainVerifierRequest, folder: Path,
               progress: Progress) -> dict[str, Any]:
    """Fine-tune LoRA adapters and the head together (BCE), resuming from ``training_state/``."""
    params = [p for p in model.backbone.parameters() if p.requires_grad] + list(model.head.linear.parameters())
    opt = torch.optim.AdamW(params, lr=req.lr)
    order_rng = np.random.default_rng(req.seed)
    steps_per_epoch = (len(rows) + req.micro_batch - 1) // req.micro_batch
    orders = [order_rng.permutation(len(rows)) for _ in range(req.epochs)]
    total = steps_per_epoch * req.epochs
    step, losses = _resume(model, opt, folder / STATE)
    ids = model.encode([verifier_text(r.problem, r.sample.completion) for r in rows])
    labels = torch.tensor([r.label for r in rows], dtype=torch.float32)
    model.backbone.train()
    progress("lora", step, total)
    t0 = time.time()
    start_step = step
    while step < total:
        epoch, i = divmod(step, steps_per_epoch)
        rows_idx = orders[epoch][i * req.micro_batch:(i + 1) * req.micro_batch]
        logits = model.head(model.features_of_batch([ids[j] for j in rows_idx]))
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels[rows_idx].to(logits.device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        step += 1
        progress("lora", 1, total)
        if step % req.save_every == 0 or step == total:
            _save(model, opt, folder, step, losses)
    model.backbone.eval()
    seconds = time.time() - t0
    done = step - start_step
    return {"steps": total, "final_loss": float(np.mean(losses[-20:])) if losses else None,
            "samples_per_s": (done * req.micro_batch / seconds) if done and seconds > 0 else None}
