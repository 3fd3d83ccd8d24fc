"""A scripted model on the real MATH test problems for adaptive runs (tests/test_adaptive_run.py):
problem j (in the task's order) boxes its right answer with probability (j % 9) / 8, else a wrong
number, decided by a hash of (problem id, sample index): the same samples in every process."""

from __future__ import annotations

import hashlib
from pathlib import Path

from bonbench.core import models
from bonbench.plugins.samplers import select
from bonbench.plugins.samplers.scripted import ScriptedSampler


def answer_script(data_dir: Path):  # type: ignore[no-untyped-def]  # a Script callable
    from bonbench_tasks.math import math_task

    problems = math_task(data_dir=str(data_dir)).problems[:40]
    targets = {p.id: (j, p.target) for j, p in enumerate(problems)}

    def answer(pid: str, idx: int) -> str:
        j, target = targets[pid]
        h = int(hashlib.sha256(f"{pid}:{idx}".encode()).hexdigest(), 16)
        return f"So the answer is $\\boxed{{{target if h % 8 < j % 9 else 1000 + h % 3}}}$."

    return answer


def resolved(name: str) -> models.ResolvedModel:
    """What every model name resolves to: the script (no model folder)."""
    return models.ResolvedModel(name="scripted-math", path="scripted-math", is_chat=False, fingerprint="scripted",
                                revision=None)


def patches(data_dir: Path) -> dict[tuple[object, str], object]:
    """The module attributes to replace so that every backend samples the script (no model is loaded)."""
    answer = answer_script(data_dir)
    return {(models, "resolve_model"): resolved, (select, "get_sampler"): lambda *a, **k: ScriptedSampler(answer)}


def install(data_dir: Path) -> None:
    """``patches`` for good, in a process of its own (the kill tests' child)."""
    for (module, name), value in patches(data_dir).items():
        setattr(module, name, value)
