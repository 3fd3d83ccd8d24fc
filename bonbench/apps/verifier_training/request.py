"""``TrainVerifierRequest``: the flags of ``bonbench train-verifier`` as one frozen value.

The CLI builds it from its flags; ``bonbench.apps.verifier_training.train.train_verifier`` runs it.
This module holds the record and what a resumed training must share; it checks and trains nothing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bonbench.plugins.verifiers.folder import DEFAULT_MAX_LENGTH


@dataclass(frozen=True)
class TrainVerifierRequest:
    """The flags of ``bonbench train-verifier`` as values (see ``docs/verifiers.md``)."""

    run_dirs: tuple[Path, ...]
    task: str | None = None  # the family the runs must belong to (checked); default: the runs'
    name: str | None = None  # folder name under <out>/verifiers (default: <family>-<policy slug>-<method>)
    model: str | None = None  # the backbone (default: the embedded Gemma 3 270M)
    method: str = "head"  # head: frozen backbone + logistic head; lora: + LoRA adapters fine-tuned
    out: Path = Path("results")
    data_dir: str | None = None
    max_length: int = DEFAULT_MAX_LENGTH
    batch_size: int = 16
    dtype: str = "bfloat16"
    folds: int = 5
    seed: int = 0
    val_fraction: float = 0.2  # problems held out of training to report AUROC on
    drop_eval_overlap: bool = False  # leave out training problems that are evaluation problems (else refuse)
    # fewest samples of the rarer class (correct or wrong) to fit on: below it the head fits noise and the
    # grouped CV has folds without a positive (MBPP train with the 270M model: 1 correct of 480)
    min_class: int = 10
    # lora only
    epochs: int = 1
    lr: float = 1e-4
    lora_rank: int = 8
    lora_alpha: int = 16
    micro_batch: int = 8
    save_every: int = 50

    def settings(self) -> dict[str, Any]:
        """What a resumed training must share with the first one (everything but paths and batch size)."""
        d = asdict(self)
        for k in ("run_dirs", "out", "data_dir", "name", "batch_size", "save_every", "min_class"):
            d.pop(k)
        return d
