"""The one path from names to objects: a task with its grader configured, a verifier, the model a
run samples from, the sampler, and a run's ``RunConfig``.

``bonbench run``, ``score``, ``merge``, the trainer, ``train-verifier`` and ``eval-verifier`` all
build their tasks with ``load_task`` (so every grader caches executions under ``--out``, honours
``--unsafe-no-sandbox`` and runs code tests as Ray tasks with ``--ray``) and their verifiers with
``build_verifier`` (a reward model ``rm:SPEC`` reads its data under ``--data-dir``). This module
builds and checks; it samples nothing, writes nothing and loads no weights (a reward model or a
learned verifier is resolved, and loads when it first scores).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bonbench.api.metric.grammar import MetricSpec
from bonbench.api.sampler import Sampler
from bonbench.api.task import GraderOptions, Task, get_task, task_parameters
from bonbench.api.think import answer_view, split_think
from bonbench.api.verifier import Verifier, get_verifier
from bonbench.core import models, ray_cluster
from bonbench.core.config import RunConfig, saved_settings
from bonbench.core.data import resolve_data_dir
from bonbench.core.errors import BonbenchError
from bonbench.core.served import served_model
from bonbench.plugins.graders.code_cases import ENV_EXEC_CACHE
from bonbench.plugins.graders.ray_sandbox import RaySandbox
from bonbench.plugins.samplers import select
from bonbench.plugins.samplers.ray_backend import RaySampler, SamplerSpec
from bonbench.plugins.verifiers.manifest import model_type
from bonbench.run.request import RunRequest


def grader_options(task_args: Mapping[str, str], out: Path, *, unsafe: bool = False,
                   ray: ray_cluster.RayOptions | None = None) -> GraderOptions:
    """How a grader runs for results under ``out``: executions cached in ``out/cache/exec`` (so
    re-scoring never re-executes; an explicit ``-T exec_cache=...`` or $BONBENCH_EXEC_CACHE wins),
    ``unsafe`` without the sandbox, and with ``ray`` each execution a Ray task (connected only
    when it runs)."""
    explicit = "exec_cache" in task_args or os.environ.get(ENV_EXEC_CACHE)
    return GraderOptions(exec_cache=None if explicit else Path(out) / "cache" / "exec", unsafe=unsafe,
                         executor=RaySandbox(ray) if ray is not None else None)


def load_task(name: str | None, task_args: Mapping[str, Any], *, data_dir: str | None, out: Path | str,
              unsafe: bool = False, ray: ray_cluster.RayOptions | None = None) -> Task:
    """Build task ``name`` (its data under ``data_dir``, resolved as ``--data-dir``) and configure its
    grader (``grader_options``)."""
    if not name:
        raise BonbenchError("--task is required; see `bonbench list tasks`")
    root = resolve_data_dir(data_dir)
    kwargs: dict[str, Any] = dict(task_args)
    if root is not None:
        kwargs["data_dir"] = str(root)
    task = get_task(name, **kwargs)
    return task.with_grader_options(grader_options(task_args, Path(out), unsafe=unsafe, ray=ray))


def build_verifier(name: str, data_dir: str | None) -> Verifier:
    """Verifier ``name``: a registered one, ``rm:SPEC`` (a reward model; its data under ``data_dir``)
    or ``learned:PATH`` (a ``bonbench train-verifier`` folder), reading each completion's final answer
    as its ``think`` options say (``bonbench.api.think``)."""
    base, think = split_think(name)
    return answer_view(bare_verifier(base, data_dir), think)


def bare_verifier(name: str, data_dir: str | None) -> Verifier:
    """Verifier ``name`` (without ``think`` options) as its scheme builds it."""
    return get_verifier(name, **({"data_dir": data_dir} if name.startswith("rm:") else {}))


def check_verifier(name: str | None, data_dir: str | None, *, task: str | None = None,
                   model_path: str | None = None) -> Verifier | None:
    """An unknown verifier fails now, before any sampling (a reward model is resolved, not loaded); a
    learned verifier must have learned from the family of the run's model (``model_path``: its folder)
    and of its task. Returns the verifier (None for ``name`` None)."""
    if name is None:
        return None
    base, think = split_think(name)
    verifier = bare_verifier(base, data_dir)
    if base.startswith("learned:"):
        verifier.check_policy(model_type(model_path) if model_path else None, task)  # type: ignore[attr-defined]  # a LearnedVerifier's
    return answer_view(verifier, think)


def model_path(cfg_json: Mapping[str, Any]) -> str | None:
    """The local folder of a run's model, when it still resolves to the weights that sampled it."""
    if cfg_json.get("backend") in ("scripted", "openai"):
        return None
    try:
        resolved = models.resolve_model(cfg_json["model"])
    except BonbenchError:
        return None
    return resolved.path if resolved.fingerprint == cfg_json.get("model_fingerprint") else None


def with_reward_model(req: RunRequest) -> RunRequest:
    """``--reward-model SPEC`` is the task's ``-T reward_model=SPEC`` (tasks judged by a reward model)."""
    if req.reward_model is None:
        return req
    if "reward_model" not in task_parameters(req.task or ""):
        raise BonbenchError(f"task {req.task!r} is not judged by a reward model, so --reward-model does not apply; "
                            "use --verifier rm:SPEC to pick its bon@k samples with a reward model")
    return dataclasses.replace(req, task_args={**req.task_args, "reward_model": req.reward_model})


def sampled_model(backend: str, name: str | None, options: Any) -> models.ResolvedModel:
    """The model a run samples from: a server's (``openai``: its identity from GET /v1/models), else
    the local or hub model ``name`` resolves to (not loaded)."""
    if backend == "openai":
        return served_model(name, options)
    return models.resolve_model(name)


def given_model(sampler: Sampler) -> models.ResolvedModel:
    """The model of a sampler object handed to the runner, as a resolved model's fields: its name and
    fingerprint (what the run id hashes), its chat style; no folder (``path`` is its name)."""
    return models.ResolvedModel(name=sampler.model, path=sampler.model, is_chat=sampler.is_chat,
                                fingerprint=sampler.fingerprint, revision=None)


def build_sampler(backend: str, model: models.ResolvedModel | None, *, seed: int, options: Any,
                  ray: ray_cluster.RayOptions | None = None) -> Sampler:
    """The sampler of ``backend`` (``ray``: one actor per worker, each with that backend)."""
    if ray is not None:
        assert model is not None, "a sampled run has a resolved model"
        return RaySampler(SamplerSpec(backend, model, seed=seed, options=options), ray)
    return select.get_sampler(backend, model, seed=seed, options=options)


def run_config(task: Task, specs: Sequence[MetricSpec], verifier: str | None, *,
               saved: Mapping[str, Any] | None = None, **settings: Any) -> RunConfig:
    """The one constructor of a run's ``RunConfig``: the task, the metrics and verifier resolved for
    it, over ``saved`` (a reopened run's config.json ``config``) and ``settings`` (what this call
    decides: model, backend, n, sampling settings, ...)."""
    fields = {**saved_settings(saved or {}), **settings}
    return RunConfig(**{**fields, "task": task.name, "metrics": tuple(s.name for s in specs), "verifier": verifier})
