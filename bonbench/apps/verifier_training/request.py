"""``TrainVerifierRequest``: the flags of ``bonbench train-verifier`` as one frozen value.

The CLI builds it from its flags; ``bonbench.apps.verifier_training.train.train_verifier`` runs it.
This module holds the record and what a resumed training must share; it checks and trains nothing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from bonbench.core import flags
from bonbench.core.settings import setting
from bonbench.plugins.verifiers.manifest import DEFAULT_MAX_LENGTH


@dataclass(frozen=True)
class TrainVerifierRequest:
    """The flags of ``bonbench train-verifier`` as values (see ``docs/verifiers.md``): each field's
    help, spelling and range are written here once (``bonbench.core.settings``)."""

    run_dirs: tuple[Path, ...] = setting(
        flag="--samples-from", metavar="RUN_DIR",
        help="a graded run directory of the train split (`bonbench run -T split=train ...`); repeatable")
    # the family the runs must belong to (checked); default: the runs'
    task: str | None = setting(None, help="the task family the runs must belong to (math, mbpp, ...; checked); "
                                          "default: the runs'")
    name: str | None = setting(None, help="folder name: <out>/verifiers/NAME (default: <family>-<model>-<method>); "
                                          "the same name resumes")
    model: str | None = setting(None, env="BONBENCH_MODEL",
                                help="the verifier's backbone: a causal LM folder, hub id or gemma-3-270m (default)")
    method: Literal["head", "lora"] = setting(
        "head", help="head: frozen backbone + logistic head (default); lora: then LoRA adapters and head fine-tuned")
    out: Path = setting(Path("results"), env="BONBENCH_OUT", help="results root (default: results/)")
    data_dir: str | None = setting(None, help="local dataset mirror (default: $BONBENCH_DATA_DIR, else the hub)")
    max_length: int = setting(DEFAULT_MAX_LENGTH, range=flags.AT_LEAST_1,
                              help="tokens of problem + completion read (the end is kept)")
    batch_size: int = setting(16, range=flags.AT_LEAST_1, help="texts per forward")
    dtype: str = setting("bfloat16", help="backbone dtype")
    folds: int = setting(5, range=(2, None, True, False),
                         help="cross-validation folds (grouped by problem) choosing the L2 strength")
    seed: int = setting(0, range=flags.AT_LEAST_0, help="seed of the held-out split, folds and LoRA training")
    val_fraction: float = setting(0.2, range=flags.FRACTION_0_1,
                                  help="share of problems held out for the reported AUROC")
    drop_eval_overlap: bool = setting(
        False, help="leave out training problems that are evaluation problems (same id or text) instead of refusing")
    # below it the head fits noise and the grouped CV has folds without a positive (MBPP train with
    # the 270M model: 1 correct of 480)
    min_class: int = setting(10, range=flags.AT_LEAST_1, help="fewest correct (and fewest wrong) training samples "
                                                              "to fit on; fewer is an error (default: 10)")
    # lora only
    epochs: int = setting(1, range=flags.AT_LEAST_1, help="lora: passes over the samples")
    lr: float = setting(1e-4, range=flags.POSITIVE, help="lora: AdamW learning rate")
    lora_rank: int = setting(8, range=flags.AT_LEAST_1, help="lora: LoRA rank")
    lora_alpha: int = setting(16, range=flags.AT_LEAST_1, help="lora: LoRA alpha")
    # `bonbench train`'s --micro-batch was its --batch-size (sequences per forward); this one is the
    # samples of one optimiser step, hence its own name (recorded as micro_batch)
    micro_batch: int = setting(8, flag="--samples-per-step", deprecated=("--micro-batch",), range=flags.AT_LEAST_1,
                               help="lora: samples per optimiser step")
    save_every: int = setting(50, range=flags.AT_LEAST_1, help="lora: steps between saved training states")

    def settings(self) -> dict[str, Any]:
        """What a resumed training must share with the first one (everything but paths and batch size)."""
        d = asdict(self)
        for k in ("run_dirs", "out", "data_dir", "name", "batch_size", "save_every", "min_class"):
            d.pop(k)
        return d
