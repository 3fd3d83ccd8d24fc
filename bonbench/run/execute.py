"""Run a ``Plan``: write config.json, sample what is missing with one engine for the whole plan
(a sweep's runs share it), then grade, verify and score every run, with the comparisons the plan
asks for (``kl``, ``winrate@k``, ``kl_bon@k``; ``bonbench.pipeline.compare``).

This module does not resolve requests (``bonbench.run.plan``, ``bonbench.run.reopen``), parse flags
or print tables. It loads models only to sample and, for ``kl``, to score log-probabilities.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from bonbench.api.metric.kind import metric_kind
from bonbench.api.sampler import SamplingParams
from bonbench.api.think import answer_view, split_think
from bonbench.api.verifier import Verifier
from bonbench.core import ray_cluster
from bonbench.core.config import policy_name
from bonbench.core.errors import BonbenchError
from bonbench.core.records import MetricsPatch
from bonbench.core.registry import load_target
from bonbench.core.store import read_run_json
from bonbench.pipeline import compare, prepared, scoring, search, shard, stages
from bonbench.pipeline.imported import check_complete, imported_record
from bonbench.pipeline.progress import Progress, no_progress
from bonbench.pipeline.shard import ShardStore
from bonbench.plugins.samplers.hf_logprobs import TeacherForcedLogprob, same_tokenizer
from bonbench.run import adaptive
from bonbench.run.reopen import reopen
from bonbench.run.request import Plan, RunResult
from bonbench.run.resolve import build_sampler, build_verifier

STEP_SAMPLER = "bonbench.plugins.samplers.steps:step_sampler"  # imports the transformers backend: loaded when a search runs
STEP_ENGINE_ARGS = "bonbench.plugins.samplers.vllm_steps:step_engine_args"


def execute(p: Plan, progress: Progress = no_progress,
            on_run: Callable[[prepared.PreparedRun], None] | None = None) -> RunResult:
    """Write config.json, sample what is missing (one engine for the whole plan), then grade,
    verify and score every run. ``on_run`` is called before each run's stages (progress labels).

    With ``p.ray`` the cluster is joined first, so an address that does not answer fails before
    anything is written; config.json records the Ray settings (not hashed: they do not change results).
    A shard (``RunRequest.shard``) writes shard.json instead of config.json and its partial metrics
    to shard-metrics.json. An unsharded run refuses a directory whose shards are not merged yet,
    rather than sampling again what the shards hold."""
    if p.ray is not None:
        ray_cluster.connect(p.ray)
    for run in p.runs:
        prepared.open_run(run, _run_facts(p, run) or None)
    if p.imported is not None:
        # an imported run holds exactly its file's samples: store those not stored yet
        for run in p.runs:
            stages.store_samples(run, p.imported.samples, progress)
    elif p.never_sample:
        for run in p.runs:
            check_complete(run)
    elif p.strategy is not None:
        _search_missing(p, progress, on_run)
    elif any(run.cfg.adaptive for run in p.runs):
        adaptive.sample_rounds(p, progress, on_run)
    else:
        _sample_missing(p, progress, on_run)
    if p.scorer is not None and p.verifier:  # the search's scorer selects too: one model, loaded once
        verifier: Verifier | None = answer_view(p.scorer, split_think(p.verifier)[1])
    else:
        verifier = build_verifier(p.verifier, p.data_dir) if p.verifier else None
    docs = []
    for run in p.runs:
        if on_run is not None:
            on_run(run)
        docs.append(stages.evaluate(run, p.specs, verifier, progress, n_boot=p.n_boot, extras=_comparisons(p, run, progress),
                                    facts=p.facts))
    sweep = prepared.write_sweep(p.runs, p.out) if p.is_sweep else None
    return RunResult(runs=p.runs, docs=tuple(docs), sweep_path=sweep)


def _run_facts(p: Plan, run: prepared.PreparedRun) -> dict[str, Any]:
    """config.json's facts beside the config: the shard, the imported file, the Ray settings."""
    extra: dict[str, Any] = {}
    if isinstance(run.store, ShardStore):
        extra["shard"] = shard.record_facts(run.store.spec, prepared.select_problems(run.task, run.cfg.limit))
    elif shard.has_shards(run.store.root) and shard.unmerged(run.store.root):
        raise BonbenchError(f"{run.store.root} has shards whose samples are not merged yet: run `bonbench merge "
                            f"{run.store.root}` first, or give this command the same --shard i/n split")
    if p.imported is not None:
        extra["imported"] = imported_record(p.imported)
    if p.ray is not None:
        extra["ray"] = p.ray.recorded()
    return extra


def _sample_missing(p: Plan, progress: Progress, on_run: Callable[[prepared.PreparedRun], None] | None) -> None:
    """Sample every run's missing keys with one sampler: the plan's given one (its owner closes it),
    else one built by name, only when something is missing."""
    todo = [r for r in p.runs if stages.missing_requests(r, r.cfg.prompt_style)]
    if not todo:
        return
    sampler = p.sampler or build_sampler(p.backend, p.model, seed=p.runs[0].cfg.seed, options=p.options, ray=p.ray)
    try:
        for run in todo:
            if on_run is not None:
                on_run(run)
            stages.sample(run, sampler, progress)
    finally:
        if p.sampler is None:
            sampler.close()


def _search_missing(p: Plan, progress: Progress, on_run: Callable[[prepared.PreparedRun], None] | None) -> None:
    """Run every run's missing searches (``bonbench.pipeline.search``) with one sampler, through the one
    step sampler factory; a backend without step sampling is one line before the first continuation."""
    todo = [r for r in p.runs if search.missing_searches(r)]
    if not todo:
        return
    options = p.options
    if p.backend == "vllm" and p.sampler is None:  # the engine settings a vLLM step sampler needs (prefix caching)
        options = replace(options, **load_target(STEP_ENGINE_ARGS)())
    sampler = p.sampler or build_sampler(p.backend, p.model, seed=p.runs[0].cfg.seed, options=options, ray=p.ray)
    # the verifier as the verify stage will read the candidates: it takes the search's step scores as its rows
    selector = answer_view(p.scorer, split_think(p.verifier)[1]) if p.scorer is not None and p.verifier else None
    try:
        for run in todo:
            cfg = run.cfg
            params = SamplingParams(temperature=cfg.temperature, top_p=cfg.top_p, max_tokens=cfg.max_tokens,
                                    seed=cfg.seed, stop=cfg.stop)
            try:
                steps = load_target(STEP_SAMPLER)(sampler, params, cfg.step_delimiter)
            except ValueError as exc:
                raise BonbenchError(str(exc)) from None
            if on_run is not None:
                on_run(run)
            search.search(run, p.strategy, steps, p.scorer, progress, selector=selector)
    finally:
        if p.sampler is None:
            sampler.close()


def _comparisons(p: Plan, run: prepared.PreparedRun, progress: Progress = no_progress) -> scoring.Extras | None:
    """The metrics of ``bonbench.pipeline.compare`` this plan asks for, as the ``extras`` of ``stages.evaluate``:
    ``kl`` (with --ref-model), ``winrate`` / ``winrate@k``, and on reward-judged tasks ``kl_bon@k``
    beside every metric whose kind says so (``selection_kl``: max@k, the reward of that selection; to the
    reference policy with --ref-model, else to the run's own policy)."""
    bon_ks = sorted({s.k for s in p.specs if metric_kind(s.kind).selection_kl and s.k is not None}
                    ) if run.task.judged_by == "reward" else []
    if p.ref_model is None and run.store.metrics_path.exists():
        # a rescore without --ref-model keeps kl_bon@k measured against a reference model earlier
        # rather than replacing it with the (weaker) KL to the run's own policy
        kept = read_run_json(run.store.metrics_path).get("metrics", {})
        bon_ks = [k for k in bon_ks if "reference" not in kept.get("kl", {}) or f"kl_bon@{k}" not in kept]
    if p.ref_model is None and not p.winrate_ks and not bon_ks:
        return None

    def extras(samples: dict[tuple[str, int], Any], grades: dict[tuple[str, int], Any]) -> MetricsPatch:
        patch, ratios = MetricsPatch(), None
        if p.ref_model is not None:
            policy, reference = _logprob_scorers(p, run)
            ratios = compare.log_ratios(run, samples, policy, reference, progress)
            patch += compare.kl(run, ratios, policy=policy.name, reference=p.ref_model.name, n_boot=p.n_boot)
        if p.winrate_ks:
            if p.ref_run is not None:
                other = reopen(p.ref_run, data_dir=p.data_dir).runs[0]
                comparison, against = compare.run_rewards(run, other), f"run {other.run_hash}"
            else:
                comparison, against = compare.reference_rewards(run), "reference answers"
            patch += compare.winrates(run, grades, comparison, p.winrate_ks, against, n_boot=p.n_boot)
        if bon_ks:
            ref_name = p.ref_model.name if p.ref_model is not None else policy_name(run.cfg.model, run.cfg.temperature,
                                                                                     run.cfg.top_p)
            patch += compare.bon_kls(run, grades, bon_ks, ratios, ref_name, n_boot=p.n_boot)
        return patch

    return extras


def _logprob_scorers(p: Plan, run: prepared.PreparedRun) -> tuple[Verifier, Verifier]:
    """The run's policy and the reference policy as log-probability scorers of the same tokens."""
    assert p.model is not None and p.ref_model is not None

    def render(problem: Any) -> Any:
        # the settings keep the style as a str (core cannot import api's PromptStyle); planning resolved it
        return run.task.render(problem, run.cfg.prompt_style)  # type: ignore[arg-type]  # to base or chat

    policy = TeacherForcedLogprob(p.model, render, role="policy", temperature=run.cfg.temperature)
    reference = TeacherForcedLogprob(p.ref_model, render, role="ref")
    if not same_tokenizer(policy, reference):
        raise BonbenchError(f"--ref-model {p.ref_model.name!r} has another tokenizer than {p.model.name!r}; kl compares "
                            "log-probabilities of the same tokens, so pick a reference of the same model family")
    return policy, reference
