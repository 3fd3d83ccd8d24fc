"""``TrainConfig``: every setting of a training run, checked once, hashed for resume.

A checkpoint folder records the config it was trained with; resuming (the same ``--name``) requires
the same settings except ``steps`` (which may grow) and the bookkeeping fields in ``RESUMABLE``.
This module does no I/O: it validates and hashes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping

from bonbench.errors import BonbenchError

KL_ANCHORS = ("ref", "ema")
LENGTH_NORMS = ("sum", "mean")
ROLLOUT_BACKENDS = ("hf", "openai")
# settings that may change between a run and its resumption without changing what is trained
RESUMABLE = ("steps", "save_every", "log_every", "out", "data_dir", "progress", "endpoints")


@dataclass(frozen=True)
class TrainConfig:
    """One training run. Defaults follow the papers where they agree (math-reference §2.8, §4)."""

    task: str
    objective: str
    name: str
    model: str | None = None  # base model: hub id, folder, or the embedded gemma-3-270m (None)
    task_args: Mapping[str, str] = field(default_factory=dict)
    objective_options: Mapping[str, Any] = field(default_factory=dict)
    steps: int = 200
    prompts_per_step: int = 4  # P prompts per optimiser step
    group: int = 8  # G samples per prompt
    max_new_tokens: int | None = None  # default: the task's
    temperature: float = 1.0  # Chow et al. train at 1.0
    lr: float = 1e-4  # LoRA; full fine-tuning wants ~1e-6..1e-5 (Chow et al.: 3e-6)
    warmup: int = 10
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    lora_rank: int = 16
    lora_alpha: int = 32
    lora_targets: str = "all-linear"
    full_finetune: bool = False
    kl_coef: float = 0.0  # beta of the per-token KL to the anchor (0: no KL term)
    kl_anchor: str = "ref"  # "ref": the base model; "ema": an EMA of the policy (Chow et al.)
    ema_rate: float = 0.01
    ppo_epochs: int = 1  # optimiser passes over one rollout batch (> 1: the PPO clipped surrogate matters)
    clip_eps: float = 0.2
    entropy_coef: float = 0.0
    length_norm: str = "sum"  # "sum": -sum_t w log pi (the objectives' gradient); "mean": divide by |y| (GRPO)
    verifier: str | None = None  # for objectives that need verifier scores (the reference policy is the base model)
    ref_samples: int = 0  # M reference samples per prompt (vBoN's log F-hat)
    micro_batch: int = 2  # sequences per forward/backward (memory: logits are [micro_batch, tokens, vocab])
    dtype: str = "bfloat16"  # autocast dtype on CPU and GPU ("float32" turns it off)
    log_kl: bool = True  # log KL(pi || base) per step (one more forward pass without gradient)
    log_grad_var: bool = False  # per-step variance of per-prompt gradients (one backward per prompt)
    rollout_backend: str = "hf"  # "hf": the live weights in-process; "openai": servers with the synced LoRA adapter
    endpoints: tuple[str, ...] = ()  # rollout servers (--rollout-backend openai)
    sync_every: int = 1  # optimiser steps between adapter syncs to the rollout servers
    seed: int = 0
    save_every: int = 50
    log_every: int = 1
    data_dir: str | None = None
    out: str = "results"
    progress: bool = True

    def __post_init__(self) -> None:
        checks = [
            (self.steps >= 1, "--steps must be >= 1"),
            (self.prompts_per_step >= 1, "--prompts-per-step must be >= 1"),
            (self.group >= 1, "--group must be >= 1"),
            (self.temperature > 0, "--temperature must be > 0 (the policy gradient needs a sampling density)"),
            (self.lr > 0, "--lr must be > 0"),
            (self.warmup >= 0, "--warmup must be >= 0"),
            (self.max_grad_norm > 0, "--max-grad-norm must be > 0"),
            (self.lora_rank >= 1 or self.full_finetune, "--lora-rank must be >= 1 (or use --full-finetune)"),
            (self.kl_coef >= 0, "--kl-coef must be >= 0"),
            (self.kl_anchor in KL_ANCHORS, f"--kl-anchor must be one of {', '.join(KL_ANCHORS)}"),
            (0 < self.ema_rate <= 1, "--ema-rate must be in (0, 1]"),
            (self.ppo_epochs >= 1, "--ppo-epochs must be >= 1"),
            (0 < self.clip_eps < 1, "--clip-eps must be in (0, 1)"),
            (self.length_norm in LENGTH_NORMS, f"--length-norm must be one of {', '.join(LENGTH_NORMS)}"),
            (self.ref_samples >= 0, "--ref-samples must be >= 0"),
            (self.micro_batch >= 1, "--micro-batch must be >= 1"),
            (self.dtype in ("bfloat16", "float16", "float32"), "--dtype must be bfloat16, float16 or float32"),
            (self.save_every >= 1, "--save-every must be >= 1"),
            (self.rollout_backend in ROLLOUT_BACKENDS, f"--rollout-backend must be one of {', '.join(ROLLOUT_BACKENDS)}"),
            (self.rollout_backend != "openai" or bool(self.endpoints),
             "--rollout-backend openai needs a server: --endpoint URL (repeatable) of `vllm serve BASE --enable-lora`"),
            (self.rollout_backend != "openai" or not self.full_finetune,
             "--rollout-backend openai syncs LoRA adapters to the server; drop --full-finetune or use --rollout-backend hf"),
            (self.sync_every >= 1, "--sync-every must be >= 1"),
            (self.max_new_tokens is None or self.max_new_tokens >= 1, "--max-new-tokens must be >= 1"),
            (bool(self.name) and "/" not in self.name and not self.name.startswith("."),
             "--name must be a plain folder name (it becomes results/checkpoints/NAME)"),
        ]
        for ok, message in checks:
            if not ok:
                raise BonbenchError(message)

    def to_json(self) -> dict[str, Any]:
        return json.loads(json.dumps(asdict(self), default=str))

    def training_hash(self) -> str:
        """Hash of what is trained: every field but ``RESUMABLE`` ones, and fields added later
        (``LATER``) only when they differ from their default, so older runs keep their hash."""
        doc = {k: v for k, v in self.to_json().items()
               if k not in RESUMABLE and not (k in LATER and v == LATER[k])}
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:12]

    def differences(self, other: Mapping[str, Any]) -> list[str]:
        """Fields (outside ``RESUMABLE``) whose value differs from a recorded config (one recorded
        before a ``LATER`` field existed had that field's default)."""
        mine = self.to_json()
        return [f.name for f in fields(self)
                if f.name not in RESUMABLE and mine.get(f.name) != other.get(f.name, LATER.get(f.name))]


# fields added after checkpoints were first written, with the value older checkpoints implied
LATER: dict[str, Any] = {"rollout_backend": "hf", "sync_every": 1}
