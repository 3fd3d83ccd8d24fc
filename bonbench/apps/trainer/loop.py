"""The rollout loop: prompts -> G samples each from the live policy -> the task's own grades (and
verifier scores, reference log-probabilities, reference rewards where the objective needs them)
-> per-sample weights from the objective -> one or more optimiser steps -> log, save, export.

Per step and prompt group j (P prompts, G_j rows each), the loss is

    L = (1/P) sum_j sum_i -sur_ij  +  beta (1/R) sum_rows sum_t KL_t(pi || anchor)  -  c_H (1/R) sum_rows sum_t H_t

with sur_ij = sum_t min(rho_t w_ij, clip(rho_t, 1 +- eps) w_ij) over the tokens of y_ij (divided by
|y_ij| with ``length_norm="mean"``), rho_t = pi_theta / pi_old per token, R the number of rows. On
the first pass over a rollout batch rho = 1 and the gradient is exactly -(1/P) sum w_ij grad log
pi(y_ij | x_j), the objectives' estimator; further passes (``ppo_epochs`` > 1) are PPO's clipped
surrogate. KL_t is the exact KL between the next-token distributions of the policy and the anchor
(the base model, or an EMA of the policy) at each completion position; H_t the policy's entropy there.

Sampling seeds derive from (seed, step, problem, sample index) and prompt order from (seed, epoch),
so a resumed run redoes a step exactly as the killed one would have.

Under a launcher (torchrun, accelerate launch) the step's prompt groups are split over the ranks
(``distributed``): each rank samples, grades and backpropagates its own groups, P and R above stay
the global counts, the gradients are summed over ranks, so the update is the one-process update of
the same global batch; logged metrics are reduced over ranks and only rank 0 writes files.
"""

from __future__ import annotations

import hashlib
import subprocess
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from bonbench import __version__
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Grade, Problem, Sample
from bonbench.api.task import get_verifier
from bonbench.api.sampler import SampleRequest, SamplingParams
from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.distributed import Comm, RankError, env_world, shard, start, stop
from bonbench.apps.trainer.policy import Policy
from bonbench.apps.trainer.rollout import (
    build_groups,
    failed_prompts,
    hinted,
    normalise_advantages,
    objective_weights,
    sampled_kl,
)
from bonbench.apps.trainer.setup import Prepared, before_start, expert_completion, load_train_task, prepare
from bonbench.apps.trainer.update import PolicyUpdate
from bonbench.apps.trainer.value import ValueHead
from bonbench.apps.trainer.watch import SaveSchedule, SignalWatch, TrainingWarning

__all__ = ["Prepared", "StepCallback", "Trainer", "expert_completion", "load_train_task", "prepare", "prompt_batch",
           "train"]

StepCallback = Callable[[int, int, Mapping[str, Any]], None]  # (steps done, total, last log row)


def _seed(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:4], "little")


def prompt_batch(problems: Sequence[Problem], step: int, per_step: int, seed: int) -> list[Problem]:
    """Prompts of ``step``: consecutive slices of a per-epoch permutation (seeded by (seed, epoch))."""
    n = len(problems)
    out = []
    for j in range(step * per_step, (step + 1) * per_step):
        epoch, pos = divmod(j, n)
        order = np.random.default_rng(_seed(seed, "epoch", epoch)).permutation(n)
        out.append(problems[int(order[pos])])
    return out


def _git_sha() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                              cwd=Path(__file__).parent).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


class Trainer(PolicyUpdate):
    """One training run (``train`` is the whole of it; the optimiser steps are ``update.PolicyUpdate``'s)."""

    def __init__(self, prep: Prepared, on_step: StepCallback | None = None, comm: Comm | None = None) -> None:
        self.p, self.cfg, self.task, self.objective = prep, prep.cfg, prep.task, prep.objective
        self.comm = comm or Comm()
        self.on_step = on_step if self.comm.is_main else None
        self.saves = SaveSchedule(self.cfg.save_every)
        self.style = "chat" if prep.model.is_chat else "base"
        self.max_tokens = self.cfg.max_new_tokens or self.task.max_tokens
        self.verifier = None
        if self.cfg.verifier:
            self.verifier = get_verifier(self.cfg.verifier, **({"data_dir": self.cfg.data_dir}
                                                               if self.cfg.verifier.startswith("rm:") else {}))
        self.policy = Policy(prep.model, self.cfg, device=self.comm.device)
        self.optimizer = torch.optim.AdamW(self.policy.trainable(), lr=self.cfg.lr, weight_decay=self.cfg.weight_decay)
        warm = self.cfg.warmup
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: min(1.0, (s + 1) / warm) if warm else 1.0)
        self.ref_rewards: dict[str, list[float]] = {}
        self.publisher = None  # the rollout servers (--rollout-backend openai)
        if self.cfg.rollout_backend == "openai":
            from bonbench.apps.trainer.rollout_server import AdapterPublisher

            self.publisher = AdapterPublisher(self.cfg.name, prep.ckpt.root, self.cfg.endpoints, prep.model.is_chat)
        self.rollouts: Any = None  # the vLLM rollout engine (--rollout-backend vllm), started on first use
        # the learned value head, when the objective reads Group.value (baseline / p from the value)
        self.value = ValueHead(self.policy.hidden_size, self.cfg.value_lr, self.policy.device) \
            if "value" in self.objective.needs else None

    # ---------------------------------------------------------------- the run

    def _restore(self) -> int:
        """Load the saved state, if any; returns the steps it covers."""
        ck = self.p.ckpt
        if ck.saved_step() == 0:
            return 0
        state = ck.load_state()
        self.policy.load_trainable_state(state["weights"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.policy.ema is not None and state.get("ema") is not None:
            self.policy.ema = {k: v.to(self.policy.device) for k, v in state["ema"].items()}
        if self.value is not None:
            if state.get("value") is None:
                raise BonbenchError(f"checkpoint {self.cfg.name!r} has no value head state; use another --name")
            self.value.load_state_dict(state["value"])
        return int(state["step"])

    def train(self) -> Path:
        ck, cfg, comm = self.p.ckpt, self.cfg, self.comm
        # every rank checks (the same error everywhere, no rank left waiting); rank 0 alone writes
        ck.check_or_write_config(cfg, write=comm.is_main)
        # rank 0 first: loading repairs a state folder a kill left half-renamed
        start = self._restore() if comm.is_main else 0
        comm.barrier()
        if not comm.is_main:
            start = self._restore()
        comm.broadcast([p for p in self.policy.trainable()] + list((self.policy.ema or {}).values())
                       + (list(self.value.head.parameters()) if self.value is not None else []))
        if comm.is_main:
            ck.truncate_after(start)  # rows of steps the saved state does not cover; never earlier ones
        self._load_ref_rewards()
        # rank 0 watches for steps without a learning signal, counting the logged steps of a resumed run
        watch = SignalWatch(history=ck.read_rows(ck.log_path)) if comm.is_main else None
        last: Mapping[str, Any] = {}
        if self.on_step is not None:
            self.on_step(start, cfg.steps, last)
        self.saves.start()
        try:
            if start < cfg.steps:
                self._sync_rollout_servers(start)
            for step in range(start, cfg.steps):
                last = self.step(step)
                done = step + 1
                if watch is not None:
                    ck.append_rows(ck.log_path, [last])
                    if self.saves.due(done, cfg.steps):
                        self._save(done)
                    self._warn(watch.update(last))
                if done < cfg.steps and done % cfg.sync_every == 0:
                    self._sync_rollout_servers(done)
                if self.on_step is not None:
                    self.on_step(done, cfg.steps, last)
        finally:
            if self.rollouts is not None:
                self.rollouts.close()
                self.rollouts = None
        if watch is not None and start < cfg.steps:
            self._warn(watch.finish())
        if comm.is_main and (start < cfg.steps or ck.exported_step() != ck.saved_step()):
            self.export()
        comm.barrier()  # the job ends when the export is complete
        return ck.root

    def _save(self, done: int) -> None:
        t = time.perf_counter()
        self.p.ckpt.save_state(done, self.policy.trainable_state(), self.optimizer, self.scheduler, self.policy.ema,
                               self.value.state_dict() if self.value is not None else None)
        self.saves.saved(time.perf_counter() - t)

    @staticmethod
    def _warn(message: str | None) -> None:
        if message:
            warnings.warn(message, TrainingWarning, stacklevel=2)

    def _load_ref_rewards(self) -> None:
        """Reference rewards drawn before (a resumed run), in file order, one per key (problem_id,
        sample_idx); a prompt with fewer than M (a kill mid-append) is drawn again: the same samples,
        since their seeds derive from (seed, problem, index)."""
        seen: dict[tuple[str, int], float] = {}
        for row in self.p.ckpt.read_rows(self.p.ckpt.ref_samples_path):
            seen.setdefault((str(row["problem_id"]), int(row["sample_idx"])), float(row["reward"]))
        drawn: dict[str, list[float]] = {}
        for (pid, _), reward in seen.items():
            drawn.setdefault(pid, []).append(reward)
        self.ref_rewards = {pid: r for pid, r in drawn.items() if len(r) >= self.cfg.ref_samples}

    def _sync_rollout_servers(self, step: int) -> None:
        """``--rollout-backend openai``: rank 0 loads the adapters as of ``step`` into the servers; no
        rank samples before they are there."""
        if self.publisher is None:
            return
        if self.comm.is_main:
            self.publisher.publish(self.policy.lm, step)
        else:
            self.publisher.use(step)
        self.comm.barrier()

    def export(self) -> None:
        ck, cfg, m = self.p.ckpt, self.cfg, self.p.model
        ck.clear_export()
        sha = self.policy.export(ck.root)
        ck.write_manifest({
            "format": 1,
            "name": cfg.name,
            "objective": cfg.objective,
            "objective_options": dict(self.objective.options),
            "config": cfg.to_json(),
            "training_hash": cfg.training_hash(),
            "base": {"name": m.name, "path": m.path, "fingerprint": m.fingerprint, "revision": m.revision,
                     "is_chat": m.is_chat},
            "task": {"name": self.task.name, "version": self.task.version, "args": dict(cfg.task_args), "split": "train",
                     "dataset_fingerprint": self.task.fingerprint},
            "adapter": None if cfg.full_finetune else {"kind": "lora", "rank": cfg.lora_rank, "alpha": cfg.lora_alpha,
                                                        "targets": cfg.lora_targets, "merged": True},
            "steps": ck.saved_step(),
            "weights_sha256": sha,
            "bonbench_version": __version__,
            "git_sha": _git_sha(),
            "log": ck.read_rows(ck.log_path),
        })

    # ---------------------------------------------------------------- one step

    def _sample(self, problems: Sequence[Problem], counts: Mapping[str, Sequence[int]], seed: int,
                reference: bool = False) -> list[Sample]:
        requests = [SampleRequest(self.task.render(p, self.style), tuple(counts[p.id])) for p in problems if counts[p.id]]
        if not requests:
            return []
        if self.publisher is not None and not reference:
            sampler: Any = self.publisher.sampler(seed)  # the servers, with the adapter synced last
        elif self.cfg.rollout_backend == "vllm":
            if self.rollouts is None:
                from bonbench.apps.trainer.vllm_rollout import VLLMRollouts

                self.rollouts = VLLMRollouts(self.policy, self.cfg, self.p.ckpt.root)
            sampler = self.rollouts.sampler(reference=reference)
        else:
            sampler = self.policy.sampler(seed, batch_size=max(1, sum(len(r.sample_indices) for r in requests)),
                                          reference=reference)
        params = SamplingParams(temperature=self.cfg.temperature, top_p=1.0, max_tokens=self.max_tokens, seed=seed)
        try:
            return [s for chunk in sampler.generate(requests, params) for s in chunk]
        finally:
            sampler.close()

    def _grade(self, problems: Sequence[Problem], samples: Sequence[Sample]) -> dict[tuple[str, int], Grade]:
        grades = {g.key: g for g in self.task.grader.grade({p.id: p for p in problems}, list(samples))}
        missing = [s.key for s in samples if s.key not in grades]
        if missing:
            raise BonbenchError(f"grader {self.task.grader.name!r} returned no grade for {missing[0]}; this is a grader bug")
        return grades

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
                                       _seed(self.cfg.seed, "ref"), reference=True)
            grades = self._grade(todo, samples)
            rows = [{"problem_id": s.problem_id, "sample_idx": s.sample_idx, "completion": s.completion,
                     "reward": grades[s.key].value()} for s in samples]
        # every rank learns every prompt's rewards, so a prompt that moves to another rank later is not redrawn
        rows = self.comm.all_gather_rows(rows)
        if rows and self.comm.is_main:
            self.p.ckpt.append_rows(self.p.ckpt.ref_samples_path, rows)
        for row in rows:
            self.ref_rewards.setdefault(row["problem_id"], []).append(float(row["reward"]))

    def step(self, step: int) -> dict[str, Any]:
        cfg, pol, comm = self.cfg, self.policy, self.comm
        t0 = time.perf_counter()
        problems = prompt_batch(self.task.problems, step, cfg.prompts_per_step, cfg.seed)
        # the same prompt twice in a step (tiny train sets) is one group of twice the size: keys stay unique
        everyone = list({p.id: p for p in problems}.values())
        per = {p.id: 0 for p in everyone}
        for p in problems:
            per[p.id] += cfg.group
        # this rank's groups: whole groups, so objectives (one group in, weights out) need no collective
        uniq = shard(everyone, comm.rank, comm.world)
        samples = self._sample(uniq, {pid: range(n) for pid, n in per.items()}, _seed(cfg.seed, "step", step))
        t_sample = time.perf_counter() - t0
        needs = self.objective.needs
        if "expert" in needs:
            samples += [Sample(p.id, per[p.id], expert_completion(self.task, p), 0, "stop") for p in uniq]
        grades = self._grade(uniq, samples) if samples else {}
        rationales: list[Sample] = []
        failed: list[Problem] = []
        if cfg.rationalize:  # each rank re-samples the failed prompts of its own groups
            failed = failed_prompts(uniq, samples, per, grades)
            rationales = self._rationalize(failed, per, grades, step)
            samples += rationales
        scores = None
        if self.verifier is not None:
            scores = ({sc.key: sc.score for sc in self.verifier.score({p.id: p for p in uniq}, samples, grades)}
                      if samples else {})
        if "ref_rewards" in needs:
            self._reference_rewards(uniq)
        prompts = {p.id: self.task.render(p, self.style) for p in uniq}  # rationalisations train without the hint
        pairs = [pol.encode(prompts[s.problem_id], s.completion) for s in samples]
        logp = pol.sequence_logprobs(pairs) if "logprobs" in needs else None
        ref_lp = ref_tok = None
        if "ref_logprobs" in needs or cfg.log_kl:
            ref_lp, ref_tok = pol.logprobs(pairs, "reference")
        features = values = None
        if self.value is not None:  # read before any update: V(x) does not depend on this step's samples
            features = (pol.prompt_features([pol.encode(prompts[p.id], "")[0] for p in uniq]) if uniq
                        else torch.zeros(0, pol.hidden_size, device=pol.device))  # a rank without groups
            values = dict(zip([p.id for p in uniq], self.value.predict(features).tolist()))

        groups = build_groups(samples, per, grades, scores=scores, logprobs=logp, ref_logprobs=ref_lp,
                              ref_rewards=self.ref_rewards, values=values)
        weights = objective_weights(self.objective, groups, len(samples))
        is_policy = np.array([s.sample_idx < per[s.problem_id] for s in samples], dtype=bool)
        group_size = np.array([per[s.problem_id] for s in samples], dtype=np.float64)
        # "batch" / "std" normalise over the global batch: the moments are summed over ranks
        weights = normalise_advantages(weights, is_policy, group_size, cfg.adv_norm,
                                       reduce=comm.sum if comm.active else None)
        rows_of = {pid: idx for pid, (idx, _) in groups.items()}
        value_stats: dict[str, Any] = {}
        if self.value is not None and features is not None and values is not None:
            target_fn = self.objective.value_target
            assert target_fn is not None, "objectives that need the value say what it regresses on"
            targets = [target_fn(groups[p.id][1]) for p in uniq]
            # the mean squared error over the step's groups on all ranks, its gradient summed over ranks:
            # every rank takes the same step, so the heads stay identical (as the policy's weights do)
            loss = self.value.update(features, targets, total=len(everyone) if comm.active else None,
                                     sum_grads=comm.sum_grads if comm.active else None)
            v_loss, v_sum, t_sum = comm.sum([loss, sum(values.values()), sum(targets)])
            value_stats = {"value_loss": v_loss, "value": v_sum / len(everyone), "value_target": t_sum / len(everyone)}

        lr = float(self.scheduler.get_last_lr()[0])  # the rate this step's update uses
        kl_coef = cfg.kl_at(step)
        # the loss divides by the step's groups and rows over all ranks (1/P, 1/R of the module docstring)
        n_rows = int(comm.sum([len(pairs)])[0])
        stats = self._optimise(pairs, weights, [rows_of[p.id] for p in uniq], kl_coef, (len(everyone), n_rows))
        pol.update_ema()
        policy_rows = [i for i, s in enumerate(samples) if s.sample_idx < per[s.problem_id]]
        rationale_keys = {s.key for s in rationales}
        rewards = np.array([grades[samples[i].key].value() for i in policy_rows])
        tok_lp = stats.pop("_token_logprobs")
        # KL(pi || base) of each policy sample by the k3 estimator: unbiased and never negative (sampled_kl)
        kl_part = sum(sampled_kl(tok_lp[i], ref_tok[i]) for i in policy_rows) if ref_tok is not None else 0.0
        solved = sum(max(grades[samples[i].key].value() for i in rows_of[p.id]) > 0 for p in uniq)
        # metrics over the global batch: sums over ranks, then the same ratios one process computes
        r_sum, r_sq, r_n, n_solved, w_abs, tokens, kl_sum = comm.sum([
            rewards.sum(), (rewards ** 2).sum(), len(rewards), solved, np.abs(weights).sum(),
            sum(len(pairs[i][1]) for i in policy_rows), kl_part])
        elapsed = time.perf_counter() - t0
        t_sample, elapsed = comm.max([t_sample, elapsed])  # a step lasts as long as its slowest rank
        rollouts = comm.gather_rows([
            {"step": step, "problem_id": s.problem_id, "sample_idx": s.sample_idx, "completion": s.completion,
             "reward": grades[s.key].value(), "answer": grades[s.key].answer, "weight": float(weights[i]),
             "expert": s.sample_idx >= per[s.problem_id], "n_tokens": len(pairs[i][1]),
             **({"rationale": True} if s.key in rationale_keys else {})}
            for i, s in enumerate(samples)])
        if comm.is_main:
            self.p.ckpt.append_rows(self.p.ckpt.rollouts_path, rollouts)
        mean = r_sum / r_n
        row: dict[str, Any] = {
            "step": step, "reward": mean, "reward_std": float(np.sqrt(max(r_sq / r_n - mean ** 2, 0.0))),
            "solved_groups": n_solved / len(everyone), "weight_abs_mean": w_abs / n_rows, "lr": lr, "kl_coef": kl_coef,
            "tokens": int(tokens), "tokens_per_s": tokens / max(elapsed, 1e-9), "sample_s": t_sample, "seconds": elapsed,
            "world_size": comm.world,
        }
        if ref_tok is not None:
            # KL(pi || pi_ref) per completion, the mean over this step's samples of sum_t e^r - 1 - r, r the
            # token log-ratio log pi_ref - log pi (rollout.sampled_kl): >= 0, unlike the plain log-ratio
            row["kl_ref"] = kl_sum / r_n
        if cfg.rationalize:
            n_failed, n_rationales = comm.sum([len(failed), len(rationales)])
            row["rationalized"] = int(n_failed)  # prompts with no correct sample, re-sampled with the hint
            row["rationales"] = int(n_rationales)  # hinted samples that reached the answer (trained on)
        row.update(value_stats)
        row.update(stats)
        return row

    def _rationalize(self, failed: Sequence[Problem], per: Mapping[str, int], grades: dict[tuple[str, int], Grade],
                     step: int) -> list[Sample]:
        """STaR's rationalisation: ``group`` samples per failed prompt with the gold answer as a hint,
        indices after the policy's (keys stay unique), graded against the unhinted problem; the
        correct ones come back (their grades added to ``grades``)."""
        if not failed:
            return []
        counts = {p.id: range(per[p.id], 2 * per[p.id]) for p in failed}
        drawn = self._sample([hinted(p) for p in failed], counts, _seed(self.cfg.seed, "rationale", step))
        got = self._grade(failed, drawn)
        kept = [s for s in drawn if got[s.key].value() > 0]
        grades.update({s.key: got[s.key] for s in kept})
        return kept


def train(cfg: TrainConfig, on_step: StepCallback | None = None) -> Path:
    """Train (or resume) ``cfg``; returns the checkpoint folder. Bad input raises BonbenchError first.
    One-line notices (resuming, already complete) go to the ``bonbench.apps.trainer`` logger at INFO,
    warnings through ``warnings`` as ``TrainingWarning``. Under a launcher (WORLD_SIZE > 1) this
    process is one data-parallel rank (``distributed``)."""
    # before the process group starts: bad input is the same error on every rank, and none waits
    prep = prepare(cfg)
    if before_start(prep):
        if on_step is not None and env_world()[0] == 0:
            on_step(cfg.steps, cfg.steps, {})  # a progress bar shows the run full
        return prep.ckpt.root
    comm, started = start(cfg.prompts_per_step)
    try:
        torch.manual_seed(cfg.seed)
        return Trainer(prep, on_step, comm).train()
    except BonbenchError as exc:
        if comm.active and not isinstance(exc, RankError):
            raise RankError(f"rank {comm.rank}: {exc}") from exc
        raise
    finally:
        stop(started)
