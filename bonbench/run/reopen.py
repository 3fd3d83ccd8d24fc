"""A plan for a run directory that exists: re-grade and re-score its samples, never sample
(``bonbench score RUN_DIR``, a merge's scoring, a ``--ref-run`` comparison, ``eval-verifier``).

The task is rebuilt from config.json through ``bonbench.run.resolve`` (the same grader options as
``bonbench run``) and the metrics are checked by ``bonbench.run.rules``. Nothing is written here;
``bonbench.run.execute`` runs the plan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bonbench.api.metric.grammar import MetricSpec
from bonbench.api.task import Task
from bonbench.core import models, ray_cluster
from bonbench.core.errors import BonbenchError
from bonbench.core.store import RunStore
from bonbench.pipeline import prepared, shard
from bonbench.run import rules
from bonbench.run.request import Plan
from bonbench.run.resolve import check_verifier, load_task, model_path, run_config
from bonbench.run.search_choice import stored_search
from bonbench.run.verifier_choice import choose_verifier, verifier_line


def reopen(run_dir: Path, *, metrics: Sequence[str] = (), n: int | None = None, verifier: str | None = None,
           task_args: Mapping[str, str] | None = None, limit: int | None = None, data_dir: str | None = None,
           n_boot: int = 1000, unsafe_no_sandbox: bool = False, ref_model: str | None = None,
           ref_run: Path | None = None, ray: str | None = None, ray_workers: int | None = None) -> Plan:
    """A plan for an existing run directory: re-grade and re-score its samples, never sample.

    ``task_args`` given now are merged over the saved ones (``timeout_s`` regrades the same
    samples); the directory must still match its config (same task version and settings).
    ``ray`` runs code tests as Ray tasks (as ``RunRequest.ray``).
    A sharded run must be merged first (``merge``): its shards' samples are not the run's yet.
    """
    rules.check_n(n)
    store = RunStore(Path(run_dir))
    shard.check_merged(store.root)
    saved = store.read_config()
    cfg_json = dict(saved["config"])
    merged = {**cfg_json.get("task_args", {}), **dict(task_args or {})}
    rays = ray_cluster.ray_options(ray, ray_workers)
    task = load_task(cfg_json["task"], merged, data_dir=data_dir, out=store.results_root, unsafe=unsafe_no_sandbox, ray=rays)
    imported_run = cfg_json.get("backend") == "scripted"
    if imported_run:
        task = _imported_task(task, saved, store)
    requested, special = rules.split_special(metrics)
    search = stored_search(cfg_json, n)
    if search is None:
        specs = rules.task_metric_specs(task, requested, tuple(cfg_json.get("metrics", ())) or task.default_metrics)
    else:
        specs = rules.search_metric_specs(task, requested or tuple(cfg_json.get("metrics", ())), search.n,
                                          strategy=search.strategy.name, exchangeable=search.exchangeable)
    wks = rules.check_winrate(task, special, ref_run)
    ref = None
    if ref_model is not None or "kl" in special:
        if imported_run:
            raise BonbenchError("kl needs the policy that drew the samples; an imported run has none")
        ref = rules.ref_model(ref_model, special, [float(cfg_json.get("top_p", 1.0))])
    n_run = search.n if search is not None else _reopened_n(cfg_json, specs, n, special, saved.get("imported"))
    chosen, why = choose_verifier(specs, verifier or cfg_json.get("verifier"), task=task.name,
                                  model_fingerprint=cfg_json.get("model_fingerprint"), out=store.results_root,
                                  model=cfg_json.get("model"),
                                  requested_by="--verifier" if verifier else "the verifier this run was scored with")
    check_verifier(chosen, data_dir, task=task.name,
                   model_path=model_path(cfg_json) if chosen and chosen.startswith("learned:") else None)
    cfg = run_config(task, specs, chosen, saved=cfg_json, n=n_run, limit=limit or cfg_json.get("limit"), task_args=merged)
    run = prepared.prepare(task, cfg, store.results_root)
    if run.store.root.resolve() != store.root.resolve():
        raise BonbenchError(f"{store.root} no longer matches its config (task version or settings changed); "
                            "re-run `bonbench run` instead")
    policy = models.resolve_model(cfg.model) if ref is not None else None
    if policy is not None and policy.fingerprint != cfg.model_fingerprint:
        raise BonbenchError(f"model {cfg.model!r} has changed since this run sampled (fingerprint); kl would score other weights")
    return Plan(runs=(run,), specs=specs, verifier=chosen, backend=cfg.backend, n_boot=n_boot, out=store.results_root,
                data_dir=data_dir, verifier_note=verifier_line(chosen, why), never_sample=True,
                model=policy, ref_model=ref, winrate_ks=wks, ref_run=ref_run, ray=rays)


def _imported_task(task: Task, saved: Mapping[str, Any], store: RunStore) -> Task:
    """An imported run covers the problems its file had (recorded when it was imported). Its prompt
    is the other harness's (recorded as unknown, None, since 2026-11-24; runs imported before then
    recorded the task's own id, which their run id hashes): keep what was recorded."""
    imported = saved.get("imported")
    ids = set(imported["counts"]) if imported else {pid for pid, _ in store.samples.read()}
    return dataclasses.replace(task, problems=tuple(p for p in task.problems if p.id in ids),
                               prompt_id=saved["config"].get("prompt_id", task.prompt_id))


def _reopened_n(cfg_json: Mapping[str, Any], specs: Sequence[MetricSpec], n: int | None, special: set[str],
                imported: Mapping[str, Any] | None) -> int:
    """The n a reopened run is scored with, checked against its metrics' k."""
    if cfg_json.get("backend") == "scripted":
        n_run = n or int(cfg_json["n"])
        counts = imported["counts"] if imported else None
        fewest = min(min(c, n_run) for c in counts.values()) if counts else n_run
        rules.check_k_fits(specs, fewest, ", the fewest samples a problem of this imported run has; drop those metrics")
        return n_run
    if rules.is_greedy(float(cfg_json.get("temperature", 1.0))):
        rules.check_greedy(specs, n, special)  # a greedy run has one sample per problem and never more
        return 1
    return rules.resolve_n(specs, n or cfg_json["n"])
