"""``bonbench merge``: combine the shards of a run directory (``bonbench.pipeline.shard``) and score
the run exactly as an unsharded run of the same config.

Checks come first and write nothing; then config.json, the rows the run lacks, and the scores.
Sampling is not done here: a shard that is not finished is an error naming the command that
finishes it (or ``partial`` scores the finished problems).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from bonbench.core.errors import BonbenchError
from bonbench.core.store import RunStore, atomic_write_json
from bonbench.pipeline import prepared, shard
from bonbench.pipeline.progress import Progress, no_progress
from bonbench.run.execute import execute
from bonbench.run.reopen import reopen
from bonbench.run.request import MergeResult
from bonbench.run.resolve import load_task


def merge(run_dir: Path, *, partial: bool = False, data_dir: str | None = None, n_boot: int = 1000,
          unsafe_no_sandbox: bool = False, progress: Progress = no_progress) -> MergeResult:
    """Combine the shards of ``run_dir`` and score it exactly as an unsharded run of the same config.

    Checks first, writing nothing: the shards are of one split and one config (``shard.read_records``)
    and every shard 1..n has all n samples of its slice. Then writes config.json, appends each
    shard's rows the run's files lack (``shard.merge_rows``) and grades / verifies / scores the run
    (rows the shards graded and scored are reused). ``partial`` scores the problems that are
    complete instead of refusing, and says so in metrics.json (``shards.partial``). Running it
    again appends nothing and rewrites the same metrics; a merge killed midway finishes on rerun.
    """
    root = Path(run_dir)
    records = shard.read_records(root)
    first = records[0]
    cfg, count = first.doc["config"], first.spec.count
    store = RunStore(root)
    task = load_task(cfg["task"], cfg.get("task_args") or {}, data_dir=data_dir, out=store.results_root,
                     unsafe=unsafe_no_sandbox)
    selection = prepared.select_problems(task, cfg.get("limit"))
    if prepared.problem_set_id(selection) != first.doc.get("shard", {}).get("selection"):
        raise BonbenchError(f"task {task.name!r} now selects other problems than its shards did (its data changed); "
                            "rerun every shard, then merge")
    # a search run's problem holds n samples per repetition (--seeds)
    covered = tuple(shard.coverage(root, selection, count, int(cfg["n"]) * int(cfg.get("seeds") or 1)))
    missing = [c for c in covered if not c.done]
    if missing and not partial:
        c = missing[0]
        more = (f" (and {len(missing) - 1} more shards: {', '.join(m.spec.label for m in missing[1:])})"
                if len(missing) > 1 else "")
        raise BonbenchError(f"shard {c.spec.label} has {len(c.complete)} of {len(c.problems)} problems sampled{more}: run "
                            f"`{shard.rerun_command(cfg, c.spec, store.results_root, task.max_tokens)}` "
                            "(or pass --partial to score the finished problems)")
    if all(not c.complete for c in covered):
        raise BonbenchError(f"no shard of {root} has finished a problem yet; wait for the shards (or rerun them), then merge")
    _write_merged_config(store, records)
    added = shard.merge_rows(root, records)
    p = reopen(root, data_dir=data_dir, n_boot=n_boot, unsafe_no_sandbox=unsafe_no_sandbox)
    done = {pr.id for c in covered for pr in c.complete}
    run = p.runs[0]
    if missing:
        run = dataclasses.replace(run, problems=tuple(pr for pr in run.problems if pr.id in done))
    facts = {"shards": {"count": count, "merged": [c.spec.label for c in covered if c.done],
                        "missing": [c.spec.label for c in missing], "partial": bool(missing),
                        "n_problems_selected": len(selection)}}
    result = execute(dataclasses.replace(p, runs=(run,), facts=facts), progress)
    return MergeResult(coverage=covered, added=added, result=result)


def _write_merged_config(store: RunStore, records: Sequence[shard.ShardRecord]) -> None:
    """The run's config.json from its shards' record (the same config), keeping what the run had:
    its ``created`` time and every verifier it (or any shard) was scored with."""
    doc = {k: v for k, v in records[0].doc.items() if k != "shard"}
    old = store.read_config() if store.exists() else {}
    verifiers = list(old.get("verifiers", []))
    for r in records:
        verifiers += [v for v in r.doc.get("verifiers", []) if v not in verifiers]
    doc["verifiers"] = verifiers
    doc["created"] = old.get("created", doc.get("created"))
    atomic_write_json(store.config_path, doc)
