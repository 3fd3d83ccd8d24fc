"""Recipe tables (``recipe_table.RunTable``) of the runs whose samples are not n exchangeable draws
per problem: search runs and adaptive runs (docs/recipe.md says why each is weighed this way).

- A **search run** (``bonbench run --strategy S --n N``) is one deployable strategy at exactly its
  N: the search, then a rule that picks its final answer among the N candidates, the selection
  rules its own metrics use (``bon``: the verifier's best under its aggregation, ``wmaj``, ``maj``;
  ``pass@N`` as the oracle's bound). Each value is the metric's own estimator at k = N on one
  search's candidates (``curve_values``, as ``pipeline.scoring.search_metrics``), averaged per
  problem over the searches repeated under ``--seeds``. Its cost is one search's ledger
  (``pipeline.ledger``: the prompt and prefix tokens read on every continuation, the tokens
  generated, pruned branches included, the verifier's tokens while ranking partial solutions) plus
  the selecting verifier's tokens on the N candidates.
- An **adaptive run** (``bonbench run --adaptive``) measures the same fixed-N strategies as a
  sampling run of its settings, with each problem's n chosen from its pilot, so pooling a problem's
  samples would be biased (docs/adaptive.md). Each problem's value at N is its design's two-stage
  estimate where the design supports N (N samples in each part that carries weight), else the
  fixed-n estimate on its pilot alone; which of the two is fixed by the design, never by the
  problem's own pilot, so both stay unbiased. N goes up to what every problem can estimate. The
  cost per sample is estimated the same way (the pilot's mean tokens and the second stage's, under
  the design's weight): a sample's length may depend on its outcome, and the second stage's size
  does.

What it does not do: keep tables (``recipe_table.run_table``), choose or convert tokens to FLOPs
(``recipe``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from bonbench.api.metric.values import curve_values, two_stage_k
from bonbench.apps.analysis.recipe_rows import fast_inputs
from bonbench.apps.analysis.recipe_table import (
    RunTable,
    TableSpec,
    deployable_verifiers,
    grid,
    no_prompt_counts,
    verifier_tokens,
)
from bonbench.apps.analysis.run_rows import outcomes_by_verifier
from bonbench.apps.analysis.rundir import RunData
from bonbench.core.errors import BonbenchError
from bonbench.core.store import RunStore, read_run_json
from bonbench.metrics.adaptive import TwoStage
from bonbench.metrics.estimators import ProblemOutcome
from bonbench.pipeline.adaptive import ADAPTIVE_FILE, designs_of
from bonbench.pipeline.ledger import SEARCH_SCORER, compute_ledger, latest_scores

SEARCH_RULES = ("maj", "bon", "wmaj")  # a search run's selection rules (docs/search.md: its default metrics)


def is_search(run: RunData) -> bool:
    return run.config.get("strategy") is not None


def is_adaptive(run: RunData) -> bool:
    return not is_search(run) and bool(run.config.get("adaptive"))


def search_label(run: RunData) -> str:
    """The search as deployed: its strategy and every option (``beam(agg=last,width=4,...)``)."""
    options = run.config.get("strategy_options") or {}
    return f"{run.config['strategy']}(" + ",".join(f"{k}={options[k]}" for k in sorted(options)) + ")"


def _outcomes(run: RunData, verifiers: list[str]) -> dict[str | None, list[ProblemOutcome]]:
    fast = fast_inputs(run, verifiers)
    return outcomes_by_verifier(run, verifiers) if fast is None else fast[2]


def _part(o: ProblemOutcome, lo: int, hi: int | None) -> ProblemOutcome:
    """Samples ``lo..hi-1`` of a problem's outcome (by position: sample indices in order)."""
    return replace(o, correct=o.correct[lo:hi], answers=o.answers[lo:hi],
                   scores=None if o.scores is None else o.scores[lo:hi],
                   logprobs=None if o.logprobs is None else o.logprobs[lo:hi])


def _todo(spec: TableSpec, verifiers: Sequence[str], answers: bool,
          rules: Sequence[str]) -> list[tuple[str, str | None, str]]:
    """(rule, verifier, curve key) of every rule of ``rules`` the run can take (``pass`` always)."""
    todo: list[tuple[str, str | None, str]] = [("pass", None, "pass"), ("single", None, "pass")]
    todo += [("maj", None, "maj")] if answers else []
    for name in verifiers:
        todo += [("bon", name, "bon")] + ([("wmaj", name, "wmaj"), ("bom", name, f"bom:{spec.bom_share:g}")]
                                         if answers else [])
    return [t for t in todo if t[0] == "pass" or (t[0] in spec.rules and t[0] in rules)]


def search_table(run: RunData, spec: TableSpec) -> RunTable:
    """A search run's table: one column at its N (module docstring)."""
    N = run.n
    verifiers = deployable_verifiers(run)
    by_verifier = _outcomes(run, verifiers)
    plain = by_verifier[None]
    ids = tuple(o.problem_id for o in plain)
    reps = []
    for o in plain:
        if len(o.correct) % N:
            raise BonbenchError(f"{run.path}: problem {o.problem_id!r} has {len(o.correct)} graded candidates, not a "
                                f"whole number of searches of n = {N}; run `bonbench run` again with the same flags "
                                "(it finishes the searches and grades them)")
        reps.append(len(o.correct) // N)
    values: dict[tuple[str, str | None], tuple[tuple[int, ...], np.ndarray]] = {}
    notes: list[str] = []
    answers = any(a is not None for o in plain for a in o.answers)
    for rule, verifier, key in _todo(spec, verifiers, answers, ("pass", *SEARCH_RULES)):
        outs = by_verifier[verifier]
        total = np.zeros(len(ids))
        try:
            for r in range(max(reps)):  # repetition r of every problem that has it (--seeds)
                have = [i for i, m in enumerate(reps) if m > r]
                got = curve_values([_part(outs[i], r * N, (r + 1) * N) for i in have], key, (N,), seed=run.seed)
                total[have] += got[:, 0]
        except BonbenchError as exc:  # e.g. wmaj on negative scores: this rule does not apply to the run
            notes.append(f"{run.path}: {rule} under {verifier} left out ({exc})")
            continue
        values[(rule, verifier)] = ((N,), (total / np.array(reps))[:, None])
    prompt, gen, searched, per_verifier = _search_tokens(run, ids, reps, verifiers)
    return RunTable(ids, N, prompt, gen, per_verifier, values, tuple(notes), str(run.config.get("verifier") or SEARCH_SCORER),
                    searched)


def _search_tokens(run: RunData, ids: Sequence[str], reps: Sequence[int], verifiers: Sequence[str]
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Per problem: one search's prompt tokens read, its generated tokens per candidate, its scorer's
    tokens; and each selecting verifier's tokens per scored candidate (NaN where it scored none)."""
    ledger = {p.problem_id: p for p in compute_ledger(run.path).problems}
    prompt, gen, searched = np.zeros(len(ids)), np.zeros(len(ids)), np.zeros(len(ids))
    per_verifier = {name: np.full(len(ids), np.nan) for name in verifiers}
    for i, (pid, m) in enumerate(zip(ids, reps, strict=True)):
        p = ledger.get(pid)
        scorer = None if p is None else p.verifier(SEARCH_SCORER)
        if p is None or scorer is None or scorer.tokens is None:
            raise BonbenchError(f"{run.path}: the search of problem {pid!r} has no row in search/ledger.jsonl, so its "
                                "cost is unknown; run `bonbench run` again with the same flags (a search writes its "
                                "ledger with its samples)")
        if p.prompt_tokens is None:
            raise no_prompt_counts(run)
        prompt[i], gen[i], searched[i] = p.prompt_tokens / m, p.generated_tokens / (m * run.n), scorer.tokens / m
        for name in verifiers:
            tokens = verifier_tokens(run, p, name)
            if tokens is not None:
                per_verifier[name][i] = tokens
    return prompt, gen, searched, per_verifier


def adaptive_table(run: RunData, spec: TableSpec) -> RunTable:
    """An adaptive run's table: unbiased values and costs under its designs (module docstring)."""
    path = run.path / ADAPTIVE_FILE
    if not path.is_file():
        raise BonbenchError(f"{run.path} is an adaptive run whose pilot round has not finished (no {ADAPTIVE_FILE}); "
                            "run `bonbench run` with the same flags to resume it, or leave it out")
    doc = read_run_json(path)
    designs = designs_of(doc)
    verifiers = deployable_verifiers(run)
    by_verifier = _outcomes(run, verifiers)
    plain = by_verifier[None]
    ids = tuple(o.problem_id for o in plain)
    for o in plain:
        want = doc["problems"].get(o.problem_id, {}).get("n")
        if want != len(o.correct):
            raise BonbenchError(f"{run.path}: problem {o.problem_id!r} has {len(o.correct)} graded samples but its "
                                f"design in {ADAPTIVE_FILE} gives it {want}; run `bonbench run` again with the same flags")
    ds = [designs[pid] for pid in ids]
    pilot = int(doc["pilot"])
    ks = grid(max(pilot, two_stage_k(ds)))
    values: dict[tuple[str, str | None], tuple[tuple[int, ...], np.ndarray]] = {}
    notes: list[str] = []
    answers = any(a is not None for o in plain for a in o.answers)
    for rule, verifier, key in _todo(spec, verifiers, answers, ("pass", "single", "maj", "bon", "wmaj", "bom")):
        Ns = (1,) if rule == "single" else tuple(ks) if rule == "pass" else tuple(k for k in ks if k >= 2)
        if not Ns:
            continue
        try:
            values[(rule, verifier)] = (Ns, two_stage_values(by_verifier[verifier], ds, key, Ns, run.seed))
        except BonbenchError as exc:
            notes.append(f"{run.path}: {rule} under {verifier} left out ({exc})")
    prompt, gen, per_verifier = _adaptive_tokens(run, ids, ds, verifiers)
    return RunTable(ids, ks[-1], prompt, gen, per_verifier, values, tuple(notes))


def two_stage_values(outs: Sequence[ProblemOutcome], designs: Sequence[TwoStage], key: str, Ns: Sequence[int],
                      seed: int) -> np.ndarray:
    """[P, len(Ns)]: at each N, each problem's two-stage estimate where its design supports N, else
    its pilot's fixed-n estimate (the pilot holds N samples wherever the design does not: ``ks``)."""
    pilot = curve_values([_part(o, 0, d.pilot) for o, d in zip(outs, designs, strict=True)], key, Ns, seed=seed)
    split = [i for i, d in enumerate(designs) if d.weight < 1]
    second = np.full(pilot.shape, np.nan)
    if split:
        second[split] = curve_values([_part(outs[i], designs[i].pilot, None) for i in split], key, Ns, seed=seed)
    out = np.empty(pilot.shape)
    for i, d in enumerate(designs):
        top = two_stage_k([d])
        for j, N in enumerate(Ns):
            out[i, j] = d.estimate(float(pilot[i, j]), float(second[i, j])) if N <= top else pilot[i, j]
    assert not np.isnan(out).any(), "every N of the grid is estimable on every problem (adaptive_table's ks)"
    return out


def stage_mean(design: TwoStage, values: Sequence[float]) -> float:
    """A problem's mean per sample under its design: the pilot's mean and the second stage's, weighted
    as the design weighs its estimates where every second stage has a sample, else the pilot's alone
    (which of the two depends on the design only)."""
    head, tail = values[:design.pilot], values[design.pilot:]
    if design.weight < 1 and min(design.second) >= 1:
        return design.estimate(math.fsum(head) / len(head), math.fsum(tail) / len(tail))
    return math.fsum(head) / len(head)


def _adaptive_tokens(run: RunData, ids: Sequence[str], designs: Sequence[TwoStage], verifiers: Sequence[str]
                     ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Per problem: the prompt's tokens, the generated tokens per sample and each verifier's tokens
    per sample, both estimated under the design (``stage_mean``), from the rows."""
    store = RunStore(run.path)
    samples = store.samples.read()
    keys: dict[str, list[tuple[str, int]]] = {}
    for key in sorted(samples):
        keys.setdefault(key[0], []).append(key)
    prompt, gen = np.zeros(len(ids)), np.zeros(len(ids))
    per_verifier = {name: np.full(len(ids), np.nan) for name in verifiers}
    scores = {name: latest_scores(store, name) for name in verifiers}
    for i, (pid, d) in enumerate(zip(ids, designs, strict=True)):
        rows = [samples[k] for k in keys.get(pid, [])]
        if any(s.prompt_tokens is None for s in rows):
            raise no_prompt_counts(run)
        if len(rows) < d.pilot:
            raise BonbenchError(f"{run.path}: problem {pid!r} has {len(rows)} samples, fewer than its pilot of "
                                f"{d.pilot}; run `bonbench run` again with the same flags")
        prompt[i] = math.fsum(float(s.prompt_tokens or 0) for s in rows) / len(rows)
        gen[i] = stage_mean(d, [float(s.n_tokens) for s in rows])
        for name in verifiers:
            spent = [scores[name].get(k) for k in keys[pid]]
            if any(sc is None for sc in spent):
                continue  # a verifier that did not score every sample: recipe leaves its strategies out
            if any(sc.tokens is None for sc in spent if sc is not None):
                raise BonbenchError(f"{run.path}: verifier {name!r} recorded no token counts, so its cost is unknown; "
                                    f"score the run again with `bonbench score {run.path} --verifier {name}`")
            per_verifier[name][i] = stage_mean(d, [float(sc.tokens or 0) for sc in spent if sc is not None])
    return prompt, gen, per_verifier
