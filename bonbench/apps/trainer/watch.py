"""What a training run tells its user besides ``log.jsonl``, and when it saves.

* ``SaveSchedule``: when the resumable state is written. With ``--save-every N``, every N steps; by
  default after every step, unless the last save took more than a tenth of the time trained since
  it (then as soon as that much time has passed). Saving then costs at most about 10% of the
  run, and a kill loses less than ten times the last save's duration plus one step of work.
* ``SignalWatch``: warns when no prompt group carried a learning signal (every objective weight of
  a step was 0) for ``FLAT_STRETCH`` consecutive steps, or for a whole shorter run.
* ``warmup_warning``: the warm-up is as long as the run or longer.
* ``StepLines``: progress lines for output that is not a terminal (logs, CI): the steps through
  ``bonbench.pipeline.progress.ProgressLines``, the one line format of every stage (at most one per
  10 s, plus the first and the last step), with the step's reward and KL.

This module trains nothing and writes no files: it decides and words; ``loop`` and ``command`` act.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bonbench.apps.trainer.config import TrainConfig
from bonbench.pipeline.progress import ProgressLines

SAVE_SHARE = 0.1  # the default schedule keeps saving to about this share of the training time
FLAT_STRETCH = 10  # consecutive steps without a learning signal before a warning


class TrainingWarning(UserWarning):
    """A run that will not learn what its user expects (the CLI prints it as one ``warning:`` line)."""


@dataclass
class SaveSchedule:
    """When to save the resumable state (see the module docstring). ``clock`` is injectable for tests."""

    every: int | None
    share: float = SAVE_SHARE
    clock: Callable[[], float] = time.monotonic
    _since: float = field(default=0.0, init=False)  # when the last save ended (or training started)
    _cost: float = field(default=0.0, init=False)  # seconds the last save took (0: none yet, save at once)

    def start(self) -> None:
        self._since = self.clock()

    def due(self, done: int, total: int) -> bool:
        """Whether to save after ``done`` of ``total`` steps (always after the last)."""
        if done >= total:
            return True
        if self.every is not None:
            return done % self.every == 0
        return (self.clock() - self._since) * self.share >= self._cost

    def saved(self, seconds: float) -> None:
        """A save just ended after ``seconds``."""
        self._cost = seconds
        self._since = self.clock()


_NO_SIGNAL = "every objective weight was 0, e.g. all samples of each group scored alike, or none solved its problem"


class SignalWatch:
    """Counts steps in which no prompt group carried a learning signal; ``update`` returns a warning
    when a stretch reaches ``stretch`` steps (once per stretch), ``finish`` one when a shorter run had
    none at all. ``history``: the log rows of steps already trained (a resumed run)."""

    def __init__(self, stretch: int = FLAT_STRETCH, history: Sequence[Mapping[str, Any]] = ()) -> None:
        self.stretch = stretch
        self.run = 0  # consecutive flat steps up to now
        self.first = 0  # step index where that stretch began
        self.steps = self.flat = 0
        self.warned = False
        for row in history:
            self.update(row, quiet=True)

    def update(self, row: Mapping[str, Any], quiet: bool = False) -> str | None:
        step = int(row["step"])
        self.steps += 1
        if float(row.get("weight_abs_mean", 0.0)) != 0.0:
            self.run = 0
            return None
        self.flat += 1
        if self.run == 0:
            self.first = step
        self.run += 1
        if self.run != self.stretch:
            return None
        self.warned = True
        if quiet:
            return None
        return (f"no prompt group carried a learning signal in steps {self.first}-{step} ({_NO_SIGNAL}); the policy "
                "is not learning from rewards: use a larger --group, easier prompts, or another --objective")

    def finish(self) -> str | None:
        if self.warned or self.steps == 0 or self.flat < self.steps:
            return None
        return (f"no prompt group carried a learning signal in any of the {self.steps} steps ({_NO_SIGNAL}); "
                "nothing was learned from rewards: use a larger --group, easier prompts, or another --objective")


def warmup_warning(cfg: TrainConfig) -> str | None:
    """One line when every step of the run is warm-up (the learning rate never settles at ``--lr``)."""
    if cfg.warmup <= 1 or cfg.warmup < cfg.steps:
        return None
    low, high = cfg.lr / cfg.warmup, cfg.lr * cfg.steps / cfg.warmup  # the schedule's (s + 1) / warmup
    return (f"--warmup {cfg.warmup} is not shorter than --steps {cfg.steps}: every step is warm-up, at learning rates "
            f"{low:.3g}..{high:.3g} instead of --lr {cfg.lr:g}; use a smaller --warmup (e.g. --warmup 0)")


class StepLines:
    """``on_step`` callback writing training progress as plain lines through ``write`` (see the
    module docstring), e.g. ``training: 7/200 steps (3.5%) 4.2 s/step ETA 13m37s  reward 0.312
    kl_ref 0.041``. The first call (steps already done, an empty row) starts the clock and writes
    ``title`` (its ``{done}`` and ``{total}`` filled in) when there are steps left: the first step's
    line may be minutes away. ``interval`` and ``clock`` as ``ProgressLines`` takes them."""

    def __init__(self, write: Callable[[str], None], title: str = "", interval: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.write, self.title = write, title
        self.lines = ProgressLines(write, interval=interval, clock=clock)
        self.started = False

    def __call__(self, done: int, total: int, row: Mapping[str, Any]) -> None:
        if not self.started or not row:
            self.started = True
            self.lines.begin("training", done)
            if self.title and done < total:
                self.write(self.title.format(done=done, total=total))
            return
        extra = f"reward {row['reward']:.3f}" + (f"  kl_ref {row['kl_ref']:.3f}" if "kl_ref" in row else "")
        self.lines.update("training", done, total, unit="steps", extra=extra)
