"""The rollout loop: prompts -> G samples each from the live policy -> the task's own grades (and
verifier scores, reference log-probabilities, reference rewards where the objective needs them)
-> per-sample weights from the objective -> one or more optimiser steps -> log, save, export.

Per step and prompt group j (P prompts, G_j rows each), the loss is

    L = (1/P) sum_j sum_i -sur_ij  +  beta (1/R) sum_rows sum_t KL_t(pi || anchor)  -  c_H (1/R) sum_rows sum_t H_t

with sur_ij = sum_t min(rho_t w_ij, clip(rho_t, 1 +- eps) w_ij) over the tokens of y_ij (divided by
|y_ij| with ``length_norm="mean"``), rho_t = pi_theta / pi_old per token, R the number of rows. On
the first pass over a rollout batch rho = 1 and the gradient is exactly -(1/P) sum w_ij grad log
pi(y_ij | x_j), the objectives' estimator; further passes (``ppo_epochs`` > 1) are PPO's clipped
surrogate. KL_t is the exact KL between the next-token distributions of the policy and the anchor
(the base model, or an EMA of the policy) at each completion position; H_t the policy's entropy there.

Sampling seeds derive from (seed, step, problem, sample index) and prompt order from (seed, epoch),
so a resumed run redoes a step exactly as the killed one would have.

Under a launcher (torchrun, accelerate launch) the step's prompt groups are split over the ranks
(``distributed``): each rank samples, grades and backpropagates its own groups, P and R above stay
the global counts, the gradients are summed over ranks, so the update is the one-process update of
the same global batch; logged metrics are reduced over ranks and only rank 0 writes files.

This module runs the steps (resume, save, export; ``train``); one step is ``step.RolloutStep``'s.
The checks before a run starts are ``setup``'s (before the process group starts and any model
loads). This module does not take the optimiser step (``update``) or lay out the checkpoint's files
(``checkpoint``), and it prints nothing: progress goes to the ``on_step`` callback, warnings
through ``warnings`` (``TrainingWarning``), notices to the ``setup.NOTICES`` logger (``command``
shows them). Evaluating the exported model is ``bonbench run``'s.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from bonbench import __version__
from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.distributed import Comm, RankError, env_world, start, stop
from bonbench.apps.trainer.policy import Policy
from bonbench.apps.trainer.rollout_server import AdapterPublisher
from bonbench.apps.trainer.setup import Prepared, before_start, prepare_training
from bonbench.apps.trainer.step import RolloutStep
from bonbench.apps.trainer.value import ValueHead
from bonbench.apps.trainer.watch import SaveSchedule, SignalWatch, TrainingWarning
from bonbench.core.errors import BonbenchError
from bonbench.core.provenance import git_sha
from bonbench.run.resolve import build_verifier

StepCallback = Callable[[int, int, Mapping[str, Any]], None]  # (steps done, total, last log row)


class Trainer(RolloutStep):
    """One training run (``train`` is the whole of it; a step is ``step.RolloutStep``'s, its optimiser steps
    ``update.PolicyUpdate``'s)."""

    def __init__(self, prep: Prepared, on_step: StepCallback | None = None, comm: Comm | None = None) -> None:
        self.p, self.cfg, self.task, self.objective, self.ckpt = prep, prep.cfg, prep.task, prep.objective, prep.ckpt
        self.comm = comm or Comm()
        self.on_step = on_step if self.comm.is_main else None
        self.saves = SaveSchedule(self.cfg.save_every)
        self.style = "chat" if prep.model.is_chat else "base"
        self.max_tokens = self.cfg.max_new_tokens or self.task.max_tokens
        self.verifier = build_verifier(self.cfg.verifier, self.cfg.data_dir) if self.cfg.verifier else None
        self.policy = Policy(prep.model, self.cfg, device=self.comm.device)
        self.optimizer = torch.optim.AdamW(self.policy.trainable(), lr=self.cfg.lr, weight_decay=self.cfg.weight_decay)
        warm = self.cfg.warmup
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: min(1.0, (s + 1) / warm) if warm else 1.0)
        # fp16's loss scaling (update.py); off, and every call a no-op, in bf16 and float32
        self.scaler = torch.amp.GradScaler(self.policy.device.type, enabled=self.cfg.dtype == "float16")
        self.ref_rewards: dict[str, list[float]] = {}
        self.publisher = None  # the rollout servers (--rollout-backend openai)
        if self.cfg.rollout_backend == "openai":
            self.publisher = AdapterPublisher(self.cfg.name, prep.ckpt.root, self.cfg.endpoints, prep.model.is_chat)
        self.rollouts = None  # the vLLM rollout engine (--rollout-backend vllm), started on first use
        # the learned value head, when the objective reads Group.value (baseline / p from the value)
        self.value = ValueHead(self.policy.hidden_size, self.cfg.value_lr, self.policy.device) \
            if "value" in self.objective.needs else None

    # ---------------------------------------------------------------- the run

    def _restore(self) -> int:
        """Load the saved state, if any; returns the steps it covers."""
        ck = self.p.ckpt
        if ck.saved_step() == 0:
            return 0
        state = ck.load_state()
        self.policy.load_trainable_state(state["weights"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if state.get("scaler"):  # float16 runs; a state saved before the scaler existed starts it afresh
            self.scaler.load_state_dict(state["scaler"])
        if self.policy.ema is not None and state.get("ema") is not None:
            self.policy.ema = {k: v.to(self.policy.device) for k, v in state["ema"].items()}
        if self.value is not None:
            if state.get("value") is None:
                raise BonbenchError(f"checkpoint {self.cfg.name!r} has no value head state; use another --name")
            self.value.load_state_dict(state["value"])
        return int(state["step"])

    def train(self) -> Path:
        ck, cfg, comm = self.p.ckpt, self.cfg, self.comm
        # every rank checks (the same error everywhere, no rank left waiting); rank 0 alone writes
        ck.check_or_write_config(cfg, write=comm.is_main)
        # rank 0 first: loading repairs a state folder a kill left half-renamed
        start = self._restore() if comm.is_main else 0
        comm.barrier()
        if not comm.is_main:
            start = self._restore()
        comm.broadcast([p for p in self.policy.trainable()] + list((self.policy.ema or {}).values())
                       + (list(self.value.head.parameters()) if self.value is not None else []))
        if comm.is_main:
            ck.truncate_after(start)  # rows of steps the saved state does not cover; never earlier ones
        self._load_ref_rewards()
        # rank 0 watches for steps without a learning signal, counting the logged steps of a resumed run
        watch = SignalWatch(history=ck.read_rows(ck.log_path)) if comm.is_main else None
        last: Mapping[str, Any] = {}
        if self.on_step is not None:
            self.on_step(start, cfg.steps, last)
        self.saves.start()
        try:
            if start < cfg.steps:
                self._sync_rollout_servers(start)
            for step in range(start, cfg.steps):
                last = self.step(step)
                done = step + 1
                if watch is not None:
                    ck.append_rows(ck.log_path, [last])
                    if self.saves.due(done, cfg.steps):
                        self._save(done)
                    self._warn(watch.update(last))
                if done < cfg.steps and done % cfg.sync_every == 0:
                    self._sync_rollout_servers(done)
                if self.on_step is not None:
                    self.on_step(done, cfg.steps, last)
        finally:
            if self.rollouts is not None:
                self.rollouts.close()
                self.rollouts = None
        if watch is not None and start < cfg.steps:
            self._warn(watch.finish())
        if comm.is_main and (start < cfg.steps or ck.exported_step() != ck.saved_step()):
            self.export()
        comm.barrier()  # the job ends when the export is complete
        return ck.root

    def _save(self, done: int) -> None:
        t = time.perf_counter()
        self.p.ckpt.save_state(done, self.policy.trainable_state(), self.optimizer, self.scheduler, self.policy.ema,
                               self.value.state_dict() if self.value is not None else None, self.scaler.state_dict())
        self.saves.saved(time.perf_counter() - t)

    @staticmethod
    def _warn(message: str | None) -> None:
        if message:
            warnings.warn(message, TrainingWarning, stacklevel=2)

    def _load_ref_rewards(self) -> None:
        """Reference rewards drawn before (a resumed run), in file order, one per key (problem_id,
        sample_idx); a prompt with fewer than M (a kill mid-append) is drawn again: the same samples,
        since their seeds derive from (seed, problem, index)."""
        seen: dict[tuple[str, int], float] = {}
        for row in self.p.ckpt.read_rows(self.p.ckpt.ref_samples_path):
            seen.setdefault((str(row["problem_id"]), int(row["sample_idx"])), float(row["reward"]))
        drawn: dict[str, list[float]] = {}
        for (pid, _), reward in seen.items():
            drawn.setdefault(pid, []).append(reward)
        self.ref_rewards = {pid: r for pid, r in drawn.items() if len(r) >= self.cfg.ref_samples}

    def _sync_rollout_servers(self, step: int) -> None:
        """``--rollout-backend openai``: rank 0 loads the adapters as of ``step`` into the servers; no
        rank samples before they are there."""
        if self.publisher is None:
            return
        if self.comm.is_main:
            self.publisher.publish(self.policy.lm, step)
        else:
            self.publisher.use(step)
        self.comm.barrier()

    def export(self) -> None:
        ck, cfg, m = self.p.ckpt, self.cfg, self.p.model
        ck.clear_export()
        sha = self.policy.export(ck.root)
        ck.write_manifest({
            "format": 1,
            "name": cfg.name,
            "objective": cfg.objective,
            "objective_options": dict(self.objective.options),
            "config": cfg.to_json(),
            "training_hash": cfg.training_hash(),
            "base": {"name": m.name, "path": m.path, "fingerprint": m.fingerprint, "revision": m.revision,
                     "is_chat": m.is_chat},
            "task": {"name": self.task.name, "version": self.task.version, "args": dict(cfg.task_args), "split": "train",
                     "dataset_fingerprint": self.task.fingerprint},
            "adapter": None if cfg.full_finetune else {"kind": "lora", "rank": cfg.lora_rank, "alpha": cfg.lora_alpha,
                                                        "targets": cfg.lora_targets, "merged": True},
            "steps": ck.saved_step(),
            "weights_sha256": sha,
            "bonbench_version": __version__,
            "git_sha": git_sha(),
            "log": ck.read_rows(ck.log_path),
        })


def train(cfg: TrainConfig, on_step: StepCallback | None = None) -> Path:
    """Train (or resume) ``cfg``; returns the checkpoint folder. Bad input raises BonbenchError first.
    One-line notices (resuming, already complete) go to the ``bonbench.apps.trainer`` logger at INFO,
    warnings through ``warnings`` as ``TrainingWarning``. Under a launcher (WORLD_SIZE > 1) this
    process is one data-parallel rank (``distributed``)."""
    # before the process group starts: bad input is the same error on every rank, and none waits
    prep = prepare_training(cfg)
    if before_start(prep):
        if on_step is not None and env_world()[0] == 0:
            on_step(cfg.steps, cfg.steps, {})  # a progress bar shows the run full
        return prep.ckpt.root
    comm, started = start(cfg.prompts_per_step)
    try:
        torch.manual_seed(cfg.seed)
        return Trainer(prep, on_step, comm).train()
    except BonbenchError as exc:
        if comm.active and not isinstance(exc, RankError):
            raise RankError(f"rank {comm.rank}: {exc}") from exc
        raise
    finally:
        stop(started)
