"""``--report-to tensorboard|wandb|none``: each step's log row, and each held-out evaluation's metrics
with their confidence intervals, written as well to TensorBoard (``CHECKPOINT/tensorboard/``) or to
Weights & Biases (``CHECKPOINT/wandb/``, offline unless ``WANDB_MODE`` says otherwise), under the
names TRL's trainers log.

``log.jsonl`` and ``evals.jsonl`` stay the source of truth: the loggers get the same rows after they
are written, and a resumed run logs its redone steps again (TensorBoard shows the later point, W&B
resumes the run of the same id). The names (``NAMES``): ``train/reward``, ``train/reward_std``,
``train/kl`` (``kl_ref``), ``train/entropy``, ``train/loss``, ``train/learning_rate``,
``train/grad_norm``, ``train/num_tokens`` (completion tokens so far, as TRL counts them),
``train/completions/mean_length``, ``train/completions/clipped_ratio`` (completions cut by the token
limit), ``train/clip_ratio/region_mean`` (PPO's clipped share of tokens), ``train/step_time``; every
other number of the row as ``train/<column>``. Each evaluation of step K: ``eval/<metric>`` with
``eval/<metric>/ci_lo`` and ``/ci_hi`` (the run's 95% interval) and ``eval/<metric>/vs_step0`` with
its paired interval ``/vs_step0_lo``, ``/vs_step0_hi``, all at step K.

The packages are optional extras (``bonbench[tensorboard]``, ``bonbench[wandb]``), imported only
when asked for; a missing one is one error before training starts (``check_reporter``). This module
trains and evaluates nothing.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.hooks import Callback
from bonbench.core.errors import BonbenchError

# log.jsonl column -> the name TRL's trainers log it under (both loggers prefix train/)
NAMES = {"reward": "reward", "reward_std": "reward_std", "kl_ref": "kl", "entropy": "entropy", "loss": "loss",
         "lr": "learning_rate", "grad_norm": "grad_norm", "completion_length": "completions/mean_length",
         "clipped_ratio": "completions/clipped_ratio", "clip_frac": "clip_ratio/region_mean", "seconds": "step_time"}
PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb"}  # --report-to -> the module it needs


def check_reporter(report_to: str) -> None:
    """A ``--report-to`` whose package is missing: one error naming the extra to install."""
    module = PACKAGES.get(report_to)
    if module is None:
        return
    try:
        importlib.import_module(module)
    except ImportError:
        raise BonbenchError(f"--report-to {report_to} needs the {module} package: pip install 'bonbench[{report_to}]', "
                            "or --report-to none") from None


def scalars(row: Mapping[str, Any], tokens_before: int) -> dict[str, float]:
    """A log row as TRL's names (``NAMES``; ``train/num_tokens`` counts every step's tokens so far)."""
    out = {f"train/{NAMES.get(key, key)}": float(value) for key, value in row.items()
           if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool)}
    out["train/num_tokens"] = float(tokens_before + int(row.get("tokens", 0)))
    return out


def eval_scalars(row: Mapping[str, Any]) -> dict[str, float]:
    """An ``evals.jsonl`` row as ``eval/<metric>`` with its interval and its paired difference to step 0."""
    out: dict[str, float] = {}
    for name, m in row.get("metrics", {}).items():
        out[f"eval/{name}"] = float(m["value"])
        # a closed-form metric (IMDB's kl_bon@k) has no interval: its ci95 is [null, null]
        if m.get("ci95") and None not in m["ci95"]:
            out[f"eval/{name}/ci_lo"], out[f"eval/{name}/ci_hi"] = (float(x) for x in m["ci95"])
    for name, p in row.get("vs_step0", {}).items():
        out[f"eval/{name}/vs_step0"] = float(p["diff"])
        out[f"eval/{name}/vs_step0_lo"], out[f"eval/{name}/vs_step0_hi"] = float(p["lo"]), float(p["hi"])
    return out


class Reporter(Callback):
    """Hands every log row and evaluation to ``write(scalars, step)``; ``close`` at the end. Add it
    after the evaluation hook (``latest``: the evaluation made after the last event, if any)."""

    def __init__(self, write: Callable[[Mapping[str, float], int], None], close: Callable[[], None],
                 latest: Callable[[], Mapping[str, Any] | None], history: Sequence[Mapping[str, Any]]) -> None:
        self.write, self.close, self.latest = write, close, latest
        self.tokens = sum(int(r.get("tokens", 0)) for r in history)

    def on_train_begin(self, start: int, total: int) -> None:
        self.evaluated()

    def on_step_end(self, done: int, row: Mapping[str, Any]) -> None:
        self.write(scalars(row, self.tokens), done)
        self.tokens += int(row.get("tokens", 0))
        self.evaluated()

    def evaluated(self) -> None:
        row = self.latest()
        if row is not None:
            self.write(eval_scalars(row), int(row["step"]))

    def on_train_end(self, done: int) -> None:
        self.close()


def reporter(cfg: TrainConfig, root: Path, training_hash: str, latest: Callable[[], Mapping[str, Any] | None],
             history: Sequence[Mapping[str, Any]]) -> Reporter | None:
    """The ``--report-to`` hook of a run (None for ``none``)."""
    if cfg.report_to == "tensorboard":
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(log_dir=str(root / "tensorboard"))

        def write_tb(values: Mapping[str, float], step: int) -> None:
            for tag, value in values.items():
                writer.add_scalar(tag, value, global_step=step)
            writer.flush()  # a kill loses nothing that log.jsonl has

        return Reporter(write_tb, writer.close, latest, history)
    if cfg.report_to == "wandb":
        import wandb

        (root / "wandb").mkdir(parents=True, exist_ok=True)
        # offline unless the user's WANDB_MODE says otherwise (wandb checks the value)
        mode: dict[str, Any] = {"mode": os.environ.get("WANDB_MODE", "offline")}
        run = wandb.init(project="bonbench", name=cfg.name, id=f"{cfg.name}-{training_hash}", resume="allow",
                         dir=str(root), config=cfg.to_json(), **mode)

        def write_wandb(values: Mapping[str, float], step: int) -> None:
            run.log(dict(values), step=step)

        return Reporter(write_wandb, run.finish, latest, history)
    return None
