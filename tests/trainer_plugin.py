"""A tiny task with a train split and two test objectives for trainer tests: prompts of the tiny Gemma's characters, a
sample is right when it starts with "a". Imported by tests and by run_train_cli.py (subprocesses)."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from bonbench.api.objective import Objective, register_objective
from bonbench.api.task import Task, register_task
from bonbench.core.records import Grade, Problem, Prompt

WORDS = ["abc", "dd e", "cab a", "e e", "bad", "ce", "a b c", "dab"]


class StartsWithA:
    name = "starts_a"
    version = 1

    def grade(self, problems, samples):
        return [Grade(s.problem_id, s.sample_idx, self.name, 1, correct=s.completion.startswith("a"),
                      answer=s.completion[:1] or None) for s in samples]


def _render(problem: Problem, style: str) -> Prompt:
    return Prompt(problem_id=problem.id, text=problem.input + ":")


@register_task("tiny_train")
def tiny_train_task(data_dir: str | None = None, split: str = "test") -> Task:
    words = WORDS if split == "train" else WORDS[:3]
    problems = tuple(Problem(id=f"{split}/{i}", input=w, target="a", meta={"solution": "a"}) for i, w in enumerate(words))
    return Task(name="tiny_train", version=1, problems=problems, render=_render, grader=StartsWithA(), prompt_id="tiny-train-v1",
                max_tokens=4)


@register_task("tiny_notrain")
def tiny_notrain_task(data_dir: str | None = None) -> Task:
    problems = (Problem(id="t/0", input="abc", target="a"),)
    return Task(name="tiny_notrain", version=1, problems=problems, render=_render, grader=StartsWithA(), prompt_id="tiny-v1",
                max_tokens=4)


@register_objective("test_rloo", paper="test only", summary="leave-one-out REINFORCE (test objective)")
def _test_rloo() -> Objective:
    def weights(g: Any) -> np.ndarray:
        r = np.asarray(g.rewards, dtype=float)
        return (r - (r.sum() - r) / max(len(r) - 1, 1)) / len(r)

    return Objective("test_rloo", weights, frozenset(), {})


@register_objective("test_needs_k", paper="test only", needs=("scores",), summary="needs a verifier and k samples")
def _test_needs_k(k: int = 6) -> Objective:
    return Objective("test_needs_k", lambda g: np.zeros(len(g.rewards)), frozenset({"scores"}), {"k": k}, min_group=k)


@register_objective("test_flat", paper="test only", summary="weight 0 on every sample (a step without a learning signal)")
def _test_flat() -> Objective:
    return Objective("test_flat", lambda g: np.zeros(len(g.rewards)), frozenset(), {})


# per-prompt success rates that do not depend on the policy: the value head's regression has a known answer
RATES = [0.1, 0.9, 0.5, 0.3, 0.7, 0.2, 0.8, 0.6]


class KnownRates:
    """Correct with probability RATES[prompt], as a uniform hash of the sample's key and text (the
    text changes with every step's sampling seed, so the outcomes are fresh draws each step)."""

    name = "known_rates"
    version = 1

    def grade(self, problems, samples):
        out = []
        for s in samples:
            digest = hashlib.sha256(f"{s.problem_id}|{s.sample_idx}|{s.completion}".encode()).digest()
            u = int.from_bytes(digest[:8], "little") / 2**64
            rate = RATES[int(s.problem_id.split("/")[1])]
            out.append(Grade(s.problem_id, s.sample_idx, self.name, 1, correct=u < rate, answer=s.completion[:1] or None))
        return out


@register_task("tiny_rates")
def tiny_rates_task(data_dir: str | None = None, split: str = "test") -> Task:
    problems = tuple(Problem(id=f"{split}/{i}", input=w, target="a", meta={"solution": "a"}) for i, w in enumerate(WORDS))
    return Task(name="tiny_rates", version=1, problems=problems, render=_render, grader=KnownRates(), prompt_id="tiny-train-v1",
                max_tokens=4)


@register_task("tiny_nogold")
def tiny_nogold_task(data_dir: str | None = None, split: str = "test") -> Task:
    problems = tuple(Problem(id=f"{split}/{i}", input=w, target="a") for i, w in enumerate(WORDS))  # no solutions
    return Task(name="tiny_nogold", version=1, problems=problems, render=_render, grader=StartsWithA(), prompt_id="tiny-train-v1",
                max_tokens=4)
