"""``bonbench train``'s handler: a ``TrainConfig`` from the flags, one ``loop.train`` call, the
checkpoint folder printed (stdout's last line), progress and the trainer's notices on stderr.

Importing this module imports torch (through the trainer), so ``bonbench.apps.cli`` loads it only
when ``train`` is the command. Under torchrun / accelerate launch every rank runs the handler;
rank 0 alone shows progress, prints the checkpoint folder and reports bad input found before the job
starts (every rank finds the same). The flags themselves are ``bonbench.apps.trainer.train_flags``'s.

It checks no setting and trains nothing itself (``TrainConfig``, ``setup.prepare_training`` and
``loop.train`` do), and it prints no error: rank 0's ``BonbenchError`` goes up to
``bonbench.apps.cli``, which prints the one ``error:`` line and exits 1.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from bonbench.apps.trainer import loop
from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.distributed import RankError, env_world
from bonbench.apps.trainer.setup import NOTICES
from bonbench.apps.trainer.train_flags import train_config
from bonbench.apps.trainer.watch import StepLines
from bonbench.core.errors import BonbenchError


def cmd_train(args: argparse.Namespace) -> int:
    cfg = train_config(args)
    if env_world()[0] != 0:  # one progress bar, one printed folder, one error line per job: rank 0's
        try:
            loop.train(cfg)
        except RankError:
            raise  # found by this rank while the job ran: only it can report it
        except BonbenchError:
            return 1  # found before the job started, by every rank alike: rank 0 prints it
        return 0
    print(_train_with_progress(cfg))
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
    handler, saved = _Lines(write), (NOTICES.level, NOTICES.propagate)
    NOTICES.addHandler(handler)
    NOTICES.setLevel(logging.INFO)
    NOTICES.propagate = False  # exactly one line, whatever handlers the root logger has
    try:
        yield
    finally:
        NOTICES.removeHandler(handler)
        NOTICES.level, NOTICES.propagate = saved


def _train_with_progress(cfg: TrainConfig) -> Path:
    """Progress on stderr (stdout keeps the checkpoint folder, the last line): a live bar on a
    terminal, else plain lines (``watch.StepLines``: at most one per 10 s, and the last step's), so
    logs and CI show the run as it goes; the trainer's notices as lines above it."""
    if not sys.stderr.isatty():
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # its loading / writing bars are noise in a log file
        with _notices(_say):
            title = (f"training {cfg.name!r} from step {{done}} of {{total}}, {cfg.prompts_per_step} prompts x "
                     f"{cfg.group} samples per step")
            return loop.train(cfg, StepLines(_say, title=title))
    with Progress(TextColumn("training {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), TextColumn("{task.fields[info]}"), transient=False,
                  console=Console(stderr=True)) as bar:
        task_id = bar.add_task(cfg.name, total=cfg.steps, info="")

        def on_step(done: int, total: int, row: Any) -> None:
            info = "" if not row else f"reward {row['reward']:.3f}" + (f" kl {row['kl_ref']:.3f}" if "kl_ref" in row else "")
            bar.update(task_id, completed=done, info=info)

        with _notices(lambda line: bar.console.print(line, highlight=False, markup=False)):
            return loop.train(cfg, on_step)
