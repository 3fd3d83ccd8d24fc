"""The sampling side of one training step: prompts -> G samples each from the live policy -> the
task's grades, and the verifier scores, reference rewards, expert rows and STaR rationalisations
the objective needs (``Sampling.collect``, TRL's "generate and score").

Sampling seeds derive from (seed, step, problem, sample index) and prompt order from (seed, epoch),
so a resumed run redoes a step exactly as the killed one would have. ``Sampling`` owns the rollout
backends (the policy's hf sampler, the vLLM engine with the live adapter, the rollout servers) and
the reference rewards drawn so far; it is handed the policy, the task and the ``Comm``.

It defines no grading, no weights and no gradient: the task's grader grades
(``bonbench.pipeline.stages.graded``), the objective's weights and the step's log row are
``signals``', the optimiser steps ``update``'s, and ``loop`` calls them in order. It appends only the
reference-sample rows (rank 0).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bonbench.api.sampler import SampleRequest, SamplingParams
from bonbench.api.task import Task
from bonbench.api.verifier import Verifier
from bonbench.apps.trainer.checkpoint import CheckpointDir
from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.distributed import Comm, shard
from bonbench.apps.trainer.policy import Policy
from bonbench.apps.trainer.rollout import failed_prompts, hinted
from bonbench.apps.trainer.rollout_server import AdapterPublisher
from bonbench.apps.trainer.setup import expert_completion
from bonbench.apps.trainer.vllm_rollout import VLLMRollouts
from bonbench.core.records import Grade, Problem, Prompt, Sample
from bonbench.pipeline.stages import graded

Key = tuple[str, int]


def seed_of(*parts: Any) -> int:
    """A 32-bit seed from ``parts`` (seed, what, step, ...): the same parts give the same seed on every run."""
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:4], "little")


def prompt_batch(problems: Sequence[Problem], step: int, per_step: int, seed: int) -> list[Problem]:
    """Prompts of ``step``: consecutive slices of a per-epoch permutation (seeded by (seed, epoch))."""
    n = len(problems)
    out = []
    for j in range(step * per_step, (step + 1) * per_step):
        epoch, pos = divmod(j, n)
        order = np.random.default_rng(seed_of(seed, "epoch", epoch)).permutation(n)
        out.append(problems[int(order[pos])])
    return out


@dataclass(frozen=True)
class Rollouts:
    """This rank's samples of one step, graded (and scored), before any gradient."""

    everyone: tuple[Problem, ...]  # the step's distinct prompts over all ranks
    mine: tuple[Problem, ...]  # this rank's groups
    per: Mapping[str, int]  # samples per prompt (a prompt drawn twice in a step: twice the group)
    samples: list[Sample]
    grades: dict[Key, Grade]
    scores: dict[Key, float] | None
    rationales: tuple[Sample, ...]
    failed: tuple[Problem, ...]
    sample_s: float


class Sampling:
    """Draws and grades one step's rollouts (see the module docstring)."""

    def __init__(self, cfg: TrainConfig, task: Task, policy: Policy, comm: Comm, ckpt: CheckpointDir, *,
                 needs: frozenset[str] | set[str], verifier: Verifier | None, is_chat: bool) -> None:
        self.cfg, self.task, self.policy, self.comm, self.ckpt = cfg, task, policy, comm, ckpt
        self.needs, self.verifier = needs, verifier
        self.style = "chat" if is_chat else "base"
        self.max_tokens = cfg.max_new_tokens or task.max_tokens
        self.ref_rewards: dict[str, list[float]] = {}  # M reference rewards per prompt drawn so far (vBoN)
        # the rollout servers (--rollout-backend openai); the vLLM engine (--rollout-backend vllm), started on first use
        self.publisher = (AdapterPublisher(cfg.name, ckpt.root, cfg.endpoints, is_chat)
                          if cfg.rollout_backend == "openai" else None)
        self.engine: VLLMRollouts | None = None

    def prompt(self, problem: Problem) -> Prompt:
        # the ignore below: the style is a str in the settings (core cannot import api's PromptStyle)
        return self.task.render(problem, self.style)  # type: ignore[arg-type]  # see above

    # ---------------------------------------------------------------- one step

    def collect(self, step: int) -> Rollouts:
        """Sample this rank's groups of the step's prompts, grade them, add expert rows, STaR's
        rationalisations, verifier scores and reference rewards as the objective needs."""
        cfg, comm = self.cfg, self.comm
        t0 = time.perf_counter()
        problems = prompt_batch(self.task.problems, step, cfg.prompts_per_step, cfg.seed)
        # the same prompt twice in a step (tiny train sets) is one group of twice the size: keys stay unique
        everyone = list({p.id: p for p in problems}.values())
        per = {p.id: 0 for p in everyone}
        for p in problems:
            per[p.id] += cfg.group
        # this rank's groups: whole groups, so objectives (one group in, weights out) need no collective
        mine = shard(everyone, comm.rank, comm.world)
        samples = self.sample(mine, {pid: range(n) for pid, n in per.items()}, seed_of(cfg.seed, "step", step))
        sample_s = time.perf_counter() - t0
        if "expert" in self.needs:
            samples += [Sample(p.id, per[p.id], expert_completion(self.task, p), 0, "stop") for p in mine]
        grades = self.grade(mine, samples) if samples else {}
        rationales: list[Sample] = []
        failed: list[Problem] = []
        if cfg.rationalize:  # each rank re-samples the failed prompts of its own groups
            failed = failed_prompts(mine, samples, per, grades)
            rationales = self.rationalize(failed, per, grades, step)
            samples += rationales
        scores = None
        if self.verifier is not None:
            scores = ({sc.key: sc.score for sc in self.verifier.score({p.id: p for p in mine}, samples, grades)}
                      if samples else {})
        if "ref_rewards" in self.needs:
            self.reference_rewards(mine)
        return Rollouts(tuple(everyone), tuple(mine), per, samples, grades, scores, tuple(rationales), tuple(failed),
                        sample_s)

    # ---------------------------------------------------------------- its parts

    def sample(self, problems: Sequence[Problem], counts: Mapping[str, Sequence[int]], seed: int,
               reference: bool = False) -> list[Sample]:
        """The samples of ``counts[p.id]`` for each problem, from the live policy (``reference``: from
        the reference policy; the caller holds ``Policy.reference()``)."""
        requests = [SampleRequest(self.prompt(p), tuple(counts[p.id])) for p in problems if counts[p.id]]
        if not requests:
            return []
        if self.publisher is not None and not reference:
            sampler: Any = self.publisher.sampler(seed)  # the servers, with the adapter synced last
        elif self.cfg.rollout_backend == "vllm":
            sampler = self.vllm().sampler(reference=reference)
        else:
            sampler = self.policy.sampler(seed, batch_size=max(1, sum(len(r.sample_indices) for r in requests)),
                                          reference=reference)
        params = SamplingParams(temperature=self.cfg.temperature, top_p=1.0, max_tokens=self.max_tokens, seed=seed)
        try:
            return [s for chunk in sampler.generate(requests, params) for s in chunk]
        finally:
            sampler.close()

    def vllm(self) -> VLLMRollouts:
        """The vLLM rollout engine (``--rollout-backend vllm``), started on first use (a rollout's or
        the held-out evaluation's, which draws from it too)."""
        if self.engine is None:
            self.engine = VLLMRollouts(self.policy, self.cfg, self.ckpt.root)
        return self.engine

    def grade(self, problems: Sequence[Problem], samples: Sequence[Sample]) -> dict[Key, Grade]:
        return {g.key: g for g in graded(self.task.grader, {p.id: p for p in problems}, samples)}

    def reference_rewards(self, problems: Sequence[Problem]) -> None:
        """Sample and grade M reference samples for prompts that have none yet (stored, keyed).
        Every rank calls it every step (the rows are shared with all ranks: a collective)."""
        if self.cfg.ref_samples < 1:
            return
        todo = [p for p in problems if p.id not in self.ref_rewards]
        rows: list[dict[str, Any]] = []
        if todo:
            with self.policy.reference():
                samples = self.sample(todo, {p.id: range(self.cfg.ref_samples) for p in todo},
                                      seed_of(self.cfg.seed, "ref"), reference=True)
            grades = self.grade(todo, samples)
            rows = [{"problem_id": s.problem_id, "sample_idx": s.sample_idx, "completion": s.completion,
                     "reward": grades[s.key].value()} for s in samples]
        # every rank learns every prompt's rewards, so a prompt that moves to another rank later is not redrawn
        rows = self.comm.all_gather_rows(rows)
        if rows and self.comm.is_main:
            self.ckpt.append_rows(self.ckpt.ref_samples_path, rows)
        for row in rows:
            self.ref_rewards.setdefault(row["problem_id"], []).append(float(row["reward"]))

    def load_reference_rewards(self) -> None:
        """Reference rewards drawn before (a resumed run), in file order, one per key (problem_id,
        sample_idx); a prompt with fewer than M (a kill mid-append) is drawn again: the same samples,
        since their seeds derive from (seed, problem, index)."""
        seen: dict[Key, float] = {}
        for row in self.ckpt.read_rows(self.ckpt.ref_samples_path):
            seen.setdefault((str(row["problem_id"]), int(row["sample_idx"])), float(row["reward"]))
        drawn: dict[str, list[float]] = {}
        for (pid, _), reward in seen.items():
            drawn.setdefault(pid, []).append(reward)
        self.ref_rewards = {pid: r for pid, r in drawn.items() if len(r) >= self.cfg.ref_samples}

    def rationalize(self, failed: Sequence[Problem], per: Mapping[str, int], grades: dict[Key, Grade],
                    step: int) -> list[Sample]:
        """STaR's rationalisation: ``group`` samples per failed prompt with the gold answer as a hint,
        indices after the policy's (keys stay unique), graded against the unhinted problem; the
        correct ones come back (their grades added to ``grades``)."""
        if not failed:
            return []
        counts = {p.id: range(per[p.id], 2 * per[p.id]) for p in failed}
        drawn = self.sample([hinted(p) for p in failed], counts, seed_of(self.cfg.seed, "rationale", step))
        got = self.grade(failed, drawn)
        kept = [s for s in drawn if got[s.key].value() > 0]
        grades.update({s.key: got[s.key] for s in kept})
        return kept

    # ---------------------------------------------------------------- the backends

    def sync_servers(self, step: int) -> None:
        """``--rollout-backend openai``: rank 0 loads the adapters as of ``step`` into the servers; no
        rank samples before they are there."""
        if self.publisher is None:
            return
        if self.comm.is_main:
            self.publisher.publish(self.policy.lm, step)
        else:
            self.publisher.use(step)
        self.comm.barrier()

    def close(self) -> None:
        """Stop the vLLM engine, if one started (its GPU memory goes back)."""
        if self.engine is not None:
            self.engine.close()
            self.engine = None
