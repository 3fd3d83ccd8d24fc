"""Everything a training run checks before its model loads: the objective and its needs, the task's
train split, the verifier, the batch split over ranks, the base model's files (``prepare_training``); then
the checkpoint folder (``before_start``): the recorded settings, the saved state's files, whether
the run is already complete, a writable ``--out``; the held-out evaluation's run (``check_evaluation``,
planned with the base model, writing nothing), the metric ``--keep-best`` keeps by and the
``--stop-if`` rules, the ``--report-to`` package; and the run's
one-line notices (resuming, already complete, starting over), logged to ``NOTICES`` (the CLI prints
them on stderr).

All bad input found here is a ``BonbenchError`` naming the fix, the same on every rank of a
data-parallel job. Nothing here trains, loads the base model's weights (it is resolved to its files,
whose safetensors headers are checked) or leaves anything on disk (the writable check makes and
removes one temporary file): ``loop`` trains and writes the checkpoint folder. vLLM is imported only
with ``--rollout-backend vllm``, to check the install.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bonbench.api.metric.grammar import MetricSpec, parse_metric
from bonbench.api.metric.kind import metric_kind
from bonbench.api.objective import NEEDS, Objective, make_objective
from bonbench.api.task import Task, task_names, task_parameters
from bonbench.apps.trainer.checkpoint import CheckpointDir
from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.distributed import check_batch, env_world
from bonbench.apps.trainer.guards import Rule, check_rules
from bonbench.apps.trainer.loggers import check_reporter
from bonbench.apps.trainer.policy import check_weight_files
from bonbench.apps.trainer.rollout import check_gold_answers
from bonbench.apps.trainer.vllm_rollout import vllm_max_lora_rank
from bonbench.apps.trainer.watch import TrainingWarning, warmup_warning
from bonbench.core import ray_cluster
from bonbench.core.engines import import_vllm
from bonbench.core.errors import BonbenchError
from bonbench.core.models import ResolvedModel, resolve_model
from bonbench.core.records import Problem
from bonbench.plugins.samplers.vllm_steps import step_engine_args
from bonbench.run.plan import plan
from bonbench.run.request import RunRequest
from bonbench.run.resolve import check_verifier, load_task

NOTICES = logging.getLogger("bonbench.apps.trainer")  # one line each: resuming, already complete, starting over


@dataclass(frozen=True)
class Prepared:
    """What a training run needs before its first step (all bad input found here)."""

    cfg: TrainConfig
    task: Task
    objective: Objective
    model: ResolvedModel
    ckpt: CheckpointDir
    keep_best: tuple[str, str] | None = None  # --keep-best: the metric's canonical name and its direction
    stop_rules: tuple[Rule, ...] = ()  # --stop-if, parsed


def load_train_task(cfg: TrainConfig) -> Task:
    """The task's train split, built as ``bonbench run`` builds tasks (``bonbench.run.resolve``: its
    grader caches executions under ``--out``, honours ``--unsafe-no-sandbox`` and with ``--ray`` runs
    code tests as Ray tasks); a task without a train split is a one-line error naming the fix."""
    if "split" not in task_parameters(cfg.task) and cfg.task in task_names():
        raise BonbenchError(f"task {cfg.task!r} has no train split; train on a task that has one (math, imdb) "
                            "or give it a split argument")
    args: dict[str, Any] = {"split": "train", **dict(cfg.task_args)}
    try:
        return load_task(cfg.task, args, data_dir=cfg.data_dir, out=cfg.out, unsafe=cfg.unsafe_no_sandbox,
                         ray=ray_cluster.ray_options(cfg.ray))
    except BonbenchError as exc:
        if "unknown split" in str(exc):
            raise BonbenchError(f"task {cfg.task!r} has no train split ({exc}); train on a task that has one") from exc
        raise


def expert_completion(task: Task, problem: Problem) -> str:
    """A demonstration for SFT-style objectives: the problem's worked solution, else (reward-judged
    tasks) its reference answer."""
    text = problem.meta.get("solution") or (problem.target if task.judged_by == "reward" else "")
    if not text:
        raise BonbenchError(f"task {task.name!r} has no reference solutions for expert rows; pick an objective "
                            "without demonstrations (see `bonbench list objectives`)")
    return " " + str(text).strip()


def eval_request(cfg: TrainConfig, out: Path, model: str | None = None) -> RunRequest:
    """The run each held-out evaluation makes (``evaluate``; ``model``: the base model's name, to check
    the request before training)."""
    assert cfg.eval_task is not None, "only runs with --eval-task evaluate"
    if cfg.rollout_backend == "vllm":  # the rollout engine with the live adapter, as it runs (vllm_rollout.engine_args)
        backend, dtype, engine = "vllm", cfg.dtype, step_engine_args()
    else:  # float32: the live policy's master weights, which the hf sampler runs as they are (no autocast)
        backend, dtype, engine = "hf", "float32", {}
    return RunRequest(task=cfg.eval_task, task_args=dict(cfg.eval_task_args), metrics=cfg.eval_metrics, n=cfg.eval_n,
                      limit=cfg.eval_limit, max_tokens=cfg.eval_max_tokens, model=model, backend=backend, seed=cfg.seed,
                      dtype=dtype, engine_args=engine,
                      verifier=cfg.verifier, data_dir=cfg.data_dir, out=out, unsafe_no_sandbox=cfg.unsafe_no_sandbox)


def check_evaluation(cfg: TrainConfig, base_model: str) -> tuple[MetricSpec, ...]:
    """Plan the evaluation of step 0 with the base model by name: an unknown task, a metric that does
    not parse or fit ``--eval-n``, a verifier of another family are one error before training starts.
    Returns the metrics each evaluation computes (none without ``--eval-task``). Writes nothing and
    loads no model."""
    if cfg.eval_task is None:
        return ()
    try:
        return plan(eval_request(cfg, Path(cfg.out), model=base_model)).specs
    except BonbenchError as exc:
        raise BonbenchError(f"--eval-task {cfg.eval_task}: {exc}") from None


def kept_metric(name: str, evaluated: tuple[MetricSpec, ...]) -> tuple[str, str]:
    """``--keep-best``'s metric (canonical name, direction): one the evaluation computes and that has a
    better side, else one error naming the metrics it could be."""
    try:
        spec = parse_metric(name)
    except BonbenchError as exc:
        raise BonbenchError(f"--keep-best {name}: {exc}") from None
    ranked = [s.name for s in evaluated if metric_kind(s.kind).direction is not None]
    direction = metric_kind(spec.kind).direction
    if spec not in evaluated or direction is None:
        raise BonbenchError(f"--keep-best {name}: the evaluation does not compute {spec.name}; name one it does "
                            f"({', '.join(ranked) or 'none'}) or add --eval-metric {spec.name}")
    return spec.name, direction


def prepare_training(cfg: TrainConfig) -> Prepared:
    """Check everything a run needs, load nothing heavy (the model is resolved, not loaded)."""
    objective = make_objective(cfg.objective, **dict(cfg.objective_options))
    if objective.min_group > cfg.group:
        raise BonbenchError(f"objective {cfg.objective!r} needs groups of at least {objective.min_group} samples "
                            f"(k or N), but --group is {cfg.group}; raise --group or lower k / N")
    needs = set(objective.needs)
    if "scores" in needs and not cfg.verifier:
        raise BonbenchError(f"objective {cfg.objective!r} needs a verifier: add {NEEDS['scores']}")
    if "ref_rewards" in needs and cfg.ref_samples < 1:
        raise BonbenchError(f"objective {cfg.objective!r} needs reference rewards: add {NEEDS['ref_rewards']} "
                            "(e.g. --ref-samples 32)")
    task = load_train_task(cfg)
    if "answers" in needs and task.judged_by == "reward":
        raise BonbenchError(f"objective {cfg.objective!r} votes on extracted answers, and task {task.name!r} is judged by "
                            "a reward model (free text); use passk (max@k) or mean instead")
    if "expert" in needs:
        expert_completion(task, task.problems[0])
    if cfg.rationalize:
        if cfg.objective != "star":
            raise BonbenchError("--rationalize is STaR's rationalisation step: use it with --objective star")
        check_gold_answers(task)
    if cfg.rollout_backend == "vllm":
        import_vllm()  # a broken or missing install is one line naming the fix, before the model loads
        vllm_max_lora_rank(cfg.lora_rank)
    check_batch(cfg.prompts_per_step, env_world()[1])
    ckpt = CheckpointDir(Path(cfg.out) / "checkpoints" / cfg.name)
    model = resolve_model(cfg.model)
    check_weight_files(model)
    check_verifier(cfg.verifier, cfg.data_dir, task=task.name, model_path=model.path)
    evaluated = check_evaluation(cfg, model.name)
    keep = kept_metric(cfg.keep_best, evaluated) if cfg.keep_best is not None else None
    rules = check_rules(cfg.stop_if, evaluated, cfg.log_kl)
    check_reporter(cfg.report_to)
    return Prepared(cfg, task, objective, model, ckpt, keep_best=keep, stop_rules=rules)


def _resume_line(ck: CheckpointDir, saved: int, steps: int) -> str:
    """"resuming at step S of T", with what the resumed run redoes or has left to do."""
    line = f"resuming at step {saved} of {steps} ({ck.root})"
    if saved == steps:
        return line + ": training is done, writing the export"
    redo = len({int(r["step"]) for r in ck.read_rows(ck.log_path) if int(r["step"]) >= saved})
    return line + (f"; {redo} logged step{'s' * (redo > 1)} after the last save {'are' if redo > 1 else 'is'} redone"
                   if redo else "")


def before_start(prep: Prepared) -> bool:
    """Checks of the checkpoint folder before the model loads (every rank alike); rank 0's notices
    (``NOTICES``) and warnings. Returns whether the run is already complete (nothing to train or export)."""
    cfg, ck = prep.cfg, prep.ckpt
    main = env_world()[0] == 0
    restarted = ck.check_or_write_config(cfg, write=False)
    saved = ck.check_state()
    if saved > cfg.steps:
        raise BonbenchError(f"checkpoint {cfg.name!r} has trained {saved} steps, more than --steps {cfg.steps}; pass "
                            f"--steps {saved} or more to continue it, or use another --name")
    if saved == cfg.steps and ck.exported_step() == saved:
        if main:
            NOTICES.info(f"already complete: {cfg.name!r} has trained {saved} of {cfg.steps} steps ({ck.root}); a "
                         "larger --steps trains on")
        return True
    ck.check_writable(cfg.out)  # a read-only --out fails now, before the model loads and a step is lost
    if not main:
        return False
    note = warmup_warning(cfg)
    if note:
        warnings.warn(note, TrainingWarning, stacklevel=3)
    if restarted:
        NOTICES.info(f"starting {cfg.name!r} over with the new settings: its folder held no saved training state")
    elif saved:
        NOTICES.info(_resume_line(ck, saved, cfg.steps))
    return False
