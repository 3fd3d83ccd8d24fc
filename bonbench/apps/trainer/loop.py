"""The training loop: prompts -> G samples each from the live policy -> the task's own grades (and
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

``Trainer`` is composed of parts that each own their state: the ``policy.Policy``, its
``update.Update`` (AdamW, schedule, loss scale), the ``value.ValueHead`` where the objective reads
it, and ``step.Sampling`` (the rollout backends and reference rewards). ``Trainer.train`` reads top
to bottom: resume, then each step (``Trainer.step``: collect the rollouts, their ``signals``, the
objective's weights, the value head's step, the optimiser steps, the log row), its row appended,
the state saved when due, the hooks told (``hooks.Callback``: progress, warnings, and whatever the
caller adds; one may stop the run), then the export. The checks before a run starts are ``setup``'s
(before the process group starts and any model loads). This module does not lay out the
checkpoint's files (``checkpoint``) and prints nothing: progress goes to the ``on_step`` callback,
warnings through ``warnings`` (``TrainingWarning``), notices to the ``setup.NOTICES`` logger
(``command`` shows them). Evaluating the exported model is ``bonbench run``'s.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bonbench import __version__
from bonbench.apps.trainer import signals
from bonbench.apps.trainer.best import KeepBest
from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.distributed import Comm, RankError, env_world, start, stop
from bonbench.apps.trainer.evaluate import Evaluation
from bonbench.apps.trainer.guards import Guards
from bonbench.apps.trainer.hooks import Callback, Callbacks, Progress, SignalWarnings, StepCallback
from bonbench.apps.trainer.loggers import reporter
from bonbench.apps.trainer.policy import Policy
from bonbench.apps.trainer.setup import NOTICES, Prepared, before_start, prepare_training
from bonbench.apps.trainer.step import Sampling
from bonbench.apps.trainer.update import Update
from bonbench.apps.trainer.value import ValueHead
from bonbench.apps.trainer.vllm_rollout import VLLMRollouts
from bonbench.apps.trainer.watch import SaveSchedule
from bonbench.core.errors import BonbenchError
from bonbench.core.provenance import git_sha
from bonbench.run.resolve import build_verifier


class Trainer:
    """One training run (see the module docstring): ``train`` is the whole of it, ``step`` one step."""

    def __init__(self, prep: Prepared, on_step: StepCallback | None = None, comm: Comm | None = None,
                 callbacks: Sequence[Callback] = ()) -> None:
        self.p, self.cfg, self.task, self.objective, self.ckpt = prep, prep.cfg, prep.task, prep.objective, prep.ckpt
        cfg = self.cfg
        self.comm = comm or Comm()
        self.saves = SaveSchedule(cfg.save_every)
        verifier = build_verifier(cfg.verifier, cfg.data_dir) if cfg.verifier else None
        self.policy = Policy(prep.model, cfg, device=self.comm.device)
        self.update = Update(cfg, self.policy, self.comm)
        self.sampling = Sampling(cfg, self.task, self.policy, self.comm, self.ckpt, needs=self.objective.needs,
                                 verifier=verifier, is_chat=prep.model.is_chat)
        # the learned value head, when the objective reads Group.value (baseline / p from the value)
        self.value = (ValueHead(self.policy.hidden_size, cfg.value_lr, self.policy.device)
                      if "value" in self.objective.needs else None)
        # the hooks run on rank 0: progress, the caller's, the held-out evaluation (and the no-signal
        # warnings, added first by train once the log of a resumed run is read)
        hooks: list[Callback] = [Progress(on_step)] if on_step is not None else []
        hooks += callbacks
        self.evaluation: Evaluation | None = None
        if cfg.eval_task is not None:
            self.evaluation = Evaluation(cfg, self.policy, self.ckpt, prep.model.fingerprint, prep.model.is_chat,
                                         rollouts=self.sampling.vllm if cfg.rollout_backend == "vllm" else None)
            hooks.append(self.evaluation)
            if prep.keep_best is not None:  # after the evaluation: it reads the evaluation just made
                hooks.append(KeepBest(*prep.keep_best, self.evaluation, self.ckpt.root, self.export_copy))
        self.hooks = Callbacks(hooks if self.comm.is_main else [])

    # ---------------------------------------------------------------- the run

    def train(self) -> Path:
        """Train from the saved state (or step 0) to ``--steps``, or until a hook stops the run; export."""
        cfg, ck, comm = self.cfg, self.ckpt, self.comm
        start = self._resume()
        if comm.is_main:
            history = ck.read_rows(ck.log_path)
            self.hooks.callbacks.insert(0, SignalWarnings(history=history))
            if self.p.stop_rules:  # --stop-if: asked after every step, with the evaluation made after it
                self.hooks.callbacks.append(Guards(self.p.stop_rules, self.latest_evaluation, history, cfg.eval_every))
            logger = reporter(cfg, ck.root, cfg.training_hash(), self.latest_evaluation, history)
            if logger is not None:  # --report-to: after the evaluation hook, so it sees the evaluation of each step
                self.hooks.callbacks.append(logger)
        self.hooks.on_train_begin(start, cfg.steps)
        self.saves.start()
        done = start
        try:
            if start < cfg.steps:
                self.sampling.sync_servers(start)
            for step in range(start, cfg.steps):
                row = self.step(step)
                done = step + 1
                if comm.is_main:
                    ck.append_rows(ck.log_path, [row])
                self.hooks.on_step_end(done, row)
                reason = self._stop_reason()
                if comm.is_main and (self.saves.due(done, cfg.steps) or reason):
                    self._save(done)
                    self.hooks.on_checkpoint(done)
                if done < cfg.steps and done % cfg.sync_every == 0 and not reason:
                    self.sampling.sync_servers(done)
                if reason:
                    NOTICES.info(f"stopping after step {done} of {cfg.steps}: {reason}")
                    break
        finally:
            self.sampling.close()
        self.hooks.on_train_end(done)
        if comm.is_main and (start < cfg.steps or ck.exported_step() != ck.saved_step()):
            self.export()
        comm.barrier()  # the job ends when the export is complete
        return ck.root

    def step(self, step: int) -> dict[str, Any]:
        """One optimiser step (or ``ppo_epochs`` of them) on fresh rollouts; returns its log row."""
        cfg, comm = self.cfg, self.comm
        t0 = time.perf_counter()
        r = self.sampling.collect(step)
        sig = signals.signals(self.policy, {p.id: self.sampling.prompt(p) for p in r.mine}, r, self.objective.needs,
                              self.value, log_kl=cfg.log_kl)
        groups, weights = signals.weights(self.objective, r, sig, self.sampling.ref_rewards, cfg.adv_norm, comm)
        value_stats = signals.value_step(self.value, self.objective, r, groups, sig, comm)
        lr, kl_coef = self.update.lr, cfg.kl_at(step)  # the rate and coefficient this step's update uses
        # the loss divides by the step's groups and rows over all ranks (1/P, 1/R of the module docstring)
        n_rows = int(comm.sum([len(sig.pairs)])[0])
        stats = self._optimise(sig.pairs, weights, [groups[p.id][0] for p in r.mine], kl_coef, (len(r.everyone), n_rows))
        self.policy.update_ema()
        token_logprobs = stats.pop("_token_logprobs")
        row, rollouts = signals.log_row(step, r, sig, weights, groups, token_logprobs, t0, lr=lr, kl_coef=kl_coef,
                                        n_rows=n_rows, rationalize=cfg.rationalize, comm=comm)
        if comm.is_main:
            self.ckpt.append_rows(self.ckpt.rollouts_path, rollouts)
        return {**row, **value_stats, **stats}

    # ---------------------------------------------------------------- the update (tests watch it here)

    def _optimise(self, pairs: Sequence[tuple[list[int], list[int]]], weights: np.ndarray,
                  groups: Sequence[Sequence[int]], kl_coef: float, totals: tuple[int, int] | None = None) -> dict[str, Any]:
        """``update.Update.optimise``: ``step`` calls it through here, so a test can see what it trains on."""
        return self.update.optimise(pairs, weights, groups, kl_coef, totals)

    def _optimise_grads(self, pairs: Sequence[tuple[list[int], list[int]]], weights: np.ndarray,
                        groups: Sequence[Sequence[int]], step: int = 0,
                        totals: tuple[int, int] | None = None) -> dict[str, Any]:
        """``update.Update.first_pass_grads`` (the exactness tests read the gradient it leaves)."""
        return self.update.first_pass_grads(pairs, weights, groups, step, totals)

    # the parts' state, as tests and benchmarks read it off the trainer
    @property
    def optimizer(self) -> torch.optim.Optimizer:
        return self.update.optimizer

    @property
    def scheduler(self) -> Any:
        return self.update.scheduler

    @property
    def scaler(self) -> torch.amp.GradScaler:
        return self.update.scaler

    @property
    def style(self) -> str:
        return self.sampling.style

    @property
    def rollouts(self) -> VLLMRollouts | None:
        """The vLLM rollout engine (``--rollout-backend vllm``), once the first step started it."""
        return self.sampling.engine

    def latest_evaluation(self) -> dict[str, Any] | None:
        """The ``evals.jsonl`` row of the evaluation made after the last step, if one was due."""
        return self.evaluation.latest if self.evaluation is not None else None

    # ---------------------------------------------------------------- resume, stop, save, export

    def _resume(self) -> int:
        """Check the recorded config, load the saved state (every rank the same), drop rows of steps it
        does not cover, and read the reference rewards drawn so far; returns the steps it covers."""
        ck, comm = self.ckpt, self.comm
        # every rank checks (the same error everywhere, no rank left waiting); rank 0 alone writes
        ck.check_or_write_config(self.cfg, write=comm.is_main)
        # rank 0 first: loading repairs a state folder a kill left half-renamed
        start = self._restore() if comm.is_main else 0
        comm.barrier()
        if not comm.is_main:
            start = self._restore()
        comm.broadcast(self.policy.trainable() + list((self.policy.ema or {}).values())
                       + (list(self.value.head.parameters()) if self.value is not None else []))
        if comm.is_main:
            ck.truncate_after(start)  # rows of steps the saved state does not cover; never earlier ones
        self.sampling.load_reference_rewards()
        return start

    def _restore(self) -> int:
        """Load the saved state, if any; returns the steps it covers."""
        if self.ckpt.saved_step() == 0:
            return 0
        state = self.ckpt.load_state()
        self.policy.load_trainable_state(state["weights"])
        self.update.load(state)
        if self.policy.ema is not None and state.get("ema") is not None:
            self.policy.ema = {k: v.to(self.policy.device) for k, v in state["ema"].items()}
        if self.value is not None:
            if state.get("value") is None:
                raise BonbenchError(f"checkpoint {self.cfg.name!r} has no value head state; use another --name")
            self.value.load_state_dict(state["value"])
        return int(state["step"])

    def _stop_reason(self) -> str | None:
        """A hook's reason to stop (rank 0's), the decision shared with every rank."""
        reason = self.hooks.should_stop()
        if self.comm.active and self.comm.sum([1.0 if reason else 0.0])[0] > 0:
            return reason or "rank 0 stopped the run"
        return reason

    def _save(self, done: int) -> None:
        t = time.perf_counter()
        up = self.update
        self.ckpt.save_state(done, self.policy.trainable_state(), up.optimizer, up.scheduler, self.policy.ema,
                             self.value.state_dict() if self.value is not None else None, up.scaler.state_dict())
        self.saves.saved(time.perf_counter() - t)

    def export(self) -> None:
        """The checkpoint's export: the weights of the saved state, and the manifest, written last."""
        ck = self.ckpt
        ck.clear_export()
        sha = self.policy.export(ck.root)
        ck.write_manifest(self.manifest(ck.saved_step(), sha, self.hooks.manifest()))

    def export_copy(self, folder: Path, done: int, extra: Mapping[str, Any]) -> None:
        """The live weights (those after ``done`` steps) as a loadable checkpoint folder of their own
        (``best.KeepBest``'s copy), its manifest written last."""
        sha = self.policy.export(folder)
        self.ckpt.write_manifest(self.manifest(done, sha, extra), folder)

    def manifest(self, done: int, sha: str, extra: Mapping[str, Any]) -> dict[str, Any]:
        """``bonbench_manifest.json`` of an export of the weights after ``done`` steps."""
        ck, cfg, m = self.ckpt, self.cfg, self.p.model
        return {
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
            "steps": done,
            "weights_sha256": sha,
            "bonbench_version": __version__,
            "git_sha": git_sha(),
            "log": [row for row in ck.read_rows(ck.log_path) if int(row["step"]) < done],
            **extra,
        }


def train(cfg: TrainConfig, on_step: StepCallback | None = None, callbacks: Sequence[Callback] = ()) -> Path:
    """Train (or resume) ``cfg``; returns the checkpoint folder. Bad input raises BonbenchError first.
    One-line notices (resuming, already complete, stopped) go to the ``bonbench.apps.trainer`` logger at
    INFO, warnings through ``warnings`` as ``TrainingWarning``; ``on_step(done, total, row)`` and
    ``callbacks`` (``hooks.Callback``) are called on rank 0. Under a launcher (WORLD_SIZE > 1) this
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
        return Trainer(prep, on_step, comm, callbacks).train()
    except BonbenchError as exc:
        if comm.active and not isinstance(exc, RankError):
            raise RankError(f"rank {comm.rank}: {exc}") from exc
        raise
    finally:
        stop(started)
