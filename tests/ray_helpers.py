"""Test-only samplers for tests/test_ray.py, importable on the Ray workers that the test starts
(their PYTHONPATH includes tests/), so a sampler spec can travel to an actor by reference."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from bonbench.records import Problem, Sample
from bonbench.sampler.base import SampleRequest, SamplingParams
from bonbench.sampler.ray_backend import SamplerSpec
from bonbench.sampler.scripted import ScriptedSampler


def math_script(problems: Sequence[Problem]) -> dict[str, list[str]]:
    """Completions per problem, replayed by sample_idx (idx % 3): right, wrong, right, ..."""
    return {p.id: [f"so the answer is $\\boxed{{{p.target}}}$.", "$\\boxed{-12345}$", f"it is $\\boxed{{{p.target}}}$"]
            for p in problems}


def humaneval_script(problems: Sequence[Problem]) -> dict[str, list[str]]:
    """The canonical body, a wrong body, and a body that never returns (a timeout) per problem."""
    return {p.id: [str(p.meta["canonical_solution"]), "    return None\n", "    while True:\n        pass\n"]
            for p in problems}


class SlowScripted(ScriptedSampler):
    """A scripted sampler that takes ``delay`` seconds per sample, so a test can kill a node mid-run."""

    def __init__(self, script: dict[str, list[str]], delay: float, model: str) -> None:
        super().__init__(script, model=model)
        self.delay = delay

    def generate(self, requests: Sequence[SampleRequest], params: SamplingParams) -> Iterator[list[Sample]]:
        for req in requests:
            for i in req.sample_indices:
                time.sleep(self.delay)
                yield [self._one(req.problem_id, i)]


@dataclass(frozen=True)
class SlowSpec(SamplerSpec):
    """``SamplerSpec`` of the scripted backend whose actors draw slowly."""

    delay: float = 0.2

    def build(self) -> Any:
        return SlowScripted(dict(self.script or {}), self.delay, self.model.name)
