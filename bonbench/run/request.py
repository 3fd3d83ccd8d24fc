"""The records of a run as a library call: what is asked (``RunRequest``), what it resolves to
(``Plan``) and what came out (``RunResult``, ``MergeResult``).

Frozen values only: resolving a request is ``bonbench.run.plan``, running a plan
``bonbench.run.execute``, merging shards ``bonbench.run.merge``. The CLI builds a ``RunRequest``
from its flags; this module parses no flags and loads nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from bonbench.core import flags
from bonbench.core.settings import setting
from bonbench.pipeline.adaptive_spec import AdaptiveSpec, parse_adaptive
from bonbench.pipeline.prepared import PreparedRun
from bonbench.pipeline.shard import Coverage, ShardSpec, parse_shard

if TYPE_CHECKING:  # names of Plan's fields only: `bonbench run --help` (RunRequest's flags) loads none of them
    from bonbench.api.metric.grammar import MetricSpec
    from bonbench.api.sampler import Sampler
    from bonbench.core import models, ray_cluster
    from bonbench.pipeline.readers import ImportedSamples


@dataclass(frozen=True)
class RunRequest:
    """What a user asks for: the flags of ``bonbench run`` (and ``score --samples``) as values.

    ``temperatures`` / ``top_ps`` with several values make a sweep (one run each, one engine).
    ``samples`` imports a samples file instead of sampling (backend ``scripted``). ``engine_args``
    are the backend settings the user gave (``max_model_len``, ``batch_size``, ...), checked against
    the backend's typed options (``sampler.select``). ``n=None`` means the largest k
    (or, for imported samples, every sample the file has). Each field is also a flag of ``bonbench
    run`` / ``score`` (``bonbench.core.settings``: help, spelling and range written here once).
    """

    task: str | None = setting(None, help="task name (see `bonbench list tasks`)")
    task_args: Mapping[str, str] = setting(default_factory=dict, flag="-T", help="task argument, repeatable")
    metrics: tuple[str, ...] = setting((), flag="--metric",
                                       help="pass@k, bon@k, maj@k, mean; repeatable; list form pass@1,4,16")
    n: int | None = setting(None, range=flags.AT_LEAST_1, help="samples per problem (default: the largest k requested)")
    model: str | None = setting(None, env="BONBENCH_MODEL", help="hub id, local folder, or gemma-3-270m (default)")
    backend: str | None = setting(None, env="BONBENCH_BACKEND",
                                  help="vllm (default when it imports), hf, openai (a served model: --endpoint), scripted")
    samples: Path | None = setting(None, help="with --backend scripted: a samples file to replay (formats as `score --samples`)")
    temperatures: tuple[float, ...] = setting(
        (1.0,), flag="--temperature", comma=True, range=flags.AT_LEAST_0,
        help="sampling temperature; a comma list runs a sweep (one engine load)")
    top_ps: tuple[float, ...] = setting((1.0,), flag="--top-p", comma=True, range=flags.SHARE,
                                        help="nucleus mass; a comma list sweeps too")
    max_tokens: int | None = setting(None, range=flags.AT_LEAST_1, help="max new tokens (default: the task's)")
    seed: int = setting(0, range=flags.AT_LEAST_0, help="engine seed")
    prompt_style: Literal["auto", "base", "chat"] = setting(
        "auto", help="few-shot text for base models, chat template for instruct models (auto: from the model)")
    dtype: str = setting("bfloat16", help="weights dtype of the engine (bfloat16, float16, float32)")
    verifier: str | None = setting(
        None, help="verifier for bon@k: logprob, oracle, rm:<reward model spec> (bonbench list reward-models) or "
                   "learned:PATH (bonbench train-verifier); default: the newest learned verifier under <out>/verifiers, "
                   "then results/verifiers, for this task family and model, else logprob")
    limit: int | None = setting(None, range=flags.AT_LEAST_1, help="evaluate only the first N problems")
    data_dir: str | None = setting(None, help="local dataset mirror (default: $BONBENCH_DATA_DIR, else the hub)")
    out: Path = setting(Path("results"), env="BONBENCH_OUT", help="results root (default: results/)")
    n_boot: int = setting(1000, range=flags.AT_LEAST_1, help="bootstrap resamples for CIs")
    unsafe_no_sandbox: bool = setting(
        False, help="code tasks: run model code without bubblewrap (rlimits, uid change and group kill still apply)")
    # the CLI's engine flags (bonbench.apps.cli.evaluation.EngineFlags), the ones given
    engine_args: Mapping[str, Any] = setting(default_factory=dict, cli=False,
                                             help="backend settings by name (the engine flags of `bonbench run`)")
    # the grader of a reward-judged task (its -T reward_model)
    reward_model: str | None = setting(
        None, help="reward-judged tasks (imdb, tldr): the reward model that grades, a name from "
                   "`bonbench list reward-models`, a folder or hub id (same as -T reward_model=...)")
    # KL of every sample to this reference policy (metric ``kl``)
    ref_model: str | None = setting(
        None, help="reference policy (hub id, folder, gemma-3-270m): adds metric kl, the mean of "
                   "log pi(y|x) - log pi_ref(y|x) over samples (teacher-forced, transformers)")
    # winrate against this run's samples (else the task's reference answers)
    ref_run: Path | None = setting(
        None, help="reward-judged tasks: the run whose samples winrate compares with (default: the "
                   "task's reference answers, e.g. TL;DR's human summaries)")
    # "local" (start one here), "auto" or HOST:PORT; None: no Ray
    ray: str | None = setting(
        None, const="local", metavar="ADDRESS",
        help="sample on Ray actors and run code tests as Ray tasks: no value starts a local Ray, `auto` joins "
             "this machine's cluster, HOST:PORT a head's (docs/scale-out.md)")
    ray_workers: int | None = setting(
        None, range=flags.AT_LEAST_1, help="with --ray: sampling actors (default: one per GPU, else one per node)")
    # run only this slice of the problems, into the run's shards/ folder
    shard: ShardSpec | None = setting(
        None, parse=parse_shard, help="i/n: run only shard i of n (1-based; a Slurm array task each) into the run's "
                                      "shards/ folder; `bonbench merge RUN_DIR` combines them (docs/scale-out.md)")
    # a search instead of independent sampling (docs/search.md): n is its budget, part of the run id
    strategy: str | None = setting(
        None, help="search with this strategy instead of drawing n independent solutions: best_of_n, beam, dvts, "
                   "particle_filtering, or a plugin's; n is the search budget; needs --verifier prm:... (docs/search.md)")
    strategy_args: Mapping[str, str] = setting(default_factory=dict, flag="-S",
                                               help="strategy option, repeatable (-S width=4; docs/search.md)")
    seeds: int = setting(1, range=flags.AT_LEAST_1,
                         help="with --strategy: repeat each problem's search under this many seeds derived from --seed; "
                              "a metric is the mean over seeds per problem, its CI a bootstrap over problems")
    # two-stage adaptive sampling (docs/adaptive.md): n is the cap per problem; part of the run id
    adaptive: AdaptiveSpec | None = setting(
        None, parse=parse_adaptive, metavar="pilot=P,budget=B",
        help="sample P per problem, then more where the pilots say it counts, B per problem on average (the pilot "
             "included), at most --n each; or pilot=P,halfwidth=H[,confidence=Q]: as few as the pilots predict give the "
             "first --metric (a pass@k, maj@k or bon@k) a 95%% CI half-width of H (with probability Q, default 0.5); "
             "estimates stay unbiased (docs/adaptive.md)")


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
    options: Any = None  # the backend's typed options (select.VLLMOptions / HFSamplerOptions / ...); None for scripted
    data_dir: str | None = None  # reward-model verifiers that build themselves read their data here
    ref_model: models.ResolvedModel | None = None  # KL to this reference policy, when asked for
    winrate_ks: tuple[int, ...] = ()  # win rates to compute (k = 1 is ``winrate``)
    ref_run: Path | None = None  # ... against this run's samples, else the task's references
    ray: ray_cluster.RayOptions | None = None  # sample on Ray actors and run code tests as Ray tasks
    facts: Mapping[str, Any] | None = None  # top-level facts for each run's metrics.json (a merge's shards)
    verifier_note: str | None = None  # "verifier: NAME (why)", shown to the user when bon@k is scored
    never_sample: bool = False  # a reopened run: missing samples are an error naming the fix, not drawn
    # a sampler object handed to ``plan`` (the trainer's live policy): ``execute`` samples with it instead
    # of building one by name, and leaves closing it to its owner
    sampler: Sampler | None = None
    # a search run (``--strategy``): the strategy with its options bound, and the verifier as the scorer
    # of partial solutions (``bonbench.run.search_choice``); both None for a sampling run
    strategy: Any = None
    scorer: Any = None

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
