"""Sharded runs that are not merged yet: what the viewer says of them.

A run made with ``--shard i/n`` (``bonbench.pipeline.shard``) writes each shard's files under
``<run>/shards/<i>-of-<n>/`` and nothing at the run's top until ``bonbench merge`` folds them in and
scores the run, so before the merge it is no run (``store.is_run_dir``) and its problems cannot be
shown as one run's. ``find_sharded`` finds such run directories under the folders given, and the
runs page lists them: task, model and n from the shards' ``shard.json``, each shard's slice, the
bytes of samples it holds so far, whether it is scored (its ``shard-metrics.json``: one shard's
metrics alone, shown as such), and the command that merges them. Once merged, the run shows as any
other. Files linked outside the folders given are not read.

What it does not do: merge, score, or read a shard's rows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bonbench.api.metric.grammar import metric_sort_key
from bonbench.pipeline.shard import RECORD, SHARDS_DIR

_FOLDER = re.compile(r"(\d+)-of-(\d+)")


@dataclass(frozen=True)
class ShardView:
    """One shard folder of a run not merged yet."""

    label: str  # "2/4"
    problems: int | None  # the problems of its slice (shard.json), None when it does not say
    sample_bytes: int  # the size of its samples.jsonl so far
    metrics: Sequence[tuple[str, float]]  # its shard-metrics.json's values (empty: not scored yet)


@dataclass(frozen=True)
class ShardedRun:
    """A run directory that holds shards and no run of its own yet."""

    path: Path
    task: str
    model: str
    n: Any
    shards: Sequence[ShardView]

    @property
    def count(self) -> int:
        """n of the split (``*-of-n``) of its first shard."""
        return int(self.shards[0].label.split("/")[1])


def _json(path: Path, allowed: Path) -> dict[str, Any]:
    if not path.is_file() or not path.resolve().is_relative_to(allowed):
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _shard(folder: Path, allowed: Path) -> ShardView | None:
    found = _FOLDER.fullmatch(folder.name)
    doc = _json(folder / RECORD, allowed)
    if found is None or not doc:
        return None
    samples = folder / "samples.jsonl"
    size = samples.stat().st_size if samples.is_file() and samples.resolve().is_relative_to(allowed) else 0
    metrics = _json(folder / "shard-metrics.json", allowed).get("metrics") or {}
    values = [(name, float(m["value"])) for name, m in metrics.items()
              if isinstance(m, Mapping) and isinstance(m.get("value"), (int, float)) and "[" not in name]
    problems = (doc.get("shard") or {}).get("problems")
    return ShardView(f"{found.group(1)}/{found.group(2)}", problems if isinstance(problems, int) else None, size,
                     sorted(values, key=lambda v: metric_sort_key(v[0])))


def find_sharded(folders: Sequence[Path]) -> list[ShardedRun]:
    """Every run directory under ``folders`` whose shards are not merged yet (no config.json of its own)."""
    out: list[ShardedRun] = []
    seen: set[Path] = set()
    for folder in map(Path, folders):
        if not folder.is_dir():
            continue
        allowed = folder.resolve()
        for record in sorted(folder.rglob(f"{SHARDS_DIR}/*/{RECORD}")):
            run = record.parent.parent.parent
            if run.resolve() in seen or (run / "config.json").is_file() or not run.resolve().is_relative_to(allowed):
                continue
            seen.add(run.resolve())
            shards = [s for f in sorted((run / SHARDS_DIR).iterdir()) if f.is_dir() and (s := _shard(f, allowed))]
            if not shards:
                continue
            cfg = _json(run / SHARDS_DIR / shards[0].label.replace("/", "-of-") / RECORD, allowed).get("config") or {}
            out.append(ShardedRun(run, str(cfg.get("task", run.parent.parent.name)), str(cfg.get("model", run.parent.name)),
                                  cfg.get("n", ""), shards))
    return out
