"""``TrainConfig``: every setting of a training run, checked once, hashed for resume.

A checkpoint folder records the config it was trained with; resuming (the same ``--name``) requires
the same settings except ``steps`` (which may grow) and the bookkeeping fields in ``RESUMABLE``.
What is compared and hashed is ``training_doc``: settings that cannot change what is trained are
left out of it, namely settings added after the first release while they hold their default (the
behaviour before they existed, so older checkpoints keep their hash and still resume) and settings
that only matter when another one switches them on (the KL annealing steps under a constant KL).
Each field is also a flag of ``bonbench train`` (help, spelling and range in its ``setting``).
This module does no I/O and parses no flags: it validates, schedules the KL coefficient and hashes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

from bonbench.api.objective import options_as_trained, pinned_options
from bonbench.core import flags, settings
from bonbench.core.errors import BonbenchError
from bonbench.core.settings import setting

# settings that may change between a run and its resumption without changing what is trained
RESUMABLE = ("steps", "save_every", "log_every", "out", "data_dir", "progress", "endpoints", "unsafe_no_sandbox", "ray",
             # the held-out evaluation reads the policy and never changes it (evaluate.py)
             "eval_task", "eval_task_args", "eval_every", "eval_metrics", "eval_n", "eval_limit", "eval_max_tokens",
             # which evaluated step is kept (best.py) and when training ends early (guards.py) change no step
             "keep_best", "stop_if", "report_to")
# settings added after the first release; their default reproduces the behaviour before them, and at
# that default they stay out of the training hash, so checkpoints written before them still resume
LATER = ("kl_schedule", "kl_coef_end", "kl_anneal_steps", "kl_anneal_delay", "value_lr", "adv_norm", "rationalize",
         "rollout_backend", "sync_every", "skip_zero_grad")
# settings that change nothing unless another setting switches them on
ONLY_WITH = {"kl_coef_end": ("kl_schedule", "linear"), "kl_anneal_steps": ("kl_schedule", "linear"),
             "kl_anneal_delay": ("kl_schedule", "linear")}


@dataclass(frozen=True)
class TrainConfig:
    """One training run. Defaults follow the papers where they agree (math-reference §2.8, §4).

    Each field is also ``bonbench train``'s flag (``bonbench.core.settings``): its help text, spelling
    and range are written here once.
    """

    task: str = setting(help="task whose train split gives prompts and rewards (math, imdb, ...)")
    objective: str = setting(help="see `bonbench list objectives`")
    name: str = setting(help="checkpoint folder name: results/checkpoints/NAME (the same name resumes)")
    # base model: hub id, folder, or the embedded gemma-3-270m (None)
    model: str | None = setting(None, env="BONBENCH_MODEL", help="base model (default: gemma-3-270m)")
    task_args: Mapping[str, str] = setting(default_factory=dict, flag="-T", help="task argument, repeatable")
    # -O pairs; cli.objective_options adds --k, --N, ... and checks them against the objective
    objective_options: Mapping[str, Any] = setting(default_factory=dict, flag="-O", help="objective option, repeatable")
    steps: int = setting(200, range=flags.AT_LEAST_1, help="optimiser steps (a resumed run may raise it)")
    prompts_per_step: int = setting(4, range=flags.AT_LEAST_1, help="P prompts per optimiser step")
    group: int = setting(8, range=flags.AT_LEAST_1, help="samples per prompt (G)")
    max_new_tokens: int | None = setting(None, flag="--max-tokens", deprecated=("--max-new-tokens",),
                                         range=flags.AT_LEAST_1, help="completion length (default: the task's)")
    temperature: float = setting(1.0, range=flags.POSITIVE,  # Chow et al. train at 1.0
                                 help="sampling temperature of the rollouts (> 0: the policy gradient needs a density)")
    # LoRA; full fine-tuning wants ~1e-6..1e-5 (Chow et al.: 3e-6)
    lr: float = setting(1e-4, range=flags.POSITIVE, help="AdamW learning rate")
    warmup: int = setting(10, range=flags.AT_LEAST_0, help="steps of linear learning-rate warmup")
    weight_decay: float = setting(0.0, range=flags.AT_LEAST_0, help="AdamW weight decay")
    max_grad_norm: float = setting(1.0, range=flags.POSITIVE, help="gradient clipping norm")
    lora_rank: int = setting(16, help="LoRA rank")  # >= 1 unless --full-finetune (checked below)
    lora_alpha: int = setting(32, range=flags.AT_LEAST_1, help="LoRA alpha")
    lora_targets: str = setting("all-linear", help="peft target modules: all-linear or a comma list")
    full_finetune: bool = setting(False, help="train every weight instead of LoRA adapters")
    kl_coef: float = setting(0.0, range=flags.AT_LEAST_0, help="beta of the per-token KL to the anchor")
    kl_anchor: Literal["ref", "ema"] = setting("ref", help="the base model, or an EMA of the policy")
    # "linear": kl_coef for kl_anneal_delay steps, then linear to kl_coef_end over kl_anneal_steps steps
    # (Chow et al. anneal over 2,500 steps after a delay of 10; their start and end values were lost)
    kl_schedule: Literal["constant", "linear"] = setting(
        "constant", help="linear: --kl-coef for --kl-anneal-delay steps, then linear to --kl-coef-end (Chow et al.)")
    kl_coef_end: float | None = setting(None, range=flags.AT_LEAST_0,
                                        help="the KL coefficient after annealing (needed with --kl-schedule linear)")
    kl_anneal_steps: int = setting(2500, range=flags.AT_LEAST_1, help="annealing length in steps (paper: 2500)")
    kl_anneal_delay: int = setting(10, range=flags.AT_LEAST_0, help="steps at --kl-coef before annealing (paper: 10)")
    ema_rate: float = setting(0.01, range=flags.SHARE, help="update rate of the EMA anchor (--kl-anchor ema)")
    # optimiser passes over one rollout batch (> 1: the PPO clipped surrogate matters)
    ppo_epochs: int = setting(1, range=flags.AT_LEAST_1, help="> 1: PPO clipped surrogate over each rollout batch")
    clip_eps: float = setting(0.2, range=(0, 1, False, False), help="PPO clip range epsilon")
    entropy_coef: float = setting(0.0, help="coefficient of the entropy bonus")
    # "sum": -sum_t w log pi (the objectives' gradient); "mean": divide by |y| (GRPO)
    length_norm: Literal["sum", "mean"] = setting("sum", help="sum: -sum_t w log pi; mean: divided by |y| (GRPO)")
    # for objectives that need verifier scores (the reference policy is the base model)
    verifier: str | None = setting(None, help="verifier scores for verifier-selected objectives (logprob, rm:<spec>)")
    ref_samples: int = setting(0, range=flags.AT_LEAST_0, help="M reference samples per prompt (vBoN's log F-hat)")
    # memory: logits are [micro_batch, tokens, vocab]
    micro_batch: int = setting(2, flag="--batch-size", deprecated=("--micro-batch",), range=flags.AT_LEAST_1,
                               help="sequences per forward/backward (memory grows with it)")
    dtype: Literal["bfloat16", "float16", "float32"] = setting(
        "bfloat16", help="autocast dtype on CPU and GPU (float32 turns autocast off)")
    # the learned value head (objectives with baseline="value" or p_source="value"): its AdamW rate.
    # Chow et al. use 1e-5 for a value *network*; a linear head on frozen features needs more (docs/trainer.md)
    value_lr: float = setting(1e-3, range=flags.POSITIVE,
                              help="AdamW rate of the learned value head (paper's network: 1e-5)")
    adv_norm: Literal["none", "batch", "std"] = setting(
        "none", help="normalise the step's advantages: batch whitens them (Chow et al.), std only rescales")
    rationalize: bool = setting(
        False, help="STaR: re-sample failed prompts with the gold answer as a hint, train on the correct ones")
    # AdamW would otherwise keep moving the weights on its momentum and weight decay (docs/trainer.md,
    # "Steps without a learning signal still move the policy")
    skip_zero_grad: bool = setting(
        False, help="no optimiser step when the gradient is exactly zero (every group flat, no KL or entropy "
                    "term): AdamW's momentum and weight decay would still move the weights")
    # one more forward pass without gradient per step
    log_kl: bool = setting(True, help="skip the per-step KL to the base model")
    # one backward per prompt
    log_grad_var: bool = setting(False, help="log the variance of per-prompt gradients")
    rollout_backend: Literal["hf", "vllm", "openai"] = setting(
        "hf", help="hf: sample in-process from the live weights; vllm: in-process vLLM with the live LoRA adapter "
                   "(GPU); openai: from servers the LoRA adapter is synced to")
    endpoints: tuple[str, ...] = setting(
        (), flag="--endpoint", metavar="URL",
        help="rollout server (repeatable): VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve BASE --enable-lora")
    sync_every: int = setting(1, range=flags.AT_LEAST_1, help="optimiser steps between adapter syncs to the servers")
    # held-out evaluation through the runner (evaluate.py): a normal run directory per evaluated step
    eval_task: str | None = setting(
        None, help="evaluate the live policy on this task (its test split) at step 0, every --eval-every steps and at the "
                   "end, each a normal run under CHECKPOINT/evals/")
    eval_task_args: Mapping[str, str] = setting(default_factory=dict, flag="--eval-task-arg", metavar="KEY=VALUE",
                                                help="argument of the evaluation task, repeatable")
    eval_every: int | None = setting(None, range=flags.AT_LEAST_1, metavar="K",
                                     help="optimiser steps between evaluations (default: at step 0 and at the end only)")
    eval_metrics: tuple[str, ...] = setting((), flag="--eval-metric",
                                            help="metrics of each evaluation, as `bonbench run --metric` (default: the "
                                                 "task's); repeatable; list form pass@1,4")
    eval_n: int | None = setting(None, range=flags.AT_LEAST_1,
                                 help="samples per evaluation problem (default: the largest k; independent of --group)")
    eval_limit: int | None = setting(None, range=flags.AT_LEAST_1, help="evaluate only the first N problems")
    eval_max_tokens: int | None = setting(None, range=flags.AT_LEAST_1, metavar="N",
                                          help="max new tokens of each evaluation sample (default: the task's)")
    keep_best: str | None = setting(
        None, metavar="METRIC",
        help="keep the evaluated step best at this --eval-metric in CHECKPOINT/best (a later step replaces it only when "
             "the lower end of its paired bootstrap CI against the kept step is above 0)")
    stop_if: tuple[str, ...] = setting(
        (), flag="--stop-if", metavar="RULE",
        help="end training when RULE holds, repeatable: entropy<0.5, kl>30 (any of reward, reward_std, solved_groups, "
             "entropy, loss, grad_norm, clip_frac, kl with < or >), eval:pass@1<step0 (the metric's paired CI against "
             "step 0 below 0), reward_up_eval_down:pass@1")
    report_to: Literal["none", "tensorboard", "wandb"] = setting(
        "none", help="also log each step and evaluation to TensorBoard (CHECKPOINT/tensorboard) or W&B (CHECKPOINT/wandb, "
                     "offline unless WANDB_MODE is set) under TRL's names; log.jsonl stays the record")
    seed: int = setting(0, range=flags.AT_LEAST_0, help="seed of prompt order, sampling and initialisation")
    # None: after every step, unless saving took more than a tenth of the time since the last save
    # (watch.SaveSchedule), so a kill loses little and saving costs little
    save_every: int | None = setting(
        None, range=flags.AT_LEAST_1, metavar="N",
        help="steps between saves of the resumable state (the same command resumes from the last one); "
             "default: after every step, or less often when a save takes over a tenth of the time since the last one")
    log_every: int = setting(1, cli=False, help="steps between log rows (not read by the loop yet)")
    data_dir: str | None = setting(None, help="local dataset mirror (default: $BONBENCH_DATA_DIR, else the hub)")
    out: str = setting("results", env="BONBENCH_OUT", help="results root (default: results/)")
    # how the task's grader runs (as `bonbench run`): they change where and how code runs, not its verdicts
    unsafe_no_sandbox: bool = setting(
        False, help="code tasks: run model code without bubblewrap (rlimits, uid change and group kill still apply)")
    ray: str | None = setting(
        None, const="local", metavar="ADDRESS",
        help="run code tests as Ray tasks: no value starts a local Ray, `auto` joins this machine's cluster, HOST:PORT "
             "a head's (docs/scale-out.md)")
    progress: bool = setting(True, cli=False, help="library callers: False turns progress reports off")

    def __post_init__(self) -> None:
        settings.check(self)  # each field's range and choices, as its flag states them
        full = self.full_finetune
        checks = [  # what one field's range cannot say: settings that depend on each other
            (self.lora_rank >= 1 or full, "--lora-rank must be >= 1 (or use --full-finetune)"),
            (self.kl_schedule == "constant" or self.kl_coef_end is not None,
             "--kl-schedule linear needs --kl-coef-end (the coefficient after annealing; --kl-coef is the start)"),
            (self.rollout_backend != "vllm" or not full,
             "--rollout-backend vllm serves the LoRA adapter; drop --full-finetune or use --rollout-backend hf"),
            (self.rollout_backend != "openai" or bool(self.endpoints),
             "--rollout-backend openai needs a server: --endpoint URL (repeatable) of `vllm serve BASE --enable-lora`"),
            (self.rollout_backend != "openai" or not full,
             "--rollout-backend openai syncs LoRA adapters to the server; drop --full-finetune or use --rollout-backend hf"),
            (bool(self.name) and "/" not in self.name and not self.name.startswith("."),
             "--name must be a plain folder name (it becomes results/checkpoints/NAME)"),
            (self.eval_task is not None or (self.eval_every is None and not self.eval_metrics and self.eval_n is None
                                            and self.eval_limit is None and not self.eval_task_args
                                            and self.eval_max_tokens is None),
             "--eval-every, --eval-metric, --eval-n, --eval-limit, --eval-max-tokens and --eval-task-arg set up an "
             "evaluation: add --eval-task TASK"),
            (self.eval_task is not None or self.keep_best is None,
             f"--keep-best {self.keep_best} keeps the best evaluated step: add --eval-task TASK --eval-metric "
             f"{self.keep_best}"),
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
        full["objective_options"] = options_as_trained(str(full["objective"]), full.get("objective_options") or {})
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
