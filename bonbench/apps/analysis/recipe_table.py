"""One run's recipe table: for every problem of the run, the exact value of each rule at each N of
the grid, and the measured token counts its cost is made of. ``bonbench recipe`` builds its
strategies from these tables (``recipe``).

Reading a big run's rows and computing its estimators takes most of a recipe's time, and a table
depends only on the run's files, so ``run_table`` keeps each table under ``$BONBENCH_CACHE/recipe``
(``~/.cache/bonbench/recipe``), named by the identity of the files it was computed from (path, size,
modification time and inode of config.json, metrics.json, samples.jsonl, every grades and scores
file, and a search run's ledger or an adaptive run's adaptive.json), the bonbench version, the
Best-of-Majority share, the rules computed (``TableSpec``) and the run's seed. A rescored, regraded or
resumed run has other files and gets a new table. A cache that cannot be written costs only the
speed (one warning). Nothing is written into a run directory. The rows are read by ``recipe_rows``
(the run's ``columns.npz`` while it is current, else the one row reader, exactly as the records
would read them) where it can, else record by record. The tables of search runs and adaptive
runs, whose samples are not n exchangeable draws per problem, are computed by ``recipe_designs``
and kept here alike.

What it does not do: choose, bootstrap or convert tokens to FLOPs (``recipe``).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bonbench import __version__
from bonbench.api.metric.values import curve_values
from bonbench.apps.analysis.htmlparts import powers_of_two
from bonbench.apps.analysis.recipe_rows import fast_inputs
from bonbench.apps.analysis.run_rows import outcomes_by_verifier
from bonbench.apps.analysis.rundir import RunData
from bonbench.core.cache import cache_dir
from bonbench.core.errors import BonbenchError
from bonbench.pipeline.ledger import ProblemCost, compute_ledger

FORMAT = 3
ORACLE_VERIFIERS = ("oracle",)  # reads the gold answer: an upper bound, not a deployable verifier


@dataclass(frozen=True)
class TableSpec:
    """What a table holds beyond what the run's files decide: the Best-of-Majority vote share and the
    rules computed (``single`` and the oracle's ``pass`` always; wmaj and bom cost about 2 ms a
    problem each at n = 64, docs/recipe.md)."""

    bom_share: float
    rules: tuple[str, ...]  # of recipe.RULES


@dataclass(frozen=True)
class RunTable:
    """A run's per-problem values and token counts (module docstring), problems in id order.

    ``values[(rule, verifier)]`` is ``(Ns, [P, len(Ns)] values)``: ``pass`` (the oracle's bound) and
    ``single`` (N = 1) without a verifier, ``maj``, and ``bon``, ``wmaj``, ``bom`` under each verifier.
    ``verifier_tokens[name]`` is NaN where the verifier scored none of a problem's samples."""

    ids: tuple[str, ...]
    n: int  # the smallest per-problem n: the grid's top
    prompt: np.ndarray  # the prompt's tokens (the mean of its samples' prompt_tokens)
    gen: np.ndarray  # mean generated tokens per sample
    verifier_tokens: Mapping[str, np.ndarray]
    values: Mapping[tuple[str, str | None], tuple[tuple[int, ...], np.ndarray]]
    notes: tuple[str, ...]
    # a search run: the verifier that ranked its partial solutions, and its tokens per search, which
    # every rule pays (``recipe_designs.search_table``); None for a sampling run
    search_scorer: str | None = None
    search_tokens: np.ndarray | None = None


def deployable_verifiers(run: RunData) -> list[str]:
    """The verifiers the run was scored with (config.json's list; not the oracle, not the
    log-probability scorers of a KL)."""
    files = run.verifiers()
    named = [v for v in run.scored_with if v in files] if run.scored_with else [f for f in files if not f.startswith("lp-")]
    return [v for v in named if v not in ORACLE_VERIFIERS]


def grid(n: int) -> list[int]:
    """The Ns a run's strategies take: the powers of two up to n, and n."""
    return sorted(set(powers_of_two(n)) | {n})


def no_prompt_counts(run: RunData) -> BonbenchError:
    """The line for a run whose samples carry no prompt token counts."""
    return BonbenchError(f"{run.path}: its samples carry no prompt token counts (prompt_tokens; imported files "
                         "and runs sampled before bonbench counted them), so their cost is unknown; sample the "
                         f"run again with `bonbench run --task {run.task} --model {run.model}` or leave it out")


def verifier_tokens(run: RunData, problem: ProblemCost, name: str) -> float | None:
    """The tokens verifier ``name`` read per sample of ``problem`` (its ledger row), None where it
    scored none; a row without token counts is one error naming the rescoring that records them."""
    cost = problem.verifier(name)
    if cost is None:
        return None
    if cost.tokens is None:
        raise BonbenchError(f"{run.path}: verifier {name!r} recorded no token counts, so its cost is unknown; "
                            f"score the run again with `bonbench score {run.path} --verifier {name}`")
    return cost.tokens / cost.samples


def _tokens(run: RunData, verifiers: list[str]) -> tuple[dict[str, tuple[float, float]], dict[str, dict[str, float]]]:
    """problem -> (prompt tokens, mean generated tokens per sample), and verifier -> problem -> its
    mean tokens per scored sample; one line when a count the cost needs is missing."""
    ledger = compute_ledger(run.path)
    policy: dict[str, tuple[float, float]] = {}
    for p in ledger.problems:
        if p.prompt_tokens is None:
            raise no_prompt_counts(run)
        policy[p.problem_id] = (p.prompt_tokens / p.samples, p.generated_tokens / p.samples)
    per_verifier: dict[str, dict[str, float]] = {}
    for name in verifiers:
        per: dict[str, float] = {}
        for p in ledger.problems:
            tokens = verifier_tokens(run, p, name)
            if tokens is not None:
                per[p.problem_id] = tokens
        per_verifier[name] = per
    return policy, per_verifier


def compute_table(run: RunData, spec: TableSpec) -> RunTable:
    """The table of ``run`` from its rows (no cache)."""
    verifiers = deployable_verifiers(run)
    fast = fast_inputs(run, verifiers)
    if fast is None:  # rows in another layout, a torn last line, a count missing: read record by record
        policy, verifier_tokens = _tokens(run, verifiers)
        by_verifier = outcomes_by_verifier(run, verifiers)
    else:
        policy, verifier_tokens, by_verifier = fast
    plain = by_verifier[None]
    ids = tuple(o.problem_id for o in plain)
    missing = [pid for pid in ids if pid not in policy]
    if missing:
        raise BonbenchError(f"{run.path}: problem {missing[0]!r} is graded but has no sample rows; rerun "
                            "`bonbench run` with the same settings")
    n = min(len(o.correct) for o in plain)
    ks = grid(n)
    multi = tuple(k for k in ks if k >= 2)
    values: dict[tuple[str, str | None], tuple[tuple[int, ...], np.ndarray]] = {}
    notes: list[str] = []
    answers = any(a is not None for o in plain for a in o.answers)
    todo: list[tuple[str, str | None, str, tuple[int, ...]]] = [("pass", None, "pass", tuple(ks)), ("single", None, "pass", (1,))]
    todo += [("maj", None, "maj", multi)] if answers else []
    for name in verifiers:
        todo += [("bon", name, "bon", multi)] + ([("wmaj", name, "wmaj", multi),
                                                  ("bom", name, f"bom:{spec.bom_share:g}", multi)] if answers else [])
    todo = [t for t in todo if t[0] == "pass" or t[0] in spec.rules]
    for rule, verifier, key, Ns in todo:
        try:
            values[(rule, verifier)] = (Ns, curve_values(by_verifier[verifier], key, Ns, seed=run.seed))
        except BonbenchError as exc:  # e.g. wmaj on negative scores: this rule does not apply to the run
            notes.append(f"{run.path}: {rule} under {verifier} left out ({exc})")
    tokens = {name: np.array([per.get(pid, np.nan) for pid in ids]) for name, per in verifier_tokens.items()}
    return RunTable(ids, n, np.array([policy[pid][0] for pid in ids]), np.array([policy[pid][1] for pid in ids]),
                    tokens, values, tuple(notes))


def table_key(run: RunData, spec: TableSpec) -> str:
    """The name of ``run``'s kept table: the identity of every file it is computed from (module docstring)."""
    files = [run.path / "config.json", run.path / "metrics.json", run.path / "samples.jsonl",
             *sorted((run.path / "grades").glob("*.jsonl")), *sorted((run.path / "scores").glob("*.jsonl")),
             *(f for f in (run.path / "search" / "ledger.jsonl", run.path / "adaptive.json") if f.is_file())]
    stats = []
    for f in files:
        st = f.stat()
        stats.append([f.name, f.parent.name, st.st_size, st.st_mtime_ns, st.st_ino])
    doc = [FORMAT, __version__, str(run.path.resolve()), spec.bom_share, sorted(spec.rules), run.seed, stats]
    return hashlib.sha256(json.dumps(doc).encode()).hexdigest()[:32]


def _save(table: RunTable, path: Path) -> None:
    keys = list(table.values)
    meta = {"ids": list(table.ids), "n": table.n, "verifiers": list(table.verifier_tokens),
            "values": [[rule, verifier, list(table.values[(rule, verifier)][0])] for rule, verifier in keys],
            "notes": list(table.notes), "search_scorer": table.search_scorer}
    arrays = {"meta": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), "prompt": table.prompt, "gen": table.gen}
    if table.search_tokens is not None:
        arrays["search_tokens"] = table.search_tokens
    arrays.update({f"v{i}": table.verifier_tokens[name] for i, name in enumerate(table.verifier_tokens)})
    arrays.update({f"m{i}": table.values[key][1] for i, key in enumerate(keys)})
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds as one array-like: each is one
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _load(path: Path) -> RunTable:
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(z["meta"].tobytes().decode())
        values = {(rule, verifier): (tuple(ks), z[f"m{i}"]) for i, (rule, verifier, ks) in enumerate(meta["values"])}
        return RunTable(tuple(meta["ids"]), int(meta["n"]), z["prompt"], z["gen"],
                        {name: z[f"v{i}"] for i, name in enumerate(meta["verifiers"])}, values, tuple(meta["notes"]),
                        meta["search_scorer"], z["search_tokens"] if "search_tokens" in z.files else None)


def kept_path(run: RunData, spec: TableSpec) -> Path:
    """Where ``run``'s table is kept (module docstring)."""
    return cache_dir("recipe") / f"{table_key(run, spec)}.npz"


def is_kept(run: RunData, spec: TableSpec) -> bool:
    """Whether a table of ``run``'s files as they are now is kept (a damaged one is computed again on reading)."""
    return kept_path(run, spec).is_file()


def run_table(run: RunData, spec: TableSpec, compute: Callable[[RunData, TableSpec], RunTable] | None = None) -> RunTable:
    """``run``'s table: the kept one when its files are the same, else computed (by ``compute``,
    default ``compute_table``: a sampling run's) and kept."""
    path = kept_path(run, spec)
    if path.is_file():
        try:
            return _load(path)
        except (OSError, ValueError, KeyError):  # a damaged or foreign file: computed again below
            pass
    table = (compute or compute_table)(run, spec)
    try:
        _save(table, path)
    except OSError as exc:
        warnings.warn(f"cannot keep the recipe table of {run.path} in {path.parent} ({exc.strerror or exc}); "
                      "the next recipe computes it again", stacklevel=2)
    return table
