"""``TrainConfig``: every setting of a training run, checked once, hashed for resume.

A checkpoint folder records the config it was trained with; resuming (the same ``--name``) requires
the same settings except ``steps`` (which may grow) and the bookkeeping fields in ``RESUMABLE``.
What is compared and hashed is ``training_doc``: settings that cannot change what is trained are
left out of it, namely settings added after the first release while they hold their default (the
behaviour before they existed, so older checkpoints keep their hash and still resume) and settings
that only matter when another one switches them on (the KL annealing steps under a constant KL).
This module does no I/O: it validates, schedules the KL coefficient and hashes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping

from bonbench.core.errors import BonbenchError
from bonbench.api.objective import pinned_options, recorded_options

KL_ANCHORS = ("ref", "ema")
KL_SCHEDULES = ("constant", "linear")
LENGTH_NORMS = ("sum", "mean")
ADV_NORMS = ("none", "batch", "std")
ROLLOUT_BACKENDS = ("hf", "vllm", "openai")
# settings that may change between a run and its resumption without changing what is trained
RESUMABLE = ("steps", "save_every", "log_every", "out", "data_dir", "progress", "endpoints", "unsafe_no_sandbox", "ray")
# settings added after the first release; their default reproduces the behaviour before them, and at
# that default they stay out of the training hash, so checkpoints written before them still resume
LATER = ("kl_schedule", "kl_coef_end", "kl_anneal_steps", "kl_anneal_delay", "value_lr", "adv_norm", "rationalize",
         "rollout_backend", "sync_every", "skip_zero_grad")
# settings that change nothing unless another setting switches them on
ONLY_WITH = {"kl_coef_end": ("kl_schedule", "linear"), "kl_anneal_steps": ("kl_schedule", "linear"),
             "kl_anneal_delay": ("kl_schedule", "linear")}


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
    # "linear": kl_coef for kl_anneal_delay steps, then linear to kl_coef_end over kl_anneal_steps steps
    # (Chow et al. anneal over 2,500 steps after a delay of 10; their start and end values were lost)
    kl_schedule: str = "constant"
    kl_coef_end: float | None = None
    kl_anneal_steps: int = 2500
    kl_anneal_delay: int = 10
    ema_rate: float = 0.01
    ppo_epochs: int = 1  # optimiser passes over one rollout batch (> 1: the PPO clipped surrogate matters)
    clip_eps: float = 0.2
    entropy_coef: float = 0.0
    length_norm: str = "sum"  # "sum": -sum_t w log pi (the objectives' gradient); "mean": divide by |y| (GRPO)
    verifier: str | None = None  # for objectives that need verifier scores (the reference policy is the base model)
    ref_samples: int = 0  # M reference samples per prompt (vBoN's log F-hat)
    micro_batch: int = 2  # sequences per forward/backward (memory: logits are [micro_batch, tokens, vocab])
    dtype: str = "bfloat16"  # autocast dtype on CPU and GPU ("float32" turns it off)
    # the learned value head (objectives with baseline="value" or p_source="value"): its AdamW rate.
    # Chow et al. use 1e-5 for a value *network*; a linear head on frozen features needs more (docs/trainer.md)
    value_lr: float = 1e-3
    adv_norm: str = "none"  # "batch": whiten the step's advantages (Chow et al.); "std": divide by their std only
    rationalize: bool = False  # STaR's rationalisation: hinted re-samples for prompts the policy fails on
    # no optimiser step when the step's gradient is exactly zero (no group carries a learning signal and
    # no KL or entropy term): AdamW would otherwise keep moving the weights on its momentum and weight
    # decay (docs/trainer.md, "Steps without a learning signal still move the policy")
    skip_zero_grad: bool = False
    log_kl: bool = True  # log KL(pi || base) per step (one more forward pass without gradient)
    log_grad_var: bool = False  # per-step variance of per-prompt gradients (one backward per prompt)
    # "hf": the live weights in-process; "vllm": in-process vLLM with the live LoRA adapter (GPU);
    # "openai": rollout servers (--endpoint) with the synced LoRA adapter
    rollout_backend: str = "hf"
    endpoints: tuple[str, ...] = ()  # rollout servers (--rollout-backend openai)
    sync_every: int = 1  # optimiser steps between adapter syncs to the rollout servers
    seed: int = 0
    # steps between saves of the resumable state; None: after every step, unless saving took more than a
    # tenth of the time since the last save (watch.SaveSchedule), so a kill loses little and saving costs little
    save_every: int | None = None
    log_every: int = 1
    data_dir: str | None = None
    out: str = "results"
    # how the task's grader runs (as `bonbench run`): they change where and how code runs, not its verdicts
    unsafe_no_sandbox: bool = False  # run code tests without the sandbox (trusted code only)
    ray: str | None = None  # run code tests as Ray tasks: local, auto or HOST:PORT
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
            (self.kl_schedule in KL_SCHEDULES, f"--kl-schedule must be one of {', '.join(KL_SCHEDULES)}"),
            (self.kl_schedule == "constant" or self.kl_coef_end is not None,
             "--kl-schedule linear needs --kl-coef-end (the coefficient after annealing; --kl-coef is the start)"),
            (self.kl_coef_end is None or self.kl_coef_end >= 0, "--kl-coef-end must be >= 0"),
            (self.kl_anneal_steps >= 1, "--kl-anneal-steps must be >= 1"),
            (self.kl_anneal_delay >= 0, "--kl-anneal-delay must be >= 0"),
            (self.value_lr > 0, "--value-lr must be > 0"),
            (self.adv_norm in ADV_NORMS, f"--adv-norm must be one of {', '.join(ADV_NORMS)}"),
            (self.rollout_backend in ROLLOUT_BACKENDS, f"--rollout-backend must be one of {', '.join(ROLLOUT_BACKENDS)}"),
            (self.rollout_backend != "vllm" or not self.full_finetune,
             "--rollout-backend vllm serves the LoRA adapter; drop --full-finetune or use --rollout-backend hf"),
            (0 < self.ema_rate <= 1, "--ema-rate must be in (0, 1]"),
            (self.ppo_epochs >= 1, "--ppo-epochs must be >= 1"),
            (0 < self.clip_eps < 1, "--clip-eps must be in (0, 1)"),
            (self.length_norm in LENGTH_NORMS, f"--length-norm must be one of {', '.join(LENGTH_NORMS)}"),
            (self.ref_samples >= 0, "--ref-samples must be >= 0"),
            (self.micro_batch >= 1, "--micro-batch must be >= 1"),
            (self.dtype in ("bfloat16", "float16", "float32"), "--dtype must be bfloat16, float16 or float32"),
            (self.save_every is None or self.save_every >= 1, "--save-every must be >= 1"),
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
        # a default that changed (objectives/base.py CHANGED_DEFAULTS) is written into the config, so the
        # recorded settings name the estimator this run trains with and an older record (which names
        # none, and meant the old default) compares as different instead of resuming under the new one
        object.__setattr__(self, "objective_options", pinned_options(self.objective, self.objective_options))

    # ---------------------------------------------------------------- the KL schedule

    def kl_at(self, step: int) -> float:
        """The KL coefficient of optimiser step ``step`` (0-based): a function of the step alone, so a
        resumed run uses the coefficients an uninterrupted one would."""
        if self.kl_schedule == "constant" or self.kl_coef_end is None:
            return self.kl_coef
        done = min(max(step - self.kl_anneal_delay, 0), self.kl_anneal_steps) / self.kl_anneal_steps
        return self.kl_coef + (self.kl_coef_end - self.kl_coef) * done

    @property
    def kl_active(self) -> bool:
        """Whether any step has a KL term (the anchor, EMA included, is kept only then)."""
        return self.kl_coef > 0 or (self.kl_schedule != "constant" and (self.kl_coef_end or 0.0) > 0)

    # ---------------------------------------------------------------- hashing

    def to_json(self) -> dict[str, Any]:
        return json.loads(json.dumps(asdict(self), default=str))

    def training_hash(self) -> str:
        """Hash of what is trained: ``training_doc`` (every setting that can change the outputs)."""
        return hashlib.sha256(json.dumps(training_doc(self.to_json()), sort_keys=True).encode()).hexdigest()[:12]

    def differences(self, other: Mapping[str, Any]) -> list[str]:
        """Settings of ``training_doc`` whose value differs from a recorded config."""
        mine, theirs = training_doc(self.to_json()), training_doc(other)
        return [f.name for f in fields(self) if mine.get(f.name) != theirs.get(f.name)]


def training_doc(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of a recorded config (``TrainConfig.to_json``, possibly written before some
    fields existed) that can change what is trained: no ``RESUMABLE`` field, no ``LATER`` field at
    its default (a missing one counts as its default), no ``ONLY_WITH`` field whose switch is off."""
    later = {f.name: f.default for f in fields(TrainConfig) if f.name in LATER}
    full = {**later, **doc}
    if "objective" in full:  # a record that names no value of a changed default trained with the old one
        full["objective_options"] = recorded_options(str(full["objective"]), full.get("objective_options") or {})
    out = {}
    for key, value in full.items():
        if key in RESUMABLE:
            continue
        if key in later and value == later[key]:
            continue
        switch = ONLY_WITH.get(key)
        if switch is not None and full.get(switch[0]) != switch[1]:
            continue
        out[key] = value
    return out
