"""One training step of ``loop.Trainer``: prompts -> G samples each from the live policy -> the
task's grades (and verifier scores, reference rewards, log-probabilities, values where the
objective needs them) -> per-sample weights -> the optimiser steps (``update.PolicyUpdate``) -> the
step's log row and rollout rows.

Sampling seeds derive from (seed, step, problem, sample index) and prompt order from (seed, epoch),
so a resumed run redoes a step exactly as the killed one would have. ``RolloutStep`` is a mixin of
``loop.Trainer`` (it reads the trainer's config, task, policy, verifier and ``Comm``); the run
around the steps (resume, save, export) is ``loop``'s.

It defines no grading and no weights: the task's grader grades (``bonbench.pipeline.stages.graded``)
and the objective turns a group's rewards into weights (``rollout.objective_weights``); the loss and
the optimiser steps are ``update.PolicyUpdate``'s. It appends only the rollout and reference-sample
rows (rank 0); the step's log row is returned, and ``loop`` writes it.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from bonbench.api.objective import Objective
from bonbench.api.sampler import SampleRequest, SamplingParams
from bonbench.api.task import Task
from bonbench.api.verifier import Verifier
from bonbench.apps.trainer.checkpoint import CheckpointDir
from bonbench.apps.trainer.distributed import shard
from bonbench.apps.trainer.rollout import (
    build_groups,
    failed_prompts,
    hinted,
    normalise_advantages,
    objective_weights,
    sampled_kl,
)
from bonbench.apps.trainer.rollout_server import AdapterPublisher
from bonbench.apps.trainer.setup import expert_completion
from bonbench.apps.trainer.update import PolicyUpdate
from bonbench.apps.trainer.value import ValueHead
from bonbench.apps.trainer.vllm_rollout import VLLMRollouts
from bonbench.core.records import Grade, Problem, Sample
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


@dataclass(frozen=True)
class Signals:
    """What the objective and the loss read besides grades: token pairs, log-probabilities, values."""

    pairs: list[tuple[list[int], list[int]]]
    logp: Any
    ref_logp: Any
    ref_tokens: Any
    features: torch.Tensor | None
    values: dict[str, float] | None


class RolloutStep(PolicyUpdate):
    """One training step (see the module docstring)."""

    task: Task
    objective: Objective
    verifier: Verifier | None
    value: ValueHead | None
    publisher: AdapterPublisher | None
    rollouts: VLLMRollouts | None
    ckpt: CheckpointDir
    style: str
    max_tokens: int
    ref_rewards: dict[str, list[float]]

    def _sample(self, problems: Sequence[Problem], counts: Mapping[str, Sequence[int]], seed: int,
                reference: bool = False) -> list[Sample]:
        # the ignore below: the style is a str in the settings (core cannot import api's PromptStyle)
        requests = [SampleRequest(self.task.render(p, self.style), tuple(counts[p.id]))  # type: ignore[arg-type]  # see above
                    for p in problems if counts[p.id]]
        if not requests:
            return []
        if self.publisher is not None and not reference:
            sampler: Any = self.publisher.sampler(seed)  # the servers, with the adapter synced last
        elif self.cfg.rollout_backend == "vllm":
            if self.rollouts is None:
                self.rollouts = VLLMRollouts(self.policy, self.cfg, self.ckpt.root)
            sampler = self.rollouts.sampler(reference=reference)
        else:
            sampler = self.policy.sampler(seed, batch_size=max(1, sum(len(r.sample_indices) for r in requests)),
                                          reference=reference)
        params = SamplingParams(temperature=self.cfg.temperature, top_p=1.0, max_tokens=self.max_tokens, seed=seed)
        try:
            return [s for chunk in sampler.generate(requests, params) for s in chunk]
        finally:
            sampler.close()

    def _grade(self, problems: Sequence[Problem], samples: Sequence[Sample]) -> dict[Key, Grade]:
        return {g.key: g for g in graded(self.task.grader, {p.id: p for p in problems}, samples)}

    def _reference_rewards(self, problems: Sequence[Problem]) -> None:
        """Sample and grade M reference samples for prompts that have none yet (stored, keyed).
        Every rank calls it every step (the rows are shared with all ranks: a collective)."""
        if self.cfg.ref_samples < 1:
            return
        todo = [p for p in problems if p.id not in self.ref_rewards]
        rows: list[dict[str, Any]] = []
        if todo:
            with self.policy.reference():
                samples = self._sample(todo, {p.id: range(self.cfg.ref_samples) for p in todo},
                                       seed_of(self.cfg.seed, "ref"), reference=True)
            grades = self._grade(todo, samples)
            rows = [{"problem_id": s.problem_id, "sample_idx": s.sample_idx, "completion": s.completion,
                     "reward": grades[s.key].value()} for s in samples]
        # every rank learns every prompt's rewards, so a prompt that moves to another rank later is not redrawn
        rows = self.comm.all_gather_rows(rows)
        if rows and self.comm.is_main:
            self.ckpt.append_rows(self.ckpt.ref_samples_path, rows)
        for row in rows:
            self.ref_rewards.setdefault(row["problem_id"], []).append(float(row["reward"]))

    def _rationalize(self, failed: Sequence[Problem], per: Mapping[str, int], grades: dict[Key, Grade],
                     step: int) -> list[Sample]:
        """STaR's rationalisation: ``group`` samples per failed prompt with the gold answer as a hint,
        indices after the policy's (keys stay unique), graded against the unhinted problem; the
        correct ones come back (their grades added to ``grades``)."""
        if not failed:
            return []
        counts = {p.id: range(per[p.id], 2 * per[p.id]) for p in failed}
        drawn = self._sample([hinted(p) for p in failed], counts, seed_of(self.cfg.seed, "rationale", step))
        got = self._grade(failed, drawn)
        kept = [s for s in drawn if got[s.key].value() > 0]
        grades.update({s.key: got[s.key] for s in kept})
        return kept

    def _rollouts(self, step: int) -> Rollouts:
        """Sample this rank's groups of the step's prompts, grade them, add expert rows, STaR's
        rationalisations, verifier scores and reference rewards as the objective needs."""
        cfg, comm, needs = self.cfg, self.comm, self.objective.needs
        t0 = time.perf_counter()
        problems = prompt_batch(self.task.problems, step, cfg.prompts_per_step, cfg.seed)
        # the same prompt twice in a step (tiny train sets) is one group of twice the size: keys stay unique
        everyone = list({p.id: p for p in problems}.values())
        per = {p.id: 0 for p in everyone}
        for p in problems:
            per[p.id] += cfg.group
        # this rank's groups: whole groups, so objectives (one group in, weights out) need no collective
        mine = shard(everyone, comm.rank, comm.world)
        samples = self._sample(mine, {pid: range(n) for pid, n in per.items()}, seed_of(cfg.seed, "step", step))
        sample_s = time.perf_counter() - t0
        if "expert" in needs:
            samples += [Sample(p.id, per[p.id], expert_completion(self.task, p), 0, "stop") for p in mine]
        grades = self._grade(mine, samples) if samples else {}
        rationales: list[Sample] = []
        failed: list[Problem] = []
        if cfg.rationalize:  # each rank re-samples the failed prompts of its own groups
            failed = failed_prompts(mine, samples, per, grades)
            rationales = self._rationalize(failed, per, grades, step)
            samples += rationales
        scores = None
        if self.verifier is not None:
            scores = ({sc.key: sc.score for sc in self.verifier.score({p.id: p for p in mine}, samples, grades)}
                      if samples else {})
        if "ref_rewards" in needs:
            self._reference_rewards(mine)
        return Rollouts(tuple(everyone), tuple(mine), per, samples, grades, scores, tuple(rationales), tuple(failed),
                        sample_s)

    def _signals(self, r: Rollouts) -> Signals:
        """Token pairs (rationalisations train without the hint) and the log-probabilities and values
        the objective and the log need; values are read before any update (V(x) does not depend on
        this step's samples)."""
        pol, needs = self.policy, self.objective.needs
        prompts = {p.id: self.task.render(p, self.style) for p in r.mine}  # type: ignore[arg-type]  # see _sample
        pairs = [pol.encode(prompts[s.problem_id], s.completion) for s in r.samples]
        logp = pol.sequence_logprobs(pairs) if "logprobs" in needs else None
        ref_lp = ref_tok = None
        if "ref_logprobs" in needs or self.cfg.log_kl:
            ref_lp, ref_tok = pol.logprobs(pairs, "reference")
        features = values = None
        if self.value is not None:
            features = (pol.prompt_features([pol.encode(prompts[p.id], "")[0] for p in r.mine]) if r.mine
                        else torch.zeros(0, pol.hidden_size, device=pol.device))  # a rank without groups
            values = dict(zip([p.id for p in r.mine], self.value.predict(features).tolist(), strict=True))
        return Signals(pairs, logp, ref_lp, ref_tok, features, values)

    def _update_value(self, r: Rollouts, groups: Mapping[str, Any], sig: Signals) -> dict[str, Any]:
        """One step of the learned value head on the step's groups (its logged loss and means)."""
        comm = self.comm
        if self.value is None or sig.features is None or sig.values is None:
            return {}
        target_fn = self.objective.value_target
        assert target_fn is not None, "objectives that need the value say what it regresses on"
        targets = [target_fn(groups[p.id][1]) for p in r.mine]
        # the mean squared error over the step's groups on all ranks, its gradient summed over ranks:
        # every rank takes the same step, so the heads stay identical (as the policy's weights do)
        loss = self.value.update(sig.features, targets, total=len(r.everyone) if comm.active else None,
                                 sum_grads=comm.sum_grads if comm.active else None)
        v_loss, v_sum, t_sum = comm.sum([loss, sum(sig.values.values()), sum(targets)])
        return {"value_loss": v_loss, "value": v_sum / len(r.everyone), "value_target": t_sum / len(r.everyone)}

    def step(self, step: int) -> dict[str, Any]:
        """One optimiser step (or ``ppo_epochs`` of them) on fresh rollouts; returns its log row."""
        cfg, comm = self.cfg, self.comm
        t0 = time.perf_counter()
        r = self._rollouts(step)
        sig = self._signals(r)
        groups = build_groups(r.samples, r.per, r.grades, scores=r.scores, logprobs=sig.logp, ref_logprobs=sig.ref_logp,
                              ref_rewards=self.ref_rewards, values=sig.values)
        weights = objective_weights(self.objective, groups, len(r.samples))
        is_policy = np.array([s.sample_idx < r.per[s.problem_id] for s in r.samples], dtype=bool)
        group_size = np.array([r.per[s.problem_id] for s in r.samples], dtype=np.float64)
        # "batch" / "std" normalise over the global batch: the moments are summed over ranks
        weights = normalise_advantages(weights, is_policy, group_size, cfg.adv_norm,
                                       reduce=comm.sum if comm.active else None)
        rows_of = {pid: idx for pid, (idx, _) in groups.items()}
        value_stats = self._update_value(r, groups, sig)
        lr = float(self.scheduler.get_last_lr()[0])  # the rate this step's update uses
        kl_coef = cfg.kl_at(step)
        # the loss divides by the step's groups and rows over all ranks (1/P, 1/R of loop's module docstring)
        n_rows = int(comm.sum([len(sig.pairs)])[0])
        stats = self._optimise(sig.pairs, weights, [rows_of[p.id] for p in r.mine], kl_coef, (len(r.everyone), n_rows))
        self.policy.update_ema()
        row = self._log_row(step, r, sig, weights, rows_of, stats, t0, lr=lr, kl_coef=kl_coef, n_rows=n_rows)
        row.update(value_stats)
        row.update(stats)
        return row

    def _log_row(self, step: int, r: Rollouts, sig: Signals, weights: np.ndarray, rows_of: Mapping[str, list[int]],
                 stats: dict[str, Any], t0: float, *, lr: float, kl_coef: float, n_rows: int) -> dict[str, Any]:
        """The step's metrics over the global batch (sums over ranks, then the ratios one process
        computes), and its rollout rows appended (rank 0)."""
        comm = self.comm
        policy_rows = [i for i, s in enumerate(r.samples) if s.sample_idx < r.per[s.problem_id]]
        rationale_keys = {s.key for s in r.rationales}
        rewards = np.array([r.grades[r.samples[i].key].value() for i in policy_rows])
        tok_lp = stats.pop("_token_logprobs")
        # KL(pi || base) of each policy sample by the k3 estimator: unbiased and never negative (sampled_kl)
        kl_part = (sum(sampled_kl(tok_lp[i], sig.ref_tokens[i]) for i in policy_rows)
                   if sig.ref_tokens is not None else 0.0)
        solved = sum(max(r.grades[r.samples[i].key].value() for i in rows_of[p.id]) > 0 for p in r.mine)
        r_sum, r_sq, r_n, n_solved, w_abs, tokens, kl_sum = comm.sum([
            rewards.sum(), (rewards ** 2).sum(), len(rewards), solved, np.abs(weights).sum(),
            sum(len(sig.pairs[i][1]) for i in policy_rows), kl_part])
        elapsed = time.perf_counter() - t0
        sample_s, elapsed = comm.max([r.sample_s, elapsed])  # a step lasts as long as its slowest rank
        rollouts = comm.gather_rows([
            {"step": step, "problem_id": s.problem_id, "sample_idx": s.sample_idx, "completion": s.completion,
             "reward": r.grades[s.key].value(), "answer": r.grades[s.key].answer, "weight": float(weights[i]),
             "expert": s.sample_idx >= r.per[s.problem_id], "n_tokens": len(sig.pairs[i][1]),
             **({"rationale": True} if s.key in rationale_keys else {})}
            for i, s in enumerate(r.samples)])
        if comm.is_main:
            self.ckpt.append_rows(self.ckpt.rollouts_path, rollouts)
        mean = r_sum / r_n
        row: dict[str, Any] = {
            "step": step, "reward": mean, "reward_std": float(np.sqrt(max(r_sq / r_n - mean ** 2, 0.0))),
            "solved_groups": n_solved / len(r.everyone), "weight_abs_mean": w_abs / n_rows, "lr": lr, "kl_coef": kl_coef,
            "tokens": int(tokens), "tokens_per_s": tokens / max(elapsed, 1e-9), "sample_s": sample_s, "seconds": elapsed,
            "world_size": comm.world,
        }
        if sig.ref_tokens is not None:
            # KL(pi || pi_ref) per completion, the mean over this step's samples of sum_t e^r - 1 - r, r the
            # token log-ratio log pi_ref - log pi (rollout.sampled_kl): >= 0, unlike the plain log-ratio
            row["kl_ref"] = kl_sum / r_n
        if self.cfg.rationalize:
            n_failed, n_rationales = comm.sum([len(r.failed), len(r.rationales)])
            row["rationalized"] = int(n_failed)  # prompts with no correct sample, re-sampled with the hint
            row["rationales"] = int(n_rationales)  # hinted samples that reached the answer (trained on)
        return row
