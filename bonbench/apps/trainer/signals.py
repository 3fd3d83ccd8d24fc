"""What a training step computes from its graded rollouts around the optimiser step: the token
pairs, log-probabilities and values the objective and the loss read (``signals``), the objective's
per-sample weights (``weights``), the learned value head's step (``value_step``) and the step's log
row with its rollout rows (``log_row``).

Each is a plain function of the step's ``step.Rollouts`` and the parts it is handed; ``loop``'s
``Trainer.step`` calls them in order. Under a launcher the sums are over ranks (``Comm``), so every
number logged is the global batch's. Nothing here samples, takes an optimiser step of the policy
(``update``) or writes a file (``loop`` appends the rows this returns).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from bonbench.api.objective import Group, Objective
from bonbench.apps.trainer.distributed import Comm
from bonbench.apps.trainer.policy import Policy
from bonbench.apps.trainer.rollout import build_groups, normalise_advantages, objective_weights, sampled_kl
from bonbench.apps.trainer.step import Rollouts
from bonbench.apps.trainer.value import ValueHead
from bonbench.core.records import Prompt

Groups = Mapping[str, tuple[list[int], Group]]  # each prompt's (row indices, Group)


@dataclass(frozen=True)
class Signals:
    """What the objective and the loss read besides grades: token pairs, log-probabilities, values."""

    pairs: list[tuple[list[int], list[int]]]
    logp: Any
    ref_logp: Any
    ref_tokens: Any
    features: torch.Tensor | None
    values: dict[str, float] | None


def signals(policy: Policy, prompts: Mapping[str, Prompt], r: Rollouts, needs: frozenset[str],
            value: ValueHead | None, log_kl: bool) -> Signals:
    """Token pairs (each sample after its problem's prompt in ``prompts``: rationalisations train
    without the hint) and the log-probabilities and values the objective and the log need; values are
    read before any update (V(x) does not depend on this step's samples)."""
    pairs = [policy.encode(prompts[s.problem_id], s.completion) for s in r.samples]
    logp = policy.sequence_logprobs(pairs) if "logprobs" in needs else None
    ref_lp = ref_tok = None
    if "ref_logprobs" in needs or log_kl:
        ref_lp, ref_tok = policy.logprobs(pairs, "reference")
    features = values = None
    if value is not None:
        features = (policy.prompt_features([policy.encode(prompts[p.id], "")[0] for p in r.mine]) if r.mine
                    else torch.zeros(0, policy.hidden_size, device=policy.device))  # a rank without groups
        values = dict(zip([p.id for p in r.mine], value.predict(features).tolist(), strict=True))
    return Signals(pairs, logp, ref_lp, ref_tok, features, values)


def weights(objective: Objective, r: Rollouts, sig: Signals, ref_rewards: Mapping[str, Sequence[float]],
            adv_norm: str, comm: Comm) -> tuple[Groups, np.ndarray]:
    """Each prompt's group and every row's weight from the objective, normalised as ``--adv-norm`` says
    ("batch" / "std" normalise over the global batch: the moments are summed over ranks)."""
    groups = build_groups(r.samples, r.per, r.grades, scores=r.scores, logprobs=sig.logp, ref_logprobs=sig.ref_logp,
                          ref_rewards=ref_rewards, values=sig.values)
    w = objective_weights(objective, groups, len(r.samples))
    is_policy = np.array([s.sample_idx < r.per[s.problem_id] for s in r.samples], dtype=bool)
    group_size = np.array([r.per[s.problem_id] for s in r.samples], dtype=np.float64)
    return groups, normalise_advantages(w, is_policy, group_size, adv_norm, reduce=comm.sum if comm.active else None)


def value_step(value: ValueHead | None, objective: Objective, r: Rollouts, groups: Groups, sig: Signals,
               comm: Comm) -> dict[str, Any]:
    """One step of the learned value head on the step's groups (its logged loss and means)."""
    if value is None or sig.features is None or sig.values is None:
        return {}
    target_fn = objective.value_target
    assert target_fn is not None, "objectives that need the value say what it regresses on"
    targets = [target_fn(groups[p.id][1]) for p in r.mine]
    # the mean squared error over the step's groups on all ranks, its gradient summed over ranks:
    # every rank takes the same step, so the heads stay identical (as the policy's weights do)
    loss = value.update(sig.features, targets, total=len(r.everyone) if comm.active else None,
                        sum_grads=comm.sum_grads if comm.active else None)
    v_loss, v_sum, t_sum = comm.sum([loss, sum(sig.values.values()), sum(targets)])
    return {"value_loss": v_loss, "value": v_sum / len(r.everyone), "value_target": t_sum / len(r.everyone)}


def log_row(step: int, r: Rollouts, sig: Signals, w: np.ndarray, groups: Groups, token_logprobs: Sequence[np.ndarray],
            t0: float, *, lr: float, kl_coef: float, n_rows: int, rationalize: bool,
            comm: Comm) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The step's metrics over the global batch (sums over ranks, then the ratios one process
    computes) and its rollout rows (every rank's on rank 0, none elsewhere)."""
    policy_rows = [i for i, s in enumerate(r.samples) if s.sample_idx < r.per[s.problem_id]]
    rationale_keys = {s.key for s in r.rationales}
    rewards = np.array([r.grades[r.samples[i].key].value() for i in policy_rows])
    # KL(pi || base) of each policy sample by the k3 estimator: unbiased and never negative (sampled_kl)
    kl_part = (sum(sampled_kl(token_logprobs[i], sig.ref_tokens[i]) for i in policy_rows)
               if sig.ref_tokens is not None else 0.0)
    solved = sum(max(r.grades[r.samples[i].key].value() for i in groups[p.id][0]) > 0 for p in r.mine)
    r_sum, r_sq, r_n, n_solved, w_abs, tokens, kl_sum, n_cut = comm.sum([
        rewards.sum(), (rewards ** 2).sum(), len(rewards), solved, np.abs(w).sum(),
        sum(len(sig.pairs[i][1]) for i in policy_rows), kl_part,
        sum(r.samples[i].finish_reason == "length" for i in policy_rows)])
    elapsed = time.perf_counter() - t0
    sample_s, elapsed = comm.max([r.sample_s, elapsed])  # a step lasts as long as its slowest rank
    rollouts = comm.gather_rows([
        {"step": step, "problem_id": s.problem_id, "sample_idx": s.sample_idx, "completion": s.completion,
         "reward": r.grades[s.key].value(), "answer": r.grades[s.key].answer, "weight": float(w[i]),
         "expert": s.sample_idx >= r.per[s.problem_id], "n_tokens": len(sig.pairs[i][1]),
         **({"rationale": True} if s.key in rationale_keys else {})}
        for i, s in enumerate(r.samples)])
    mean = r_sum / r_n
    row: dict[str, Any] = {
        "step": step, "reward": mean, "reward_std": float(np.sqrt(max(r_sq / r_n - mean ** 2, 0.0))),
        "solved_groups": n_solved / len(r.everyone), "weight_abs_mean": w_abs / n_rows, "lr": lr, "kl_coef": kl_coef,
        "tokens": int(tokens), "tokens_per_s": tokens / max(elapsed, 1e-9), "sample_s": sample_s, "seconds": elapsed,
        # per policy completion: its mean length in tokens, and the share the token limit cut (TRL's completions/*)
        "completion_length": tokens / r_n, "clipped_ratio": n_cut / r_n,
        "world_size": comm.world,
    }
    if sig.ref_tokens is not None:
        # KL(pi || pi_ref) per completion, the mean over this step's samples of sum_t e^r - 1 - r, r the
        # token log-ratio log pi_ref - log pi (rollout.sampled_kl): >= 0, unlike the plain log-ratio
        row["kl_ref"] = kl_sum / r_n
    if rationalize:
        n_failed, n_rationales = comm.sum([len(r.failed), len(r.rationales)])
        row["rationalized"] = int(n_failed)  # prompts with no correct sample, re-sampled with the hint
        row["rationales"] = int(n_rationales)  # hinted samples that reached the answer (trained on)
    return row, rollouts
