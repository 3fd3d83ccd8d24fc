"""A held-out task whose grades are scripted per training step, for the tests of what reads the
evaluations (``--keep-best``, ``--stop-if``, plots): ``scripted_eval``'s problem i is correct at
evaluated step s exactly when ``SCRIPT[s][i]`` is 1, whatever the completion. ``AtStep``, a training
callback placed before the evaluation hook, tells the grader which step is being evaluated."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bonbench.api.task import Task, register_task
from bonbench.apps.trainer.hooks import Callback
from bonbench.core.records import Grade, Problem, Prompt

SCRIPT: dict[int, list[int]] = {}
NOW = {"step": 0}


class ScriptedGrader:
    name = "scripted"
    version = 1

    def grade(self, problems, samples):
        right = SCRIPT[NOW["step"]]
        return [Grade(s.problem_id, s.sample_idx, self.name, 1, correct=bool(right[int(s.problem_id.split("/")[1])]),
                      answer=s.completion[:1] or None) for s in samples]


def _render(problem: Problem, style: str) -> Prompt:
    return Prompt(problem_id=problem.id, text=problem.input + ":")


@register_task("scripted_eval")
def scripted_eval_task(data_dir: str | None = None, split: str = "test") -> Task:
    words = ["abc", "dd e", "cab a", "e e", "bad", "ce", "a b c", "dab"]
    problems = tuple(Problem(id=f"{split}/{i}", input=w, target="a") for i, w in enumerate(words))
    return Task(name="scripted_eval", version=1, problems=problems, render=_render, grader=ScriptedGrader(),
                prompt_id="scripted-eval-v1", max_tokens=2)


class AtStep(Callback):
    """Sets the step the scripted grader grades (pass it in ``train``'s callbacks: they run before the evaluation)."""

    def on_train_begin(self, start: int, total: int) -> None:
        NOW["step"] = start

    def on_step_end(self, done: int, row: Mapping[str, Any]) -> None:
        NOW["step"] = done


TRAIN_SOLVED: dict[int, bool] = {}  # training step -> whether every rollout of that step is correct


class ScriptedTrainGrader:
    name = "scripted_train"
    version = 1

    def grade(self, problems, samples):
        right = TRAIN_SOLVED.get(NOW["step"], False)
        return [Grade(s.problem_id, s.sample_idx, self.name, 1, correct=right, answer=s.completion[:1] or None)
                for s in samples]


@register_task("scripted_train")
def scripted_train_task(data_dir: str | None = None, split: str = "test") -> Task:
    """A train split whose rewards are scripted per step (``TRAIN_SOLVED``; the step is ``AtStep``'s)."""
    problems = tuple(Problem(id=f"{split}/{i}", input=w, target="a", meta={"solution": "a"})
                     for i, w in enumerate(["abc", "dd e", "cab a", "e e"]))
    return Task(name="scripted_train", version=1, problems=problems, render=_render, grader=ScriptedTrainGrader(),
                prompt_id="scripted-train-v1", max_tokens=2)
