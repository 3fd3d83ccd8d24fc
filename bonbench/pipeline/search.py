"""The sampling stage of a search run (``bonbench run --strategy``): each problem's search, its N
final candidates stored as the run's samples, its tree and ledger beside them.

``search(run, strategy, sampler, scorer)`` runs every search the run lacks: repetition r of
problem p (``--seeds``; seed ``repetition_seed(seed, r)``) stores its candidates as samples
``(p, r * n + j)``, j < n, in the order the strategy returns them, so grading, verifying and
scoring read them as any run's samples. Each sample's ``n_tokens`` is the tokens generated along
its path (shared steps counted in each), ``finish_reason`` its leaf's (``stop`` at the end of the
solution, ``length``, ``step`` for an unfinished partial solution DVTS returns), and its prompt
tokens are None: a search's prompt and prefix tokens are its ledger's, per problem, not a sample's.

The verifier's rows of the candidates (``selector``: the run's verifier, the same model as the
scorer, in the view the verify stage scores with): each candidate's row is written from the step
scores the scorer gave for exactly its steps (``api.verifier.ReusesStepScores``), so the verify
stage does not score the N candidates a second time and the ledger counts the PRM once (the
search's entry; the reused rows read 0 tokens in 0 calls). A candidate whose steps were scored only
inside a longer list (a lookahead rollout), or whose text the PRM family splits into other steps,
is left to the verify stage, which scores it; each candidate's ``verifier_row`` in ``trees.jsonl``
says ``reused`` or ``rescored: <why>``.

The rows beside the samples (tree, ledger, the journal of calls a killed search resumes from) are
``bonbench.pipeline.search_rows``'. A search is done when its n samples are stored; the tree and
ledger rows are written before them, so a search whose samples exist has both, and its journal is
deleted after them.

What it does not do: choose the strategy, the sampler or the scorer (``bonbench.run`` does), or
grade and score (``bonbench.pipeline.stages``).
"""

from __future__ import annotations

from dataclasses import asdict, replace

from bonbench.api.sampler import sample_seed
from bonbench.api.search.contract import PartialScorer, StepSampler, Strategy
from bonbench.api.search.records import SearchProblem, SearchResult
from bonbench.api.verifier import ReusesStepScores, Verifier
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Problem, Sample, Score
from bonbench.pipeline.prepared import PreparedRun, open_run, scorer_id
from bonbench.pipeline.progress import Progress, no_progress
from bonbench.pipeline.search_rows import (
    Journal,
    JournaledSampler,
    JournaledScorer,
    SearchLedger,
    SearchTree,
    ledger_table,
    progress_table,
    recorded_calls,
    tree_table,
)
from bonbench.plugins.rewards.base import reward_prompt

FINISH_REASONS = {"end": "stop", "length": "length", "step": "step"}  # a leaf's finish as a sample's finish_reason


def repetition_seed(seed: int, repetition: int) -> int:
    """The seed of repetition ``repetition`` of a problem's search: the run's seed for the first, so one
    seed is the plain search; the others derived from it (``--seeds``)."""
    return seed if repetition == 0 else sample_seed(seed, "search-repetition", repetition)


def missing_searches(run: PreparedRun) -> list[tuple[Problem, int]]:
    """(problem, repetition) of every search whose n samples are not all stored."""
    have = set(run.store.samples.read())
    n = run.cfg.n
    return [(p, r) for p in run.problems for r in range(run.cfg.seeds)
            if any((p.id, r * n + j) not in have for j in range(n))]


def search(run: PreparedRun, strategy: Strategy, sampler: StepSampler, scorer: PartialScorer,
           progress: Progress = no_progress, selector: Verifier | None = None) -> int:
    """Run every missing search of ``run`` and store it, with ``selector``'s rows of its candidates
    where the search's step scores make them; returns the samples written (module docstring)."""
    if not run.store.exists():
        open_run(run)
    todo = missing_searches(run)
    if not todo:
        return 0
    progress("search", 0, len(todo))
    root, n = run.store.root, run.cfg.n
    trees, ledgers = set(tree_table(root).read()), set(ledger_table(root).read())
    have = set(run.store.samples.read())
    written = 0
    for problem, r in todo:
        first = r * n
        table = progress_table(root, problem.id, first)
        journal = Journal(table, problem.id, first, recorded_calls(table))
        prompt = run.task.render(problem, run.cfg.prompt_style)  # type: ignore[arg-type]  # the style is resolved when planned
        # a chat prompt through the policy's chat template, the steps continuing its assistant turn
        journaled = JournaledScorer(scorer, journal)
        result = strategy.search(SearchProblem(problem.id, sampler.prompt_text(prompt), reward_prompt(problem)),
                                 JournaledSampler(sampler, journal), journaled, n=n, seed=repetition_seed(run.cfg.seed, r))
        if len(result.candidates) != n:
            raise BonbenchError(f"strategy {strategy.name!r} returned {len(result.candidates)} candidates for n={n}; "
                                "a strategy returns exactly n (fix the plugin)")
        candidates = candidate_samples(result, first)
        rows, notes = reused_rows(selector, result, candidates, journaled.scored)
        if (problem.id, first) not in trees:
            tree_table(root).append([tree_row(result, first, notes)])
        if (problem.id, first) not in ledgers:
            ledger_table(root).append([ledger_row(result, first, journal.replayed_s)])
        samples = [s for s in candidates if s.key not in have]
        written += run.store.samples.append(samples)
        if selector is not None and rows:  # after the samples: a killed run's verify stage scores what is missing
            version, fingerprint = scorer_id(run, selector)
            new = {s.key for s in samples}
            run.store.scores(selector.name).append([replace(row, verifier_version=version, verifier_fingerprint=fingerprint)
                                                    for row in rows if row.key in new])
        table.path.unlink(missing_ok=True)  # done: its tree and ledger are stored (search_rows)
        progress("search", 1, len(todo))
    return written


def path_tokens(result: SearchResult, leaf: int) -> int:
    """The tokens generated along the path from the root to ``leaf``."""
    total, node = 0, leaf
    while True:
        total += result.tree[node].tokens
        parent = result.tree[node].parent
        if parent is None:
            return total
        node = parent


def candidate_samples(result: SearchResult, first: int) -> list[Sample]:
    """The candidates as samples ``first + j`` (module docstring)."""
    return [Sample(result.problem_id, first + j, c.text, path_tokens(result, c.leaf), FINISH_REASONS[c.finish])
            for j, c in enumerate(result.candidates)]


def reused_rows(selector: Verifier | None, result: SearchResult, samples: list[Sample],
                scored: dict[tuple[str, ...], tuple[float, ...]]) -> tuple[list[Score], list[str]]:
    """``selector``'s rows of the candidates that the search's step scores make, and for every
    candidate ``reused`` or ``rescored: <why>`` (module docstring)."""
    rows: list[Score] = []
    notes: list[str] = []
    for cand, sample in zip(result.candidates, samples, strict=True):
        got = scored.get(cand.steps) if cand.steps else ()
        row: Score | str
        if selector is None or not isinstance(selector, ReusesStepScores):
            row = "the run's verifier cannot take a search's step scores as its rows"
        elif got is None:
            row = "the search scored these steps only inside a longer list (a lookahead rollout)"
        else:
            row = selector.reused_row(sample, cand.steps, got)
        if isinstance(row, Score):
            rows.append(row)
        notes.append("reused" if isinstance(row, Score) else f"rescored: {row}")
    return rows, notes


def tree_row(result: SearchResult, first: int, notes: list[str] | None = None) -> SearchTree:
    """The stored tree and candidates of one search (``notes``: each candidate's verifier row, ``reused_rows``)."""
    notes = notes or [""] * len(result.candidates)
    candidates = [{"sample_idx": first + j, "leaf": c.leaf, "steps": list(c.steps), "step_scores": list(c.step_scores),
                   "value": c.value, "finish": c.finish, **({"verifier_row": notes[j]} if notes[j] else {})}
                  for j, c in enumerate(result.candidates)]
    return SearchTree(result.problem_id, first, result.strategy, dict(result.options), result.n, result.seed,
                      [asdict(node) for node in result.tree], candidates)


def ledger_row(result: SearchResult, first: int, replayed_s: float) -> SearchLedger:
    """The stored cost of one search; the seconds of calls replayed from the journal count as when they ran."""
    cost = asdict(result.cost)
    cost["model_s"] += replayed_s
    cost["wall_s"] += replayed_s
    cost["overhead_s"] = max(0.0, cost["wall_s"] - cost["model_s"])
    return SearchLedger(result.problem_id, first, cost)
