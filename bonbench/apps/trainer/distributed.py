"""Data parallelism for the trainer: the process group, the split of a step's prompt groups over
ranks, and the few collectives the loop needs (gradient sum, metric sums, row gathers).

A launcher (``torchrun --nproc-per-node N -m bonbench train ...`` or ``accelerate launch``) sets
``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``; with ``WORLD_SIZE``
> 1 this module starts torch.distributed (gloo on CPU, NCCL with CUDA, each rank on
``cuda:LOCAL_RANK``). Without a launcher every method is a no-op on one process, so the loop reads
the same either way.

Why an explicit all-reduce of the trainable gradients and not ``DistributedDataParallel``: the
loop accumulates gradients over micro-batches that never mix prompts and reads per-prompt
gradients off ``.grad`` for ``--log-grad-var``; it runs extra forward passes of the same module
(the reference with the adapters off, the EMA anchor) and a rank may hold no rows at all (a tiny
train set repeats a prompt, which stays one group). DDP would need ``no_sync`` on all but the last
micro-batch, one synchronised backward per rank per step, and would mix ranks into ``.grad``
mid-step. LoRA's trainable gradients are small (Gemma 3 270M at rank 16: 3.8M floats), so one
flat all-reduce after the backward costs little: docs/trainer.md has the measured figures.

The gradients are summed, not averaged: each rank's loss is already divided by the *global*
number of prompt groups and rows, so the sum is the single-process gradient of the same global
batch. This module does not decide what is summed (``loop`` does) and does not write files.
"""

from __future__ import annotations

import datetime
import gc
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch

from bonbench.core.errors import BonbenchError

T = TypeVar("T")


class RankError(BonbenchError):
    """Bad input one rank of a running job found (the message names the rank); input checked before
    the job starts raises a plain BonbenchError, the same on every rank."""


def env_world() -> tuple[int, int, int]:
    """(rank, world size, local rank) as a launcher sets them; (0, 1, 0) without one."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
        local = int(os.environ.get("LOCAL_RANK", str(rank)))
    except ValueError as exc:
        raise BonbenchError(f"RANK / WORLD_SIZE / LOCAL_RANK must be integers ({exc}); launch with torchrun "
                            "or accelerate launch") from None
    if world < 1 or not 0 <= rank < world:
        raise BonbenchError(f"RANK={rank} with WORLD_SIZE={world} is not a valid rank; launch with torchrun "
                            "or accelerate launch")
    return rank, world, local


def check_batch(prompts_per_step: int, world: int) -> None:
    """The global batch must split evenly: every rank samples and trains P / world prompt groups."""
    if prompts_per_step % world:
        lower = prompts_per_step - prompts_per_step % world
        raise BonbenchError(f"--prompts-per-step {prompts_per_step} does not divide over {world} processes; use a "
                            f"multiple of {world} (e.g. {lower or world} or {lower + world}) or --nproc-per-node "
                            "that divides it")


def shard(items: Sequence[T], rank: int, world: int) -> list[T]:
    """Rank ``rank``'s contiguous share of ``items`` (sizes differ by at most one; a share may be empty)."""
    bounds = np.linspace(0, len(items), world + 1).round().astype(int)
    return list(items[bounds[rank]:bounds[rank + 1]])


@dataclass(frozen=True)
class Comm:
    """This process's place in the job and the collectives the loop uses (no-ops when ``world`` is 1)."""

    rank: int = 0
    world: int = 1
    device: str | None = None  # None: the policy's default (cuda when present, else cpu)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world > 1

    def _tensor_device(self) -> torch.device:
        # NCCL reduces only CUDA tensors; gloo takes CPU ones
        return torch.device(self.device) if self.device and self.device.startswith("cuda") else torch.device("cpu")

    def sum(self, values: Sequence[float]) -> list[float]:
        """Element-wise sum over ranks (float64, so metric sums keep their digits)."""
        if not self.active:
            return [float(v) for v in values]
        t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=self._tensor_device())
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.SUM)
        return t.cpu().tolist()

    def max(self, values: Sequence[float]) -> list[float]:
        if not self.active:
            return [float(v) for v in values]
        t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=self._tensor_device())
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
        return t.cpu().tolist()

    def sum_grads(self, params: Sequence[torch.nn.Parameter]) -> None:
        """Replace every ``.grad`` by its sum over ranks in one flat all-reduce. A rank without a
        gradient for a parameter adds zeros; a parameter no rank has a gradient for keeps None, as
        in one process (AdamW then skips it)."""
        if not self.active or not params:
            return
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        has = torch.tensor([float(p.grad is not None) for p in params], dtype=grads[0].dtype, device=grads[0].device)
        flat = torch.cat([g.reshape(-1) for g in grads] + [has])
        torch.distributed.all_reduce(flat, op=torch.distributed.ReduceOp.SUM)
        offset = 0
        for p, g, any_rank in zip(params, grads, flat[-len(params):].tolist(), strict=True):
            n = g.numel()
            p.grad = flat[offset:offset + n].view_as(p).clone() if any_rank > 0 else None
            offset += n

    def broadcast(self, tensors: Sequence[torch.Tensor]) -> None:
        """Every rank gets rank 0's values of ``tensors`` in place (weights, EMA: as DDP's constructor does)."""
        if not self.active:
            return
        with torch.no_grad():
            for t in tensors:
                torch.distributed.broadcast(t.data, src=0)

    def gather_rows(self, rows: list[T]) -> list[T]:
        """Rank 0 gets every rank's rows in rank order; other ranks get []."""
        if not self.active:
            return list(rows)
        out: list[Any] | None = [None] * self.world if self.is_main else None
        torch.distributed.gather_object(rows, out, dst=0)
        return [r for part in out for r in part] if out is not None else []

    def all_gather_rows(self, rows: list[T]) -> list[T]:
        """Every rank gets every rank's rows in rank order."""
        if not self.active:
            return list(rows)
        out: list[Any] = [None] * self.world
        torch.distributed.all_gather_object(out, rows)
        return [r for part in out for r in part]

    def barrier(self) -> None:
        if self.active:
            torch.distributed.barrier()


def start(prompts_per_step: int) -> tuple[Comm, bool]:
    """This process's ``Comm``, starting the process group when a launcher asked for more than one
    process. Returns (comm, started here): the caller ends what it started (``stop``)."""
    rank, world, local = env_world()
    if world == 1:
        return Comm(), False
    check_batch(prompts_per_step, world)
    import torch.distributed as dist

    if not dist.is_available():
        raise BonbenchError("this torch build has no torch.distributed; install a build with it or run one process")
    cuda = torch.cuda.is_available()
    device = f"cuda:{local}" if cuda else "cpu"
    if cuda:
        if local >= torch.cuda.device_count():
            raise BonbenchError(f"LOCAL_RANK {local} but only {torch.cuda.device_count()} GPUs; use --nproc-per-node "
                                f"<= {torch.cuda.device_count()}")
        torch.cuda.set_device(local)  # NCCL and the object collectives use the current device
    started = False
    if not dist.is_initialized():
        for var in ("MASTER_ADDR", "MASTER_PORT"):
            if var not in os.environ:
                raise BonbenchError(f"WORLD_SIZE={world} but {var} is not set; launch with torchrun or accelerate launch")
        # a rank that waits for a slow peer (a long rollout, the export on rank 0) must not time out early
        dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world,
                                timeout=datetime.timedelta(hours=2))
        started = True
    return Comm(rank=rank, world=world, device=device), started


def stop(started: bool) -> None:
    if started and torch.distributed.is_initialized():
        # free the trainer's cyclic garbage (the DDP reducer and the collectives it still holds)
        # while the group is alive: destroyed at interpreter exit instead, gloo's worker threads can
        # find the interpreter gone and abort the rank ("terminate called without an active
        # exception"), as a fresh-clone CI run saw once
        gc.collect()
        torch.distributed.destroy_process_group()
