"""A backend that replays completions instead of running a model.

Two uses: tests (a dict or function gives the completion for each (problem_id, sample_idx)), and
replaying given ``Sample`` records (e.g. read by ``bonbench.pipeline.readers`` from another harness's file).
It is built in one place, ``bonbench.plugins.samplers.select.get_sampler("scripted", ...)``; imported runs
do not even need it (``runner.execute`` stores an imported file's samples directly).

This module does not read files or tokenize: ``n_tokens`` of scripted text is a whitespace word count,
and ``reasoning_tokens`` the words up to the last ``</think>`` (``bonbench.core.reasoning``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from bonbench.api.sampler import SampleRequest, SamplingParams
from bonbench.core.errors import BonbenchError
from bonbench.core.reasoning import answer_start
from bonbench.core.records import Sample

Script = Mapping[str, Sequence[str]] | Callable[[str, int], str]


class ScriptedSampler:
    """Replays canned completions; never samples."""

    name = "scripted"
    is_chat = False

    def __init__(self, script: Script | None = None, *, samples: Sequence[Sample] | None = None, model: str = "scripted",
                 fingerprint: str = "") -> None:
        self.model = model
        self.fingerprint = fingerprint
        self._script = script
        self._samples = {s.key: s for s in samples or ()}

    def available(self) -> dict[str, int]:
        """Number of replayable samples per problem (file mode)."""
        counts: dict[str, int] = {}
        for pid, _ in self._samples:
            counts[pid] = counts.get(pid, 0) + 1
        return counts

    def _one(self, pid: str, idx: int) -> Sample:
        if (pid, idx) in self._samples:
            return self._samples[(pid, idx)]
        if self._script is None:
            raise BonbenchError(f"the samples file has no sample {idx} for problem {pid!r}; lower --n or add the sample")
        if callable(self._script):
            text = self._script(pid, idx)
        else:
            seq = self._script.get(pid)
            if not seq:
                raise BonbenchError(f"scripted sampler has no completions for problem {pid!r}")
            text = seq[idx % len(seq)]
        return Sample(problem_id=pid, sample_idx=idx, completion=text, n_tokens=len(text.split()), finish_reason="stop",
                      reasoning_tokens=_reasoning_words(text),
                      logprob=-float(len(text.split())))

    def generate(self, requests: Sequence[SampleRequest], params: SamplingParams) -> Iterator[list[Sample]]:
        for req in requests:
            yield [self._one(req.problem_id, i) for i in req.sample_indices]

    def close(self) -> None:
        return None


def _reasoning_words(text: str) -> int:
    """Words of the reasoning trace, counted as ``n_tokens`` is (whitespace words)."""
    start = answer_start(text)
    return len(text.split()) if start is None else len(text[:start].split())
