"""A backend that replays completions instead of running a model.

Two uses: tests (a dict or function gives the completion for each (problem_id, sample_idx)), and
scoring samples produced elsewhere (``bonbench score --samples FILE.jsonl``: rows with
``problem_id`` (or ``task_id``), ``completion``, and optionally ``sample_idx``, ``n_tokens``,
``finish_reason``, ``logprob``). Rows without ``sample_idx`` are numbered per problem in file order:
such files carry no index, so file order is the only key they have.

This module does not tokenize: ``n_tokens`` defaults to a whitespace word count.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

from bonbench.data import file_fingerprint, read_jsonl
from bonbench.errors import BonbenchError
from bonbench.records import Sample
from bonbench.sampler.base import SampleRequest, SamplingParams

Script = Mapping[str, Sequence[str]] | Callable[[str, int], str]


def read_sample_rows(path: Path) -> list[Sample]:
    """Samples from a JSONL file of bonbench sample rows or {problem_id|task_id, completion} rows."""
    if not Path(path).is_file():
        raise BonbenchError(f"samples file {str(path)!r} not found; pass an existing JSONL file to --samples")
    out: list[Sample] = []
    next_idx: dict[str, int] = {}
    for i, row in enumerate(read_jsonl(Path(path)), 1):
        pid = row.get("problem_id", row.get("task_id"))
        completion = row.get("completion")
        if pid is None or not isinstance(completion, str):
            raise BonbenchError(f"{path}:{i}: a sample row needs 'problem_id' (or 'task_id') and a string 'completion'")
        idx = row.get("sample_idx")
        if idx is None:
            idx = next_idx.get(str(pid), 0)
        next_idx[str(pid)] = max(next_idx.get(str(pid), 0), int(idx) + 1)
        out.append(
            Sample(
                problem_id=str(pid),
                sample_idx=int(idx),
                completion=completion,
                n_tokens=int(row.get("n_tokens") or len(completion.split())),
                finish_reason=str(row.get("finish_reason") or "stop"),
                logprob=row.get("logprob"),
            )
        )
    return out


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

    @classmethod
    def from_file(cls, path: Path, reader: Callable[[Path], list[Sample]] | None = None) -> "ScriptedSampler":
        samples = (reader or read_sample_rows)(Path(path))
        return cls(samples=samples, model=Path(path).stem, fingerprint=file_fingerprint(Path(path)))

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
                      logprob=-float(len(text.split())))

    def generate(self, requests: Sequence[SampleRequest], params: SamplingParams) -> Iterator[list[Sample]]:
        for req in requests:
            yield [self._one(req.problem_id, i) for i in req.sample_indices]

    def close(self) -> None:
        return None
