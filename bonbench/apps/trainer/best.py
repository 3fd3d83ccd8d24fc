"""The best evaluated step (``--keep-best METRIC``): a loadable copy of its weights in
``CHECKPOINT/best/``, replaced only when a later evaluation beats it beyond the evaluation's noise.

The rule (``rule``): the first evaluated step is kept. A later evaluated step K replaces the kept
step J when the 95% paired bootstrap interval of METRIC(K) - METRIC(J), over the problems both
evaluations scored (``evaluate.Evaluation.compare``: the same pairing, resamples and seed as each
row's ``vs_step0``), lies entirely above 0 (entirely below 0 for a metric where lower is better). A
step whose point estimate is higher but whose interval reaches 0 is noise, and the earlier step stays:
with one comparison per evaluation the rule prefers the earlier of two steps it cannot tell apart,
so a run whose metric drifts up and down by chance keeps step 0's weights.

``CHECKPOINT/best/`` is a plain export (LoRA merged, bf16, tokenizer) with its own
``bonbench_manifest.json`` (``steps``: the kept step, ``keep_best``: metric, step and rule), so
``bonbench run --model CHECKPOINT/best`` evaluates it like any checkpoint. It is written to
``best.tmp/`` and renamed into place, so a kill leaves the previous kept copy or the new one
(``best.old/`` between the two renames, read back on resume). The checkpoint's own manifest records
``keep_best`` too (``manifest``). A resumed run reads the kept step back from ``best/``; its first
evaluation, of a step it has evaluated before, replaces nothing.

This module samples and scores nothing (``evaluate`` does) and knows no file of the export but the
manifest's name: the caller hands it the function that exports the live weights.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bonbench.apps.trainer.evaluate import Evaluation
from bonbench.apps.trainer.hooks import Callback
from bonbench.apps.trainer.setup import NOTICES
from bonbench.core.models import CHECKPOINT_MANIFEST
from bonbench.metrics.info import LOWER

BEST_DIR = "best"

Export = Callable[[Path, int, Mapping[str, Any]], None]  # (folder, steps done, extra manifest fields)


def rule(metric: str, direction: str) -> str:
    """The replacement rule in words, as the manifests record it."""
    side = "below" if direction == LOWER else "above"
    return (f"a later evaluated step replaces the kept one when the 95% paired bootstrap CI of {metric}(step) - "
            f"{metric}(kept) on the same problems lies entirely {side} 0")


def beats(paired: Mapping[str, float], direction: str) -> bool:
    """Whether a paired difference (new minus kept: ``lo``, ``hi``) clears the noise in ``direction``."""
    return paired["hi"] < 0 if direction == LOWER else paired["lo"] > 0


def kept_step(root: Path) -> int | None:
    """The step kept in ``root/best`` (its manifest's ``keep_best``), repairing a swap a kill cut short;
    None when nothing is kept yet."""
    best, old = root / BEST_DIR, root / (BEST_DIR + ".old")
    if not (best / CHECKPOINT_MANIFEST).is_file() and (old / CHECKPOINT_MANIFEST).is_file():
        if best.exists():
            shutil.rmtree(best)
        os.replace(old, best)
    path = best / CHECKPOINT_MANIFEST
    if not path.is_file():
        return None
    return int(json.loads(path.read_text(encoding="utf-8"))["keep_best"]["step"])


class KeepBest(Callback):
    """After each evaluation (``evaluation.latest``), keep its step when it beats the kept one (the
    module docstring). Add it after the ``Evaluation`` hook: callbacks run in order."""

    def __init__(self, metric: str, direction: str, evaluation: Evaluation, root: Path, export: Export) -> None:
        self.metric, self.direction, self.evaluation, self.root, self.export = metric, direction, evaluation, root, export
        self.rule = rule(metric, direction)
        self.kept = kept_step(root)

    def on_train_begin(self, start: int, total: int) -> None:
        self.consider()

    def on_step_end(self, done: int, row: Mapping[str, Any]) -> None:
        self.consider()

    def consider(self) -> None:
        """Keep the step just evaluated, if it is the first or beats the kept one."""
        row = self.evaluation.latest
        if row is None:
            return
        step = int(row["step"])
        if self.kept is None:
            self.keep(step, "the first evaluated step")
        elif step != self.kept:
            paired = self.evaluation.compare(step, self.kept).get(self.metric)
            if paired is not None and beats(paired, self.direction):
                self.keep(step, f"{paired['diff']:+.3f} [{paired['lo']:+.3f}, {paired['hi']:+.3f}] vs step {self.kept}")

    def keep(self, step: int, why: str) -> None:
        """Export the live weights (those after ``step`` steps) into ``best/``: temp folder, then renamed."""
        tmp, best, old = self.root / (BEST_DIR + ".tmp"), self.root / BEST_DIR, self.root / (BEST_DIR + ".old")
        for leftover in (tmp, old):  # of a kill before the last swap ended (best/ itself is complete)
            if leftover.exists():
                shutil.rmtree(leftover)
        self.export(tmp, step, {"keep_best": self.entry(step)})
        if best.exists():
            os.replace(best, old)
        os.replace(tmp, best)
        if old.exists():
            shutil.rmtree(old)
        self.kept = step
        NOTICES.info(f"keeping step {step} as the best at {self.metric} ({why}) in {best}")

    def on_train_end(self, done: int) -> None:
        if self.kept is not None:  # the run's last line says which weights are the ones to use
            NOTICES.info(f"best evaluated step at {self.metric}: {self.kept} of {done}; evaluate it with "
                         f"`bonbench run --model {self.root / BEST_DIR}`")

    def entry(self, step: int) -> dict[str, Any]:
        return {"metric": self.metric, "step": step, "rule": self.rule}

    def manifest(self) -> dict[str, Any]:
        return {} if self.kept is None else {"keep_best": self.entry(self.kept)}
