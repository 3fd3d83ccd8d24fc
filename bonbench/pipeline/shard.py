"""Sharded runs: ``--shard i/n`` samples, grades and verifies one slice of a run's problems into files
of its own under the run directory, and ``merge_rows`` folds every shard's rows into the run's files.

The slice is by position in the run's problem selection (the task's canonical order, after ``-T``
filters and ``--limit``): shard ``i`` of ``n`` takes positions ``i-1, i-1+n, i-1+2n, ...``, the strided
split of ``torch.utils.data.DistributedSampler`` without its padding. Positions, not a hash of the
problem id, because the slices then differ in size by at most one problem (a hash split of 500
problems into 8 is off by about 20% between shards) and a dataset ordered by subject or level is
spread over every shard instead of giving one shard all the hard problems. It depends on nothing but
the selection, so every machine computes the same slice, and since ``--limit`` keeps a prefix, a
larger limit leaves each earlier problem in its shard.

A shard writes only under ``<run>/shards/<i>-of-<n>/`` (``ShardStore``): ``shard.json`` (its config and
slice), ``samples.jsonl``, ``grades/``, ``scores/``, a search run's ``search/`` (trees, ledger, the
journals of its searches in flight) and ``shard-metrics.json`` (labelled as one shard's metrics).
No two shards write one file, so shards on several hosts of one shared filesystem
never interleave appends, and no shard writes the run's ``config.json`` or ``metrics.json``: a
run directory that has only shards is no run yet (``store.is_run_dir``). A shard reads the run's
own files as well, so that rows already merged (or sampled by an unsharded run) are not sampled,
graded or scored again: growing n after a merge samples only the difference.

This module does not score runs or parse flags: ``runner.merge`` checks coverage with
``coverage`` and ``read_records``, calls ``merge_rows``, then scores the run as an unsharded run.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic

from bonbench.core.errors import BonbenchError
from bonbench.core.records import Grade, Problem, Sample, Score, from_row
from bonbench.core.store import JsonlTable, R, RunStore, atomic_write_json, read_run_json
from bonbench.pipeline.prepared import problem_set_id
from bonbench.pipeline.search_rows import ledger_table, tree_table

SHARDS_DIR = "shards"
# a search run's rows beside its samples (pipeline.search_rows), merged like them; its journals are of
# searches in flight, and a finished shard has none
SEARCH_TABLES: dict[str, Callable[[Path], JsonlTable[Any]]] = {"search/trees.jsonl": tree_table,
                                                               "search/ledger.jsonl": ledger_table}
RECORD = "shard.json"
_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
_FOLDER = re.compile(r"^(\d+)-of-(\d+)$")


@dataclass(frozen=True, order=True)
class ShardSpec:
    """Shard ``index`` of ``count``, numbered from 1 (``--shard 3/8``)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1:
            raise BonbenchError(f"--shard {self.index}/{self.count}: n must be at least 1, as in --shard 3/8")
        if not 1 <= self.index <= self.count:
            hint = (f" (for `sbatch --array=0-{self.count - 1}` pass --shard $((SLURM_ARRAY_TASK_ID + 1))/{self.count})"
                    if self.index == 0 else "")
            raise BonbenchError(f"--shard {self.index}/{self.count}: shards are numbered from 1, so i must be in "
                                f"1..{self.count}{hint}")

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def folder(self) -> str:
        return f"{self.index}-of-{self.count}"

    def select(self, problems: Sequence[Problem]) -> tuple[Problem, ...]:
        """This shard's problems: positions index-1, index-1+count, ... of ``problems``."""
        return tuple(problems[self.index - 1::self.count])


def parse_shard(text: str) -> ShardSpec:
    """``"3/8"`` -> ``ShardSpec(3, 8)``; anything else is a one-line BonbenchError."""
    m = _SPEC.match(str(text))
    if not m:
        raise BonbenchError(f"--shard takes i/n with 1 <= i <= n, such as 3/8 (in a Slurm array: "
                            f"--shard $SLURM_ARRAY_TASK_ID/8 with --array=1-8); got {text!r}")
    return ShardSpec(int(m.group(1)), int(m.group(2)))


def check_fits(spec: ShardSpec, problems: Sequence[Problem]) -> None:
    """Refuse more shards than problems: an empty shard would be a Slurm task with nothing to do."""
    if spec.count > len(problems):
        raise BonbenchError(f"--shard {spec.label}: only {len(problems)} problems are selected; use at most "
                            f"{len(problems)} shards")


# ------------------------------------------------------------------------------- the shard's files


class UnionTable(Generic[R]):
    """A shard's view of one table: the run's rows, then the shard's own; appends go to the shard's.

    ``read`` keeps the first accepted row of a key, as ``JsonlTable.read`` does, so a row already
    merged into the run wins over the shard's copy of it.
    """

    def __init__(self, run: JsonlTable[R], own: JsonlTable[R]) -> None:
        self.run: JsonlTable[R] = run
        self.own: JsonlTable[R] = own
        self.path = own.path
        self.cls: type[R] = own.cls

    def read(self, where: Callable[[R], bool] | None = None) -> dict[tuple[str, int], R]:
        out = self.run.read(where)
        for key, rec in self.own.read(where).items():
            out.setdefault(key, rec)
        return out

    def append(self, records: Iterable[R]) -> int:
        return self.own.append(records)


class ShardStore(RunStore):
    """The files of one shard: ``root`` is ``<run>/shards/<i>-of-<n>``, ``run_root`` the run directory.

    Everything the pipeline writes through a store lands under ``root``: the config record as
    ``shard.json`` and the metrics as ``shard-metrics.json`` / ``shard-curves.json``, names that
    ``store.is_run_dir`` does not take for a run.
    """

    def __init__(self, run_root: Path, spec: ShardSpec) -> None:
        self.run_root = Path(run_root)
        self.spec = spec
        super().__init__(self.run_root / SHARDS_DIR / spec.folder)
        self._run = RunStore(self.run_root)

    @property
    def results_root(self) -> Path:
        return self._run.results_root

    @property
    def config_path(self) -> Path:
        return self.root / RECORD

    @property
    def metrics_path(self) -> Path:
        return self.root / "shard-metrics.json"

    @property
    def curves_path(self) -> Path:
        return self.root / "shard-curves.json"

    @property
    # a view over two tables, not a JsonlTable: it has read and append, not rows (hence the ignores)
    def samples(self) -> UnionTable[Sample]:  # type: ignore[override]  # see above
        return UnionTable(self._run.samples, super().samples)

    def grades(self, grader: str) -> UnionTable[Grade]:  # type: ignore[override]  # see above
        return UnionTable(self._run.grades(grader), super().grades(grader))

    def scores(self, verifier: str) -> UnionTable[Score]:  # type: ignore[override]  # see above
        return UnionTable(self._run.scores(verifier), super().scores(verifier))

    def write_metrics(self, metrics: dict[str, Any]) -> None:
        atomic_write_json(self.metrics_path, {**metrics, "shard": {
            "index": self.spec.index, "count": self.spec.count, "label": self.spec.label,
            "note": f"metrics of shard {self.spec.label} alone; `bonbench merge {self.run_root}` writes the run's"}})


def record_facts(spec: ShardSpec, selection: Sequence[Problem]) -> dict[str, Any]:
    """What ``shard.json`` records under ``shard``: which slice of which selection this shard holds."""
    return {"index": spec.index, "count": spec.count, "problems": len(spec.select(selection)),
            "selected": len(selection), "selection": problem_set_id(selection)}


# -------------------------------------------------------------------------------------- merging


@dataclass(frozen=True)
class ShardRecord:
    """One shard folder as found on disk: its spec and its ``shard.json``."""

    spec: ShardSpec
    root: Path
    doc: Mapping[str, Any]


def has_shards(run_root: Path) -> bool:
    return (Path(run_root) / SHARDS_DIR).is_dir()


def read_records(run_root: Path) -> list[ShardRecord]:
    """Every shard folder of the run with its ``shard.json``, checked to be of one split and one config.

    A folder without ``shard.json`` (a shard killed before it started) holds nothing and is skipped.
    """
    run_root = Path(run_root)
    records = []
    for folder in sorted((run_root / SHARDS_DIR).glob("*")):
        m = _FOLDER.match(folder.name)
        if not m or not (folder / RECORD).is_file():
            continue
        records.append(ShardRecord(ShardSpec(int(m.group(1)), int(m.group(2))), folder, read_run_json(folder / RECORD)))
    if not records:
        raise BonbenchError(f"{run_root} has no shards (no {SHARDS_DIR}/<i>-of-<n>/{RECORD}); run "
                            "`bonbench run ... --shard i/n` first, or pass the run directory it printed")
    counts = sorted({r.spec.count for r in records})
    if len(counts) > 1:
        raise BonbenchError(f"{run_root / SHARDS_DIR} holds shards of {len(counts)} splits "
                            f"({', '.join(f'*-of-{c}' for c in counts)}); a merge takes one split: merge it, then delete "
                            "the folders of the other before merging again")
    first = records[0]
    for r in records:
        for what, key in (("--strategy", "strategy"), ("-S", "strategy_options")):  # hashed, but said as such
            if r.doc["config"].get(key) != first.doc["config"].get(key):
                raise BonbenchError(
                    f"shards {first.spec.label} and {r.spec.label} are searches of different {what} "
                    f"({first.doc['config'].get(key)!r} vs {r.doc['config'].get(key)!r}), which are different runs: "
                    f"move shard {r.spec.label} to the run directory its command printed, or delete it")
        if r.doc.get("hash") != run_root.name:
            raise BonbenchError(f"shard {r.spec.label} in {r.root} belongs to run {r.doc.get('hash')!r}, not "
                                f"{run_root.name!r}; move it to its own run directory or delete it")
        for what, key in (("--n", "n"), ("--metric", "metrics"), ("--verifier", "verifier"), ("--limit", "limit"),
                          ("-T", "task_args"), ("--seeds", "seeds")):
            if r.doc["config"].get(key) != first.doc["config"].get(key):
                raise BonbenchError(
                    f"shards {first.spec.label} and {r.spec.label} were run with different {what} "
                    f"({first.doc['config'].get(key)!r} vs {r.doc['config'].get(key)!r}); rerun the older shards "
                    "with the flags of the newer, then merge again")
        if r.doc.get("shard", {}).get("selection") != first.doc.get("shard", {}).get("selection"):
            raise BonbenchError(f"shards {first.spec.label} and {r.spec.label} hold slices of different problem "
                                "selections (the task's data changed between them); rerun every shard, then merge")
    return records


@dataclass(frozen=True)
class Coverage:
    """How much of one shard's slice has all n samples (in the shard's files or already merged)."""

    spec: ShardSpec
    problems: tuple[Problem, ...]
    complete: tuple[Problem, ...]

    @property
    def done(self) -> bool:
        return len(self.complete) == len(self.problems)


def coverage(run_root: Path, selection: Sequence[Problem], count: int, n: int) -> list[Coverage]:
    """For each shard 1..count, which problems of its slice have every sample index 0..n-1, in the
    shard's files or the run's (read once, not once per shard)."""
    def wanted(s: Sample) -> bool:
        return s.sample_idx < n

    merged = set(RunStore(Path(run_root)).samples.read(wanted))
    counts = Counter(pid for pid, _ in merged)
    out = []
    for index in range(1, count + 1):
        store = ShardStore(run_root, ShardSpec(index, count))
        problems = store.spec.select(selection)
        own = Counter(pid for pid, idx in RunStore(store.root).samples.read(wanted) if (pid, idx) not in merged)
        out.append(Coverage(store.spec, problems, tuple(p for p in problems if counts[p.id] + own[p.id] == n)))
    return out


def _identity(row: Sample | Grade | Score) -> tuple[Any, ...]:
    """What makes two rows the same row: the key, plus the version a grade or score was made under
    (rows of another grader version or verifier fingerprint are different rows of the same key)."""
    if isinstance(row, Grade):
        return (row.key, row.grader_version, row.grading_id)
    if isinstance(row, Score):
        return (row.key, row.verifier_version, row.verifier_fingerprint)
    return (row.key,)


def _merge_tables(tables: Sequence[JsonlTable[Any]], into: JsonlTable[Any]) -> int:
    """Append the rows of ``tables`` that ``into`` lacks (by ``_identity``), shard by shard; returns how many."""
    seen = {_identity(r) for r in _all_rows(into)}
    count = 0
    for table in tables:
        new = []
        for rec in _all_rows(table):
            ident = _identity(rec)
            if ident not in seen:
                seen.add(ident)
                new.append(rec)
        count += into.append(new) if new else 0
    return count


def _all_rows(table: JsonlTable[Any]) -> list[Any]:
    """Every row of ``table`` (not only the first per key: grades of two versions are both kept)."""
    return [from_row(table.cls, row) for row in table.rows()]


def merge_rows(run_root: Path, records: Sequence[ShardRecord]) -> dict[str, int]:
    """Fold every shard's rows into the run's files; returns rows appended per file.

    Idempotent (a row already in the run's file is not appended again) and crash-safe: the run's
    files are append-only, so a merge killed at any moment and run again appends what is missing.
    Scores and grades are merged before samples, so that samples present in the run's file mean
    their grades and scores are there too (``unmerged`` looks at samples only).
    """
    run = RunStore(Path(run_root))
    shards = [RunStore(r.root) for r in records]  # each shard's own files, without the run's (no UnionTable)
    names = sorted({p.relative_to(s.root).as_posix() for s in shards for folder in ("scores", "grades")
                    for p in (s.root / folder).glob("*.jsonl")}, key=lambda n: (not n.startswith("scores/"), n))
    added: dict[str, int] = {}
    into: JsonlTable[Any]  # samples, grades or scores
    mine: list[JsonlTable[Any]]
    for name in [*names, *SEARCH_TABLES, "samples.jsonl"]:
        if name == "samples.jsonl":
            into, mine = run.samples, [s.samples for s in shards]
        elif name in SEARCH_TABLES:  # a search run's trees and ledgers, before its samples (as pipeline.search writes them)
            into, mine = SEARCH_TABLES[name](run.root), [SEARCH_TABLES[name](s.root) for s in shards]
            if not any(t.path.exists() for t in mine):
                continue
        else:
            folder, stem = name.split("/")[0], name.split("/")[1][: -len(".jsonl")]
            into = run.scores(stem) if folder == "scores" else run.grades(stem)
            mine = [s.scores(stem) if folder == "scores" else s.grades(stem) for s in shards]
        added[name] = _merge_tables(mine, into)
    return added


def unmerged(run_root: Path) -> list[ShardSpec]:
    """The shards holding samples that the run's ``samples.jsonl`` lacks (a merge still to do)."""
    run_root = Path(run_root)
    have = set(RunStore(run_root).samples.read())
    out = []
    for folder in sorted((run_root / SHARDS_DIR).glob("*")):
        m = _FOLDER.match(folder.name)
        if m and not set(RunStore(folder).samples.read()) <= have:
            out.append(ShardSpec(int(m.group(1)), int(m.group(2))))
    return out


def check_merged(run_root: Path) -> None:
    """Raise, naming ``bonbench merge``, when the run's shards hold samples its own files lack."""
    run_root = Path(run_root)
    if not has_shards(run_root):
        return
    if not (run_root / "config.json").is_file():
        raise BonbenchError(f"{run_root} is a sharded run that has not been merged yet: run `bonbench merge {run_root}`")
    todo = unmerged(run_root)
    if todo:
        raise BonbenchError(f"shard {todo[0].label} of {run_root} holds samples not merged into the run yet: run "
                            f"`bonbench merge {run_root}` first")


def rerun_command(config: Mapping[str, Any], spec: ShardSpec, out: Path, task_max_tokens: int | None = None) -> str:
    """The ``bonbench run`` command that (re)runs shard ``spec`` of a run with this config."""
    parts = ["bonbench run", f"--task {config['task']}", f"--model {config['model']}", f"--backend {config['backend']}"]
    if config.get("metrics"):
        parts.append(f"--metric {','.join(config['metrics'])}")
    parts.append(f"--n {config['n']}")
    if config.get("strategy"):  # a search run: its strategy, every option, and its repetitions
        parts.append(f"--strategy {config['strategy']}")
        parts += [f"-S {key}={value}" for key, value in sorted(dict(config.get("strategy_options") or {}).items())]
        if int(config.get("seeds") or 1) > 1:
            parts.append(f"--seeds {config['seeds']}")
    for key, value in dict(config.get("task_args") or {}).items():
        parts.append(f"-T {key}={value}")
    if config.get("limit") is not None:
        parts.append(f"--limit {config['limit']}")
    if config.get("verifier"):
        parts.append(f"--verifier {config['verifier']}")
    for flag, key, default in (("--temperature", "temperature", 1.0), ("--top-p", "top_p", 1.0), ("--seed", "seed", 0),
                               ("--dtype", "dtype", "bfloat16")):
        if config.get(key, default) != default and config.get(key) != "":
            parts.append(f"{flag} {config[key]}")
    if task_max_tokens is not None and config.get("max_tokens") != task_max_tokens:
        parts.append(f"--max-tokens {config['max_tokens']}")
    parts.append(f"--prompt-style {config.get('prompt_style', 'auto')}")
    if str(out) != "results":
        parts.append(f"--out {out}")
    parts.append(f"--shard {spec.label}")
    return " ".join(parts)
