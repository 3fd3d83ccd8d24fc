"""A tiny task plugin for pipeline tests: registered through a patched entry-point list.

Problem i asks for the number i; the scripted model answers with a pseudo-random digit that is
right with a problem-specific probability, so every metric has a non-trivial value.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence

from bonbench.api.task import Task, register_task
from bonbench.core.records import Grade, Problem, Prompt, Sample
from bonbench.plugins.samplers.scripted import ScriptedSampler


def toy_answer(problem_id: str, idx: int) -> str:
    """Deterministic 'model': right with probability (1 + i % 5) / 8, else one of a few wrong digits."""
    i = int(problem_id.split("/")[1])
    h = int(hashlib.sha256(f"{problem_id}:{idx}".encode()).hexdigest(), 16)
    if h % 8 < 1 + i % 5:
        return f"answer: {i}"
    if h % 11 == 0:
        return "no idea"
    return f"answer: {100 + (h >> 8) % 3}"


class ExactGrader:
    name = "exact"
    version = 1

    def grade(self, problems: Mapping[str, Problem], samples: Sequence[Sample]) -> list[Grade]:
        out = []
        for s in samples:
            ans = s.completion.split("answer:")[1].strip() if "answer:" in s.completion else None
            out.append(Grade(s.problem_id, s.sample_idx, self.name, self.version, correct=ans == problems[s.problem_id].target,
                             answer=ans))
        return out


def _render(problem: Problem, style: str) -> Prompt:
    return Prompt(problem_id=problem.id, text=f"Q: {problem.input}\nA:", stop=("\n",))


@register_task("toy")
def toy_task(data_dir: str | None = None, size: int = 12) -> Task:
    problems = tuple(Problem(id=f"toy/{i}", input=f"say {i}", target=str(i)) for i in range(size))
    return Task(name="toy", version=1, problems=problems, render=_render, grader=ExactGrader(), prompt_id="toy-v1",
                default_metrics=("pass@1",), max_tokens=8, fingerprint="toy")


class SlowScripted(ScriptedSampler):
    """Yields one sample at a time with a delay, so a test can kill the process mid-run."""

    def __init__(self, delay: float = 0.0) -> None:
        super().__init__(toy_answer, model="toy-model")
        self.delay = delay

    def generate(self, requests, params):
        for req in requests:
            for i in req.sample_indices:
                time.sleep(self.delay)
                yield [self._one(req.problem_id, i)]
