"""The training loop's hooks: what runs beside the steps (progress, warnings, and later evaluation,
loggers and guards) without the loop knowing what it is.

``Callback`` is TRL's ``TrainerCallback`` reduced to the events bonbench's loop has: the run begins
(``on_train_begin``), a step's log row is written (``on_step_end``), the resumable state is saved
(``on_checkpoint``), the run ends (``on_train_end``); ``manifest``, the fields a hook adds to the
exported checkpoint's manifest (the kept step, the rule that stopped the run); and ``should_stop``,
asked after each step's ``on_step_end``, which returns a one-line reason to end training early
(TRL's ``control.should_training_stop``; the loop then saves and exports the state of that step).
``Callbacks`` calls a list of them in order. ``Progress`` wraps the ``on_step(done, total, row)``
function ``loop.train`` takes (the CLI's bar and lines); ``SignalWarnings`` raises
``watch.SignalWatch``'s words as ``TrainingWarning``s.

Steps are counted as steps done: ``on_step_end(done, row)`` follows the step whose row has
``"step": done - 1``, and ``on_checkpoint(done)`` follows the save of the state after ``done``
steps, so both name the same weights. In a data-parallel job the callbacks run on rank 0 alone, and
``loop`` shares ``should_stop``'s decision with every rank. This module trains nothing and writes no
files.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bonbench.apps.trainer.watch import SignalWatch, TrainingWarning

StepCallback = Callable[[int, int, Mapping[str, Any]], None]  # (steps done, total, last log row)


class Callback:
    """A hook into the training loop; every event does nothing here (override the ones you need)."""

    def on_train_begin(self, start: int, total: int) -> None:
        """Training starts (or resumes) with ``start`` of ``total`` steps done."""

    def on_step_end(self, done: int, row: Mapping[str, Any]) -> None:
        """A step ended and its log row was appended to ``log.jsonl``; ``done`` steps are done."""

    def on_checkpoint(self, done: int) -> None:
        """The resumable state after ``done`` steps was saved."""

    def should_stop(self) -> str | None:
        """A one-line reason to end training after this step, or None to go on."""
        return None

    def on_train_end(self, done: int) -> None:
        """Training ended after ``done`` steps (all of them, or fewer when a callback stopped it)."""

    def manifest(self) -> Mapping[str, Any]:
        """Fields this hook adds to the checkpoint's ``bonbench_manifest.json`` when it is exported."""
        return {}


class Callbacks(Callback):
    """Several callbacks, called in order; the first reason to stop wins."""

    def __init__(self, callbacks: Sequence[Callback] = ()) -> None:
        self.callbacks = list(callbacks)

    def on_train_begin(self, start: int, total: int) -> None:
        for cb in self.callbacks:
            cb.on_train_begin(start, total)

    def on_step_end(self, done: int, row: Mapping[str, Any]) -> None:
        for cb in self.callbacks:
            cb.on_step_end(done, row)

    def on_checkpoint(self, done: int) -> None:
        for cb in self.callbacks:
            cb.on_checkpoint(done)

    def should_stop(self) -> str | None:
        return next((reason for cb in self.callbacks if (reason := cb.should_stop())), None)

    def on_train_end(self, done: int) -> None:
        for cb in self.callbacks:
            cb.on_train_end(done)

    def manifest(self) -> dict[str, Any]:
        return {key: value for cb in self.callbacks for key, value in cb.manifest().items()}


class Progress(Callback):
    """``on_step(done, total, row)`` as a callback: called with an empty row when training begins,
    then with each step's row (``watch.StepLines`` and the CLI's bar read it)."""

    def __init__(self, on_step: StepCallback) -> None:
        self.on_step = on_step
        self.total = 0

    def on_train_begin(self, start: int, total: int) -> None:
        self.total = total
        self.on_step(start, total, {})

    def on_step_end(self, done: int, row: Mapping[str, Any]) -> None:
        self.on_step(done, self.total, row)


class SignalWarnings(Callback):
    """Warns (``TrainingWarning``) when steps carry no learning signal (``watch.SignalWatch``);
    ``history``: the log rows of the steps a resumed run already trained."""

    def __init__(self, history: Sequence[Mapping[str, Any]] = ()) -> None:
        self.watch = SignalWatch(history=history)
        self.trained = False  # whether this process trained a step (a finished run resumed trains none)

    def on_step_end(self, done: int, row: Mapping[str, Any]) -> None:
        self.trained = True
        _warn(self.watch.update(row))

    def on_train_end(self, done: int) -> None:
        if self.trained:
            _warn(self.watch.finish())


def _warn(message: str | None) -> None:
    if message:
        warnings.warn(message, TrainingWarning, stacklevel=3)
