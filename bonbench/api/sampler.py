"""The Sampler protocol every backend implements, and the request/params records it consumes.

A backend receives many ``SampleRequest``s at once (batch them: prefix sharing and throughput
come from that) and yields finished ``Sample``s in groups as soon as they are done, so the run
store can persist them and an interrupted run keeps what finished. A request names exactly the
sample indices still missing for its problem, which is how resume and growing n work.

This module does not import any engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Protocol, Sequence

from bonbench.core.records import Prompt, Sample


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 512
    seed: int = 0
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class SampleRequest:
    prompt: Prompt
    sample_indices: tuple[int, ...]

    @property
    def problem_id(self) -> str:
        return self.prompt.problem_id


class Sampler(Protocol):
    """A sampling backend. ``is_chat`` tells the task which prompt style to render."""

    name: str
    model: str
    is_chat: bool
    fingerprint: str

    def generate(self, requests: Sequence[SampleRequest], params: SamplingParams) -> Iterator[list[Sample]]:
        """Yield lists of finished samples (any grouping) until every requested index is done."""
        ...

    def close(self) -> None: ...
