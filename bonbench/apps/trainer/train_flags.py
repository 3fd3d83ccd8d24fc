"""``bonbench train``'s flags and ``bonbench list objectives``: the settings in, a ``TrainConfig`` out.

Every ``TrainConfig`` field is a flag (``bonbench.core.settings`` reads its type, default, help and
range); the papers' names for objective options (``--k``, ``--N``, ...) are ``ObjectiveFlags``,
merged with ``-O KEY=VALUE`` into ``TrainConfig.objective_options`` and typed by the registry's
coercion. The handler that loads torch
and trains is ``bonbench.apps.trainer.command``: this module imports nothing heavy, so that
``bonbench --help`` and every other command stay fast. It trains nothing and prints nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from bonbench.api.objective import REGISTRY, make_objective
from bonbench.apps.trainer.config import TrainConfig
from bonbench.core import flags, settings
from bonbench.core.errors import BonbenchError
from bonbench.core.registry import coerce_kwargs
from bonbench.core.settings import setting

# the handler, imported when `train` is the command (it imports torch): bonbench.apps.cli resolves it
HANDLER = "bonbench.apps.trainer.command:cmd_train"


@dataclass(frozen=True)
class ObjectiveFlags:
    """Objective options under the papers' names; each one given goes into ``objective_options``
    (an objective that has no such option refuses it)."""

    k: int | None = setting(None, range=flags.AT_LEAST_1, help="k of k-sample objectives (passk, majk, ...)")
    N: int | None = setting(None, range=flags.AT_LEAST_1, help="N of best-of-N objectives (bon_*, vbon, ...)")
    baseline: str | None = setting(None, help="baseline of the RL objectives: loo, none, or value (the learned value head; "
                                              "Chow et al.'s choice for bon_rl_s, bon_rl_v, rl_s, rl_v)")
    p_source: Literal["group", "value"] | None = setting(
        None, help="bon_rlb / bon_rlb_p: p from the group's failing fraction (default) or the value head (the paper's)")
    p_clip: float | None = setting(None, range=flags.SHARE, metavar="P_CLIP",
                                   help="bon_rlb / bon_rlb_p: clip p to [0, P] (default 0.95)")


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``train`` to the ``bonbench`` subcommand parser."""
    t = subparsers.add_parser("train", help="fine-tune a checkpoint with an inference-aware objective (LoRA by default)")
    settings.add_flags(t, TrainConfig)
    settings.add_flags(t, ObjectiveFlags)
    t.set_defaults(handler=HANDLER)
    return t


def objective_options(args: argparse.Namespace) -> dict[str, Any]:
    """``-O`` pairs plus the ``ObjectiveFlags`` given, checked against the objective and coerced to
    its factory's annotated types by the registry (``core.registry.coerce_kwargs``, as
    ``make_objective`` does), so the recorded config holds typed values (``k: 4``, not ``"4"``). An
    unknown objective or option, or a value of the wrong type, is one line naming the fix."""
    make_objective(args.objective)  # unknown objective: one line, before looking at its options
    info = REGISTRY[args.objective]
    opts: dict[str, Any] = dict(settings.values(TrainConfig, args).get("objective_options") or {})
    named = settings.from_args(ObjectiveFlags, args)
    for f in dataclasses.fields(named):
        value = getattr(named, f.name)
        if value is None:
            continue
        if f.name not in info.options:
            raise BonbenchError(f"objective {args.objective!r} has no {settings.flag_spelling(f)}; its options are: "
                                f"{', '.join(sorted(info.options)) or 'none'}")
        opts[f.name] = value
    return coerce_kwargs(info.factory, opts, owner=f"objective {args.objective!r}", noun="option")


def train_config(args: argparse.Namespace) -> TrainConfig:
    """The ``TrainConfig`` of parsed ``bonbench train`` flags."""
    return settings.from_args(TrainConfig, args, objective_options=objective_options(args))


def list_objectives() -> list[str]:
    """One line per objective: name, paper, what it needs, options with defaults."""
    lines = []
    for name in sorted(REGISTRY):
        info = REGISTRY[name]
        opts = ", ".join(f"{k}={v!r}" for k, v in info.options.items())
        needs = f" needs: {', '.join(sorted(info.needs))};" if info.needs else ""
        lines.append(f"{name:<12} {info.summary} [{info.paper}]{needs} options: {opts or 'none'}")
    return lines
