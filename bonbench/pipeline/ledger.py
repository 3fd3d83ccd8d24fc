"""The compute ledger of a run: the tokens the policy and every verifier spent, per problem.

``compute_ledger(run_dir)`` reads the stored rows and nothing else (no model, no task, no
recomputation): the policy's cost from ``samples.jsonl`` (``Sample.prompt_tokens`` read and
``Sample.n_tokens`` generated per sample, ``Sample.reasoning_tokens`` of them in a reasoning trace)
and each scorer's from its ``scores/<name>.jsonl`` (``Score.tokens`` read and ``Score.calls``:
forward passes or requests, per sample). Every file under ``scores/`` is a scorer that read the
samples: the verifiers (``oracle`` and ``logprob`` cost 0 and 0), and the teacher-forced scorers of
a KL (``lp-*``), which are compute too.

Which score row: a sample's latest row in the file (the scoring done last: a retrained model or a
new aggregation appends its rows after the old ones), over the samples the run holds. A PRM row
re-derived under another aggregation carries the tokens and forward passes that made its steps,
so the ledger says what scoring a sample with that verifier costs, not what this machine spent.

A search run (``bonbench run --strategy``) spends its compute in the search, not per sample: its
policy tokens are the searches' own (``search/ledger.jsonl``: the prompt and prefix tokens read
on every continuation, the tokens generated, pruned branches included), the search's scorer is
the ledger entry ``search`` (the tokens the verifier read and its calls while ranking partial
solutions), and ``wall_s`` the searches' wall time; the ``scores/`` files add what selecting among
the final candidates read, as for any run. A best-of-N run has no wall time stored (None).

Unknown stays unknown: a sum over rows of which one is None (a scripted or imported sample's
prompt, a verifier that does not count, a row written before the fields existed) is None, never a
guess. The records are frozen; ``to_json`` is their file form. ``bonbench report`` prints them
(``pipeline.report.print_compute``), and a compute recipe reads them here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from bonbench.core.records import Sample, Score, from_row
from bonbench.core.store import RunStore
from bonbench.pipeline.search_rows import ledger_table

Key = tuple[str, int]


def add_known(values: Iterable[int | None]) -> int | None:
    """The sum of ``values``, or None when any is None (unknown stays unknown)."""
    total = 0
    for v in values:
        if v is None:
            return None
        total += int(v)
    return total


@dataclass(frozen=True)
class VerifierCost:
    """What one scorer spent on a set of samples: rows counted, tokens read, forward passes or calls."""

    verifier: str
    samples: int
    tokens: int | None
    calls: int | None


@dataclass(frozen=True)
class ProblemCost:
    """What one problem's samples cost: the policy's prompt and generated tokens (``reasoning_tokens``:
    the part of them in a reasoning model's trace, None when not counted), and each scorer's."""

    problem_id: str
    samples: int
    prompt_tokens: int | None
    generated_tokens: int
    verifiers: tuple[VerifierCost, ...] = ()
    reasoning_tokens: int | None = None
    wall_s: float | None = None  # a search run's searches (None where not stored)

    @property
    def policy_tokens(self) -> int | None:
        """Prompt + generated tokens (None when the prompt was not counted)."""
        return None if self.prompt_tokens is None else self.prompt_tokens + self.generated_tokens

    def verifier(self, name: str) -> VerifierCost | None:
        """This problem's cost of scorer ``name`` (None when it scored none of its samples)."""
        return next((v for v in self.verifiers if v.verifier == name), None)


@dataclass(frozen=True)
class Ledger:
    """The compute ledger of one run directory (module docstring); ``problems`` in problem-id order."""

    run_dir: str
    verifiers: tuple[str, ...]
    problems: tuple[ProblemCost, ...]

    def total(self) -> ProblemCost:
        """The whole run as one row (``problem_id`` ``"*"``): every problem's costs added up."""
        return ProblemCost("*", sum(p.samples for p in self.problems), add_known(p.prompt_tokens for p in self.problems),
                           sum(p.generated_tokens for p in self.problems),
                           tuple(_sum_costs(name, [c for p in self.problems if (c := p.verifier(name)) is not None])
                                 for name in self.verifiers),
                           add_known(p.reasoning_tokens for p in self.problems),
                           None if any(p.wall_s is None for p in self.problems) else sum(p.wall_s or 0.0 for p in self.problems))

    def to_json(self) -> dict[str, Any]:
        return {"run_dir": self.run_dir, "verifiers": list(self.verifiers),
                "problems": [asdict(p) for p in self.problems], "total": asdict(self.total())}


def _sum_costs(name: str, costs: Iterable[VerifierCost]) -> VerifierCost:
    costs = list(costs)
    return VerifierCost(name, sum(c.samples for c in costs), add_known(c.tokens for c in costs),
                        add_known(c.calls for c in costs))


def latest_scores(store: RunStore, name: str) -> dict[Key, Score]:
    """Each key's last row in ``scores/<name>.jsonl`` (the store's ``read`` keeps the first: reuse)."""
    out: dict[Key, Score] = {}
    for row in store.scores(name).rows():
        score = from_row(Score, row)
        out[score.key] = score
    return out


def compute_ledger(run_dir: Path | str) -> Ledger:
    """The compute ledger of ``run_dir`` from its stored rows (module docstring)."""
    store = RunStore(Path(run_dir))
    samples: dict[Key, Sample] = store.samples.read()
    folder = store.root / "scores"
    names = tuple(sorted(p.stem for p in folder.glob("*.jsonl"))) if folder.is_dir() else ()
    scores = {name: latest_scores(store, name) for name in names}
    by_problem: dict[str, list[Sample]] = {}
    for key in sorted(samples):
        by_problem.setdefault(key[0], []).append(samples[key])
    problems = []
    for pid, rows in sorted(by_problem.items()):
        costs = []
        for name in names:
            scored = [scores[name][s.key] for s in rows if s.key in scores[name]]
            if scored:
                costs.append(VerifierCost(name, len(scored), add_known(sc.tokens for sc in scored),
                                          add_known(sc.calls for sc in scored)))
        problems.append(ProblemCost(pid, len(rows), add_known(s.prompt_tokens for s in rows),
                                    sum(int(s.n_tokens) for s in rows), tuple(costs),
                                    add_known(s.reasoning_tokens for s in rows)))
    searched = _search_costs(store)
    if searched:
        names = (SEARCH_SCORER, *names)
        problems = [searched[p.problem_id](p) if p.problem_id in searched else p for p in problems]
    return Ledger(str(store.root), names, tuple(problems))


SEARCH_SCORER = "search"  # the ledger entry of a search's scorer (module docstring)


def _search_costs(store: RunStore) -> dict[str, Any]:
    """For each searched problem, the function that turns its sample-based cost into the search's own."""
    costs: dict[str, list[dict[str, Any]]] = {}
    for row in ledger_table(store.root).rows():
        costs.setdefault(str(row["problem_id"]), []).append(row["cost"])

    def searched(rows: list[dict[str, Any]]) -> Any:
        def cost(p: ProblemCost) -> ProblemCost:
            scorer = VerifierCost(SEARCH_SCORER, p.samples, sum(int(c["verifier_tokens"]) for c in rows),
                                  sum(int(c["verifier_calls"]) for c in rows))
            return replace(p, prompt_tokens=sum(int(c["prompt_tokens"]) for c in rows),
                           generated_tokens=sum(int(c["generated_tokens"]) for c in rows),
                           verifiers=(scorer, *p.verifiers), wall_s=math.fsum(float(c["wall_s"]) for c in rows))
        return cost

    return {pid: searched(rows) for pid, rows in costs.items()}
