"""The rows a search run keeps beside its samples, under ``<run>/search/``, and the journal that
makes a killed search resume with the same decisions.

Every row is keyed ``(problem_id, sample_idx)`` like every row on disk; a search's rows carry the
first sample index of its repetition (``r * n`` for repetition r of ``--seeds``):

- ``progress/<problem>-<sample_idx>.jsonl`` (``SearchCall``), one file per unfinished search: every
  call it made to the step sampler and the scorer, in order, with a digest of what was asked and
  what came back, appended (and fsynced) as each call returns. A resumed search replays these
  answers instead of asking the model again, so it takes the same decisions and goes on live from
  the first call not recorded: the last completed step of each problem. A finished search's file
  is deleted once its samples are stored (its tree and ledger keep what it decided and spent), so
  the journals on disk are those of the searches in flight, not the whole run's text again.
- ``trees.jsonl`` (``SearchTree``): the finished search's tree (parent, step text, step score,
  value, finish, tokens, kept or pruned) and its N candidates (sample index, leaf, steps, step
  scores, value). Nothing timed, so a resumed run's tree is byte for byte an uninterrupted one's.
- ``ledger.jsonl`` (``SearchLedger``): what the search cost (``api.search.records.SearchCost``),
  timings included; a replayed call's seconds are the ones recorded when it ran.

What it does not do: decide anything (the strategies do), run models, or write samples
(``bonbench.pipeline.search`` drives a run's searches and writes them).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bonbench.api.search.contract import PartialScorer, StepSampler
from bonbench.api.search.records import Continuation, Prefix, StepScores
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Prompt, from_row
from bonbench.core.store import JsonlTable


@dataclass(frozen=True)
class SearchCall:
    """One call of a problem's search: ``kind`` ``sample`` or ``score``, its index among the
    problem's calls, the digest of what was asked, the answer, and the seconds it took."""

    problem_id: str
    sample_idx: int
    call: int
    kind: str
    ask: str
    answer: list[Any]
    seconds: float = 0.0

    @property
    def key(self) -> tuple[str, int]:
        return (self.problem_id, self.sample_idx)


@dataclass(frozen=True)
class SearchTree:
    """One finished search: the strategy and its options, n, the seed, the tree's nodes (``records.Node``
    as dicts, a node's id its index) and the candidates (with the sample index each is stored under)."""

    problem_id: str
    sample_idx: int
    strategy: str
    options: dict[str, Any]
    n: int
    seed: int
    nodes: list[dict[str, Any]]
    candidates: list[dict[str, Any]]

    @property
    def key(self) -> tuple[str, int]:
        return (self.problem_id, self.sample_idx)


@dataclass(frozen=True)
class SearchLedger:
    """One search's compute (``records.SearchCost`` fields as a dict, plus ``overhead_s``)."""

    problem_id: str
    sample_idx: int
    cost: dict[str, Any]

    @property
    def key(self) -> tuple[str, int]:
        return (self.problem_id, self.sample_idx)


def search_folder(root: Path) -> Path:
    """Where a run directory keeps its search rows."""
    return Path(root) / "search"


def progress_table(root: Path, problem_id: str, sample_idx: int) -> JsonlTable[SearchCall]:
    """The journal of one search (named by a digest of its problem id, which may hold any character)."""
    name = f"{digest(problem_id)}-{sample_idx}.jsonl"
    return JsonlTable(search_folder(root) / "progress" / name, SearchCall)


def recorded_calls(table: JsonlTable[SearchCall]) -> list[SearchCall]:
    """A journal's calls in call order, up to the first gap (a torn last row is redone)."""
    by_index: dict[int, SearchCall] = {}
    for row in table.rows():
        call = from_row(SearchCall, row)
        by_index.setdefault(call.call, call)
    out: list[SearchCall] = []
    while len(out) in by_index:
        out.append(by_index[len(out)])
    return out


def tree_table(root: Path) -> JsonlTable[SearchTree]:
    return JsonlTable(search_folder(root) / "trees.jsonl", SearchTree)


def ledger_table(root: Path) -> JsonlTable[SearchLedger]:
    return JsonlTable(search_folder(root) / "ledger.jsonl", SearchLedger)


def reuse_note(root: Path) -> str | None:
    """One line on the verifier's rows of a search run's candidates: how many are the search's step
    scores (no second PRM pass) and why the others were scored again; None for a run without trees
    or whose trees predate the note (``bonbench.pipeline.search.reused_rows``)."""
    table = tree_table(root)
    if not table.path.is_file():
        return None
    notes = [str(c["verifier_row"]) for row in table.rows() for c in row["candidates"] if "verifier_row" in c]
    if not notes:
        return None
    reused = notes.count("reused")
    why = sorted({n.removeprefix("rescored: ") for n in notes if n != "reused"})
    again = f"; {len(notes) - reused} scored again ({'; '.join(why)})" if why else ""
    return f"verifier rows: {reused} of {len(notes)} candidates' are the search's step scores, no second pass{again}"


def digest(obj: Any) -> str:
    """A short digest of a call's request (its JSON form)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


class Journal:
    """One search's calls: replays the recorded ones in order, records the new ones (module docstring).

    ``recorded``: the calls stored for this search, in call order. A recorded call whose request
    differs from the one asked now means the search is no longer the one recorded: one line naming
    the file to delete."""

    def __init__(self, table: JsonlTable[SearchCall], problem_id: str, sample_idx: int,
                 recorded: Sequence[SearchCall]) -> None:
        self.table, self.problem_id, self.sample_idx = table, problem_id, sample_idx
        self.recorded = list(recorded)
        self.next = 0
        self.replayed_s = 0.0

    def call(self, kind: str, ask: Any, live: Any) -> list[Any]:
        """The answer to call number ``self.next``: the recorded one, else ``live()`` (recorded now)."""
        index, key = self.next, digest(ask)
        self.next += 1
        if index < len(self.recorded):
            row = self.recorded[index]
            if row.kind != kind or row.ask != key:
                raise BonbenchError(f"{self.table.path}: call {index} of problem {self.problem_id!r} recorded another "
                                    "request than this search makes; delete that file to search its problems again")
            self.replayed_s += row.seconds
            return row.answer
        began = time.perf_counter()
        answer = live()
        self.table.append([SearchCall(self.problem_id, self.sample_idx, index, kind, key, answer,
                                      time.perf_counter() - began)])
        return answer


class JournaledSampler:
    """A step sampler whose calls go through a ``Journal``."""

    def __init__(self, inner: StepSampler, journal: Journal) -> None:
        self.inner, self.journal, self.delimiter = inner, journal, inner.delimiter

    def prompt_text(self, prompt: Prompt) -> str:
        return self.inner.prompt_text(prompt)

    def continue_prefixes(self, prefixes: Sequence[Prefix]) -> list[Continuation]:
        ask = [asdict(p) for p in prefixes]
        answer = self.journal.call("sample", ask, lambda: [asdict(c) for c in self.inner.continue_prefixes(prefixes)])
        return [Continuation(**c) for c in answer]


class JournaledScorer:
    """A partial-solution scorer whose calls go through a ``Journal``."""

    def __init__(self, inner: PartialScorer, journal: Journal) -> None:
        self.inner, self.journal = inner, journal
        # every step list scored, as asked, and its scores: a final candidate's verifier row reuses them
        self.scored: dict[tuple[str, ...], tuple[float, ...]] = {}

    def score_steps(self, questions: Sequence[str], steps: Sequence[Sequence[str]]) -> list[StepScores]:
        ask = [list(questions), [list(s) for s in steps]]
        answer = self.journal.call("score", ask, lambda: [
            {"scores": [float(v) for v in s.scores], "tokens": int(s.tokens), "calls": int(s.calls)}  # plain JSON numbers
            for s in self.inner.score_steps(questions, steps)])
        got = [StepScores(tuple(s["scores"]), s["tokens"], s["calls"]) for s in answer]
        self.scored.update((tuple(listed), result.scores) for listed, result in zip(steps, got, strict=True))
        return got
