"""The records of a run as a library call: what is asked (``RunRequest``), what it resolves to
(``Plan``) and what came out (``RunResult``, ``MergeResult``).

Frozen values only: resolving a request is ``bonbench.run.plan``, running a plan
``bonbench.run.execute``, merging shards ``bonbench.run.merge``. The CLI builds a ``RunRequest``
from its flags; this module parses no flags and loads nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from bonbench.core import models, ray_cluster
from bonbench.metrics.estimators import MetricSpec
from bonbench.pipeline.readers import ImportedSamples
from bonbench.pipeline.shard import Coverage, ShardSpec
from bonbench.pipeline.stages import PreparedRun


@dataclass(frozen=True)
class RunRequest:
    """What a user asks for: the flags of ``bonbench run`` (and ``score --samples``) as values.

    ``temperatures`` / ``top_ps`` with several values make a sweep (one run each, one engine).
    ``samples`` imports a samples file instead of sampling (backend ``scripted``). ``engine_args``
    are the backend settings the user gave (``max_model_len``, ``batch_size``, ...), checked against
    the backend's typed options (``sampler.select``). ``n=None`` means the largest k
    (or, for imported samples, every sample the file has).
    """

    task: str
    task_args: Mapping[str, str] = field(default_factory=dict)
    metrics: tuple[str, ...] = ()
    n: int | None = None
    model: str | None = None
    backend: str | None = None
    samples: Path | None = None
    temperatures: tuple[float, ...] = (1.0,)
    top_ps: tuple[float, ...] = (1.0,)
    max_tokens: int | None = None
    seed: int = 0
    prompt_style: str = "auto"
    dtype: str = "bfloat16"
    verifier: str | None = None
    limit: int | None = None
    data_dir: str | None = None
    out: Path = Path("results")
    n_boot: int = 1000
    unsafe_no_sandbox: bool = False
    engine_args: Mapping[str, Any] = field(default_factory=dict)
    reward_model: str | None = None  # the grader of a reward-judged task (its -T reward_model)
    ref_model: str | None = None  # KL of every sample to this reference policy (metric ``kl``)
    ref_run: Path | None = None  # winrate against this run's samples (else the task's reference answers)
    ray: str | None = None  # --ray: "local" (start one here), "auto" or HOST:PORT; None: no Ray
    ray_workers: int | None = None  # --ray-workers: sampling actors (default: one per GPU, else per node)
    shard: ShardSpec | None = None  # run only this slice of the problems, into the run's shards/ folder


@dataclass(frozen=True)
class Plan:
    """Resolved runs (nothing written yet), the metrics to compute and how to sample missing keys."""

    runs: tuple[PreparedRun, ...]
    specs: tuple[MetricSpec, ...]
    verifier: str | None
    backend: str
    n_boot: int
    out: Path
    model: models.ResolvedModel | None = None
    imported: ImportedSamples | None = None
    options: Any = None  # the backend's typed options (select.VLLMOptions / HFOptions / OpenAIOptions); None for scripted
    data_dir: str | None = None  # reward-model verifiers that build themselves read their data here
    ref_model: models.ResolvedModel | None = None  # KL to this reference policy, when asked for
    winrate_ks: tuple[int, ...] = ()  # win rates to compute (k = 1 is ``winrate``)
    ref_run: Path | None = None  # ... against this run's samples, else the task's references
    ray: ray_cluster.RayOptions | None = None  # sample on Ray actors and run code tests as Ray tasks
    facts: Mapping[str, Any] | None = None  # top-level facts for each run's metrics.json (a merge's shards)
    verifier_note: str | None = None  # "verifier: NAME (why)", shown to the user when bon@k is scored
    never_sample: bool = False  # a reopened run: missing samples are an error naming the fix, not drawn

    @property
    def is_sweep(self) -> bool:
        return len(self.runs) > 1


@dataclass(frozen=True)
class RunResult:
    """What ``execute`` produced: one metrics document per run, and the sweep record if any."""

    runs: tuple[PreparedRun, ...]
    docs: tuple[dict[str, Any], ...]
    sweep_path: Path | None = None


@dataclass(frozen=True)
class MergeResult:
    """What ``merge`` did: each shard's coverage, the rows it appended per file, and the scored run."""

    coverage: tuple[Coverage, ...]
    added: Mapping[str, int]
    result: RunResult
