"""The optimiser's side of a training step: the loss of ``loop``'s module docstring over a rollout
batch, accumulated over micro-batches, the gradients summed over ranks, clipping, AdamW and the
schedule, and the statistics the log records.

    L = (1/P) sum_j sum_i -sur_ij  +  beta (1/R) sum_rows sum_t KL_t(pi || anchor)  -  c_H (1/R) sum_rows sum_t H_t

with sur_ij = sum_t min(rho_t w_ij, clip(rho_t, 1 +- eps) w_ij); on the first pass rho = 1 and the
gradient is exactly -(1/P) sum w_ij grad log pi(y_ij | x_j). With ``--dtype float16`` the loss is
scaled before the backward pass and the gradients unscaled after the all-reduce (torch's dynamic
``GradScaler``): fp16's range is narrow, and without scaling the small gradients of a real model
underflow to exactly 0 (seen on an H100, Gemma 3 270M shape: gradient norm 0.0088 in bf16, 0.0 in
fp16). A step whose scaled gradients overflow is skipped and the scale halved, as in torch's AMP
recipe. bf16 and float32 leave the scaler off (every call a no-op). ``Update`` owns the policy's
AdamW, its learning-rate schedule (linear warm-up) and the loss scaler; it is handed the config, the
policy and the ``Comm``. It samples nothing and writes no files (``checkpoint`` saves its state).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.distributed import Comm
from bonbench.apps.trainer.policy import Policy


class Update:
    """Optimiser steps on one rollout batch (see the module docstring)."""

    def __init__(self, cfg: TrainConfig, policy: Policy, comm: Comm) -> None:
        self.cfg, self.policy, self.comm = cfg, policy, comm
        self.optimizer = torch.optim.AdamW(policy.trainable(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        warm = cfg.warmup
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer,
                                                           lambda s: min(1.0, (s + 1) / warm) if warm else 1.0)
        # fp16's loss scaling (the module docstring); off, and every call a no-op, in bf16 and float32
        self.scaler = torch.amp.GradScaler(policy.device.type, enabled=cfg.dtype == "float16")

    @property
    def lr(self) -> float:
        """The learning rate the next optimiser step uses."""
        return float(self.scheduler.get_last_lr()[0])

    def load(self, state: dict[str, Any]) -> None:
        """Restore ``checkpoint.load_state``'s optimiser, scheduler and (float16) scaler state."""
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if state.get("scaler"):  # float16 runs; a state saved before the scaler existed starts it afresh
            self.scaler.load_state_dict(state["scaler"])

    def optimise(self, pairs: Sequence[tuple[list[int], list[int]]], weights: np.ndarray,
                 groups: Sequence[Sequence[int]], kl_coef: float, totals: tuple[int, int] | None = None) -> dict[str, Any]:
        """``ppo_epochs`` optimiser steps on one rollout batch; returns the logged statistics. ``kl_coef``:
        the step's scheduled KL coefficient; ``totals``: (prompt groups, rows) of the global batch
        (default: these, one process)."""
        totals = totals or (len(groups), len(pairs))
        old: dict[int, torch.Tensor] = {}
        stats: dict[str, Any] = {}
        comm_s = 0.0
        for epoch in range(self.cfg.ppo_epochs):
            self.optimizer.zero_grad(set_to_none=True)
            got = self._backward(pairs, weights, groups, old, epoch, kl_coef, totals)
            t = time.perf_counter()
            self.comm.sum_grads(self.policy.trainable())
            comm_s += time.perf_counter() - t
            scale = self.scaler.get_scale() if self.scaler.is_enabled() else None
            self.scaler.unscale_(self.optimizer)  # every rank unscales the same summed gradient
            got = self._reduce_stats(got, totals, kl_coef)
            grad_norm = float(torch.nn.utils.clip_grad_norm_(self.policy.trainable(), self.cfg.max_grad_norm))
            # the norm is of the gradient summed over ranks, so every rank takes the same decision
            skip = self.cfg.skip_zero_grad and grad_norm == 0.0
            if not skip:
                self.scaler.step(self.optimizer)  # the optimizer's step, unless the fp16 gradient overflowed
            self.scaler.update()
            # the schedule follows the step index either way (a skipped step still uses up its warm-up slot);
            # torch warns when the scheduler steps before any optimiser step, which is what a skip means
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step")
                self.scheduler.step()
            if epoch == 0:
                stats = {**got, "grad_norm": grad_norm}
                if self.cfg.skip_zero_grad:
                    stats["skipped"] = int(skip)
                if scale is not None:
                    stats["loss_scale"] = scale
            stats["clip_frac"] = got["clip_frac"]  # of the last pass: how far the policy moved off the rollout's
        self.optimizer.zero_grad(set_to_none=True)
        if self.comm.active:
            stats["allreduce_s"] = comm_s
        return stats

    def first_pass_grads(self, pairs: Sequence[tuple[list[int], list[int]]], weights: np.ndarray,
                         groups: Sequence[Sequence[int]], step: int = 0,
                         totals: tuple[int, int] | None = None) -> dict[str, Any]:
        """The first pass's gradients of step ``step``, summed over ranks and left in ``.grad`` without
        a step (tests, diagnostics)."""
        totals = totals or (len(groups), len(pairs))
        kl_coef = self.cfg.kl_at(step)
        self.optimizer.zero_grad(set_to_none=True)
        stats = self._backward(pairs, weights, groups, {}, 0, kl_coef, totals)
        self.comm.sum_grads(self.policy.trainable())
        if self.scaler.is_enabled():  # unscaled by hand: no step follows, so the scaler's state must not move
            for p in self.policy.trainable():
                if p.grad is not None:
                    p.grad.div_(self.scaler.get_scale())
        stats = self._reduce_stats(stats, totals, kl_coef)
        grads = [p.grad for p in self.policy.trainable() if p.grad is not None]
        stats["grad_norm"] = float(torch.norm(torch.stack([g.norm() for g in grads]))) if grads else 0.0
        return stats

    def _reduce_stats(self, local: dict[str, Any], totals: tuple[int, int], kl_coef: float) -> dict[str, Any]:
        """Per-pass statistics of the global batch from each rank's sums (``_backward``), after the
        gradients were summed over ranks (the variance needs the total gradient)."""
        n_prompts, n_rows = totals
        loss, ent, clipped, tok, kl, g_sq = self.comm.sum([local.pop(k) for k in
                                                           ("_loss", "_ent", "_clipped", "_tok", "_kl", "_g_sq")])
        stats: dict[str, Any] = {**local, "loss": loss, "entropy": ent / max(tok, 1.0), "clip_frac": clipped / max(tok, 1.0)}
        if kl_coef > 0:
            stats["kl_anchor"] = kl / n_rows  # per sequence, summed over its tokens
        if self.cfg.log_grad_var and n_prompts > 1 and local.get("_grad_var_pass"):
            # trace of the covariance of per-prompt gradients (each scaled back by P), unbiased; the
            # per-prompt gradients sum to the total one, whose squared norm is read off .grad
            norm_sum = float(sum((p.grad.double() ** 2).sum() for p in self.policy.trainable() if p.grad is not None))
            stats["grad_var"] = n_prompts ** 2 * (g_sq - norm_sum / n_prompts) / (n_prompts - 1)
        stats.pop("_grad_var_pass", None)
        return stats

    def _backward(self, pairs: Sequence[tuple[list[int], list[int]]], weights: np.ndarray, groups: Sequence[Sequence[int]],
                  old: dict[int, torch.Tensor], epoch: int, kl_coef: float, totals: tuple[int, int]) -> dict[str, Any]:
        """Accumulate this rank's share of the loss's gradient over micro-batches (the module
        docstring has the loss; beta is ``kl_coef``, the step's scheduled value; ``totals`` are its P
        and R over all ranks). ``old`` holds the first pass's token log-probabilities (filled when
        ``epoch`` is 0). Returns sums for ``_reduce_stats``."""
        cfg, pol = self.cfg, self.policy
        n_prompts, n_rows = totals
        params = pol.trainable()
        scale = self.scaler.get_scale() if self.scaler.is_enabled() else 1.0  # of the gradients in .grad
        # micro-batches never mix prompts, so per-prompt gradients can be read off for their variance
        chunks = [list(g[s:s + cfg.micro_batch]) for g in groups for s in range(0, len(g), cfg.micro_batch)]
        chunk_prompt = [j for j, g in enumerate(groups) for _ in range(0, len(g), cfg.micro_batch)]
        tok_lp: list[np.ndarray] = [np.zeros(0, dtype=np.float32)] * len(pairs)  # per row, the first pass's
        kl_sum = ent_sum = clipped = tok_count = loss_sum = 0.0
        g_sq = 0.0
        prev: list[torch.Tensor] | None = None
        for c, rows in enumerate(chunks):
            b = pol.batch([pairs[i] for i in rows])
            anchor_lp = None
            if kl_coef > 0:  # before the policy's forward: an EMA anchor swaps the trainable weights
                with torch.no_grad(), pol.anchor() as module:
                    anchor_lp = pol.log_softmax(module, b)
            logp = pol.log_softmax(pol.lm, b)
            tok = logp.gather(-1, b.targets[..., None]).squeeze(-1)
            if epoch == 0:
                old[c] = tok.detach()
                got = old[c].float().cpu().numpy()
                for i, r in enumerate(rows):
                    tok_lp[r] = got[i, :len(pairs[r][1])].copy()
            ratio = torch.exp(tok - old[c])
            adv = torch.tensor(weights[rows], dtype=torch.float32, device=tok.device)[:, None]
            surr = torch.minimum(ratio * adv, ratio.clamp(1 - cfg.clip_eps, 1 + cfg.clip_eps) * adv)
            per_seq = (surr * b.tmask).sum(1)
            if cfg.length_norm == "mean":
                per_seq = per_seq / b.tmask.sum(1).clamp(min=1.0)
            loss = -per_seq.sum() / n_prompts
            # entropy enters the graph only when it is in the loss: a [B, W, V] product is the
            # largest tensor of the step (Gemma's vocabulary is 262k)
            with torch.set_grad_enabled(cfg.entropy_coef > 0 or anchor_lp is not None):
                probs = logp.exp()
            with torch.set_grad_enabled(cfg.entropy_coef > 0):
                ent = -(probs * logp).sum(-1)
            ent_sum += float((ent.detach() * b.tmask).sum())
            if cfg.entropy_coef > 0:
                loss = loss - cfg.entropy_coef * (ent * b.tmask).sum() / n_rows
            if anchor_lp is not None:
                kl = (probs * (logp - anchor_lp)).sum(-1)
                kl_sum += float((kl.detach() * b.tmask).sum())
                loss = loss + kl_coef * (kl * b.tmask).sum() / n_rows
            clipped += float((((ratio.detach() - 1).abs() > cfg.clip_eps).float() * b.tmask).sum())
            tok_count += float(b.tmask.sum())
            loss_sum += float(loss.detach())
            self.scaler.scale(loss).backward()
            del logp, probs, ent, anchor_lp
            last_of_prompt = c + 1 == len(chunks) or chunk_prompt[c + 1] != chunk_prompt[c]
            if cfg.log_grad_var and epoch == 0 and last_of_prompt:
                now = [p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p) for p in params]
                g_j = now if prev is None else [x - y for x, y in zip(now, prev, strict=True)]
                g_sq += float(sum((x.double() ** 2).sum() for x in g_j)) / scale ** 2
                prev = now
        return {"_loss": loss_sum, "_ent": ent_sum, "_clipped": clipped, "_tok": tok_count, "_kl": kl_sum, "_g_sq": g_sq,
                "_grad_var_pass": cfg.log_grad_var and epoch == 0, "_token_logprobs": tok_lp}
