"""``bonbench train`` and ``bonbench list objectives``: flags in, one ``loop.train`` call, exit code out.

Heavy imports (torch, transformers, peft) happen inside the handler, so ``bonbench --help`` stays
fast. Objective options come from ``--k`` / ``--N`` (the papers' names) and ``-O KEY=VALUE``.
Under torchrun / accelerate launch every rank runs the handler; rank 0 alone shows progress, prints
the checkpoint folder and reports bad input found before the job starts (every rank finds the same).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from typing import Any, Callable, Iterator

from bonbench.core.errors import BonbenchError


def register(subparsers: Any) -> None:
    t = subparsers.add_parser("train", help="fine-tune a checkpoint with an inference-aware objective (LoRA by default)")
    t.add_argument("--task", required=True, help="task whose train split gives prompts and rewards (math, imdb, ...)")
    t.add_argument("--objective", required=True, help="see `bonbench list objectives`")
    t.add_argument("--name", required=True, help="checkpoint folder name: results/checkpoints/NAME (the same name resumes)")
    t.add_argument("--model", default=os.environ.get("BONBENCH_MODEL"), help="base model (default: gemma-3-270m)")
    t.add_argument("-T", dest="task_args", action="append", metavar="KEY=VALUE", help="task argument, repeatable")
    t.add_argument("-O", dest="objective_args", action="append", metavar="KEY=VALUE", help="objective option, repeatable")
    t.add_argument("--k", type=int, help="k of k-sample objectives (passk, majk, ...)")
    t.add_argument("--N", dest="N", type=int, help="N of best-of-N objectives (bon_*, vbon, ...)")
    t.add_argument("--baseline", help="baseline of the RL objectives: loo, none, or value (the learned value head; "
                                      "Chow et al.'s choice for bon_rl_s, bon_rl_v, rl_s, rl_v)")
    t.add_argument("--p-source", dest="p_source", choices=["group", "value"],
                   help="bon_rlb / bon_rlb_p: p from the group's failing fraction (default) or the value head (the paper's)")
    t.add_argument("--p-clip", dest="p_clip", type=float, help="bon_rlb / bon_rlb_p: clip p to [0, P] (default 0.95)")
    t.add_argument("--steps", type=int, default=200)
    t.add_argument("--prompts-per-step", type=int, default=4)
    t.add_argument("--group", type=int, default=8, help="samples per prompt (G)")
    t.add_argument("--max-new-tokens", type=int, help="completion length (default: the task's)")
    t.add_argument("--temperature", type=float, default=1.0)
    t.add_argument("--lr", type=float, default=1e-4)
    t.add_argument("--warmup", type=int, default=10)
    t.add_argument("--weight-decay", type=float, default=0.0)
    t.add_argument("--max-grad-norm", type=float, default=1.0)
    t.add_argument("--lora-rank", type=int, default=16)
    t.add_argument("--lora-alpha", type=int, default=32)
    t.add_argument("--lora-targets", default="all-linear", help="peft target modules: all-linear or a comma list")
    t.add_argument("--full-finetune", action="store_true", help="train every weight instead of LoRA adapters")
    t.add_argument("--kl-coef", type=float, default=0.0, help="beta of the per-token KL to the anchor")
    t.add_argument("--kl-anchor", choices=["ref", "ema"], default="ref", help="the base model, or an EMA of the policy")
    t.add_argument("--ema-rate", type=float, default=0.01)
    t.add_argument("--kl-schedule", choices=["constant", "linear"], default="constant",
                   help="linear: --kl-coef for --kl-anneal-delay steps, then linear to --kl-coef-end (Chow et al.)")
    t.add_argument("--kl-coef-end", type=float, help="the KL coefficient after annealing (needed with --kl-schedule linear)")
    t.add_argument("--kl-anneal-steps", type=int, default=2500, help="annealing length in steps (paper: 2500)")
    t.add_argument("--kl-anneal-delay", type=int, default=10, help="steps at --kl-coef before annealing (paper: 10)")
    t.add_argument("--value-lr", type=float, default=1e-3, help="AdamW rate of the learned value head (paper's network: 1e-5)")
    t.add_argument("--adv-norm", choices=["none", "batch", "std"], default="none",
                   help="normalise the step's advantages: batch whitens them (Chow et al.), std only rescales")
    t.add_argument("--rationalize", action="store_true",
                   help="STaR: re-sample failed prompts with the gold answer as a hint, train on the correct ones")
    t.add_argument("--skip-zero-grad", action="store_true",
                   help="no optimiser step when the gradient is exactly zero (every group flat, no KL or entropy "
                        "term): AdamW's momentum and weight decay would still move the weights")
    t.add_argument("--ppo-epochs", type=int, default=1, help="> 1: PPO clipped surrogate over each rollout batch")
    t.add_argument("--clip-eps", type=float, default=0.2)
    t.add_argument("--entropy-coef", type=float, default=0.0)
    t.add_argument("--length-norm", choices=["sum", "mean"], default="sum")
    t.add_argument("--verifier", help="verifier scores for verifier-selected objectives (logprob, rm:<spec>)")
    t.add_argument("--ref-samples", type=int, default=0, help="M reference samples per prompt (vBoN's log F-hat)")
    t.add_argument("--micro-batch", type=int, default=2, help="sequences per forward/backward (memory grows with it)")
    t.add_argument("--dtype", default="bfloat16", help="autocast dtype (float32 turns autocast off)")
    t.add_argument("--no-log-kl", dest="log_kl", action="store_false", help="skip the per-step KL to the base model")
    t.add_argument("--log-grad-var", action="store_true", help="log the variance of per-prompt gradients")
    t.add_argument("--rollout-backend", choices=["hf", "vllm", "openai"], default="hf",
                   help="hf: sample in-process from the live weights; vllm: in-process vLLM with the live LoRA adapter "
                        "(GPU); openai: from servers the LoRA adapter is synced to")
    t.add_argument("--endpoint", action="append", default=[], metavar="URL",
                   help="rollout server (repeatable): VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve BASE --enable-lora")
    t.add_argument("--sync-every", type=int, default=1, help="optimiser steps between adapter syncs to the servers")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--save-every", type=int, default=None, metavar="N",
                   help="steps between saves of the resumable state (the same command resumes from the last one); "
                        "default: after every step, or less often when a save takes over a tenth of the time "
                        "since the last one")
    t.add_argument("--data-dir", default=None)
    t.add_argument("--out", default=os.environ.get("BONBENCH_OUT", "results"))
    t.add_argument("--debug", action="store_true")
    t.set_defaults(handler=cmd_train)


def _pairs(values: list[str] | None, flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values or []:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise BonbenchError(f"{flag} expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def _option_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def objective_options(args: argparse.Namespace) -> dict[str, Any]:
    """``-O`` pairs (JSON values where they parse) plus ``--k`` / ``--N`` / ``--baseline`` / ``--p-source`` /
    ``--p-clip``, checked against the objective."""
    from bonbench.api.objective import REGISTRY, make_objective

    opts = {k: _option_value(v) for k, v in _pairs(args.objective_args, "-O").items()}
    make_objective(args.objective)  # unknown objective: one line, before looking at its options
    known = REGISTRY[args.objective].options
    for flag, key in (("--k", "k"), ("--N", "N"), ("--baseline", "baseline"), ("--p-source", "p_source"),
                      ("--p-clip", "p_clip")):
        value = getattr(args, key)
        if value is None:
            continue
        if key not in known:
            raise BonbenchError(f"objective {args.objective!r} has no {flag}; its options are: {', '.join(sorted(known)) or 'none'}")
        opts[key] = value
    return opts


def cmd_train(args: argparse.Namespace) -> int:
    from bonbench.apps.trainer.config import TrainConfig
    from bonbench.apps.trainer.loop import train

    cfg = TrainConfig(
        task=args.task, objective=args.objective, name=args.name, model=args.model, task_args=_pairs(args.task_args, "-T"),
        objective_options=objective_options(args), steps=args.steps, prompts_per_step=args.prompts_per_step,
        group=args.group, max_new_tokens=args.max_new_tokens, temperature=args.temperature, lr=args.lr,
        warmup=args.warmup, weight_decay=args.weight_decay, max_grad_norm=args.max_grad_norm, lora_rank=args.lora_rank,
        lora_alpha=args.lora_alpha, lora_targets=args.lora_targets, full_finetune=args.full_finetune,
        kl_coef=args.kl_coef, kl_anchor=args.kl_anchor, kl_schedule=args.kl_schedule, kl_coef_end=args.kl_coef_end,
        kl_anneal_steps=args.kl_anneal_steps, kl_anneal_delay=args.kl_anneal_delay, ema_rate=args.ema_rate,
        value_lr=args.value_lr, adv_norm=args.adv_norm, rationalize=args.rationalize,
        skip_zero_grad=args.skip_zero_grad, ppo_epochs=args.ppo_epochs,
        clip_eps=args.clip_eps, entropy_coef=args.entropy_coef, length_norm=args.length_norm, verifier=args.verifier,
        ref_samples=args.ref_samples, micro_batch=args.micro_batch, dtype=args.dtype, log_kl=args.log_kl,
        log_grad_var=args.log_grad_var, rollout_backend=args.rollout_backend, endpoints=tuple(args.endpoint),
        sync_every=args.sync_every, seed=args.seed, save_every=args.save_every, data_dir=args.data_dir,
        out=args.out)
    from bonbench.apps.trainer.distributed import RankError, env_world

    if env_world()[0] != 0:  # one progress bar, one printed folder, one error line per job: rank 0's
        try:
            train(cfg)
        except RankError:
            raise  # found by this rank while the job ran: only it can report it
        except BonbenchError:
            return 1  # found before the job started, by every rank alike: rank 0 prints it
        return 0
    folder = _train_with_progress(cfg, train)
    print(folder)
    return 0


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class _Lines(logging.Handler):
    """The trainer's notices (``setup.NOTICES``: resuming, already complete), one line each."""

    def __init__(self, write: Callable[[str], None]) -> None:
        super().__init__(logging.INFO)
        self.write = write

    def emit(self, record: logging.LogRecord) -> None:
        self.write(record.getMessage())


@contextlib.contextmanager
def _notices(write: Callable[[str], None]) -> Iterator[None]:
    from bonbench.apps.trainer.setup import NOTICES

    handler, saved = _Lines(write), (NOTICES.level, NOTICES.propagate)
    NOTICES.addHandler(handler)
    NOTICES.setLevel(logging.INFO)
    NOTICES.propagate = False  # exactly one line, whatever handlers the root logger has
    try:
        yield
    finally:
        NOTICES.removeHandler(handler)
        NOTICES.level, NOTICES.propagate = saved


def _train_with_progress(cfg: Any, train: Any) -> Any:
    """Progress on stderr (stdout keeps the checkpoint folder, the last line): a live bar on a
    terminal, else one plain line per step (at most one per 10 s, and the last), so logs and CI
    show the run as it goes; the trainer's notices as lines above it."""
    if not sys.stderr.isatty():
        from transformers.utils import logging as hf_logging

        from bonbench.apps.trainer.watch import ProgressLines

        hf_logging.disable_progress_bar()  # its loading / writing bars are noise in a log file
        with _notices(_say):
            title = (f"training {cfg.name!r} from step {{done}} of {{total}}, {cfg.prompts_per_step} prompts x "
                     f"{cfg.group} samples per step")
            return train(cfg, ProgressLines(_say, title=title))
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    with Progress(TextColumn("training {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), TextColumn("{task.fields[info]}"), transient=False,
                  console=Console(stderr=True)) as bar:
        task_id = bar.add_task(cfg.name, total=cfg.steps, info="")

        def on_step(done: int, total: int, row: Any) -> None:
            info = "" if not row else f"reward {row['reward']:.3f}" + (f" kl {row['kl_ref']:.3f}" if "kl_ref" in row else "")
            bar.update(task_id, completed=done, info=info)

        with _notices(lambda line: bar.console.print(line, highlight=False, markup=False)):
            return train(cfg, on_step)


def list_objectives() -> list[str]:
    """One line per objective: name, paper, what it needs, options with defaults."""
    from bonbench.plugins import objectives  # noqa: F401  (registers)
    from bonbench.api.objective import REGISTRY

    lines = []
    for name in sorted(REGISTRY):
        info = REGISTRY[name]
        opts = ", ".join(f"{k}={v!r}" for k, v in info.options.items())
        needs = f" needs: {', '.join(sorted(info.needs))};" if info.needs else ""
        lines.append(f"{name:<12} {info.summary} [{info.paper}]{needs} options: {opts or 'none'}")
    return lines
