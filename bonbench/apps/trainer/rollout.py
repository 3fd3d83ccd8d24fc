"""One step's rollout turned into what the optimiser needs: per-prompt ``Group``s from the step's
samples, grades and side information, the objective's weights for every row, the optional batch
normalisation of those weights (advantages), and STaR's hinted problems for rationalisation.

Rows are found by their key (problem_id, sample_idx), never by position in a file. A prompt's
policy samples have indices 0..G_j-1; rows with larger indices (expert demonstrations, STaR's
rationalisations) are not samples of the policy and are marked ``expert`` in their group.

This module samples nothing and computes no gradient (``loop`` does both); it is pure numbers in,
numbers out, so each piece is tested without a model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import numpy as np

from bonbench.api.objective import Group, Objective
from bonbench.api.task import Task
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Grade, Problem, Sample


def rows_by_problem(samples: Sequence[Sample]) -> dict[str, list[int]]:
    """Row indices of each prompt's samples, in the order they appear."""
    rows: dict[str, list[int]] = {}
    for i, s in enumerate(samples):
        rows.setdefault(s.problem_id, []).append(i)
    return rows


def build_groups(samples: Sequence[Sample], per: Mapping[str, int], grades: Mapping[tuple[str, int], Grade], *,
                 scores: Mapping[tuple[str, int], float] | None = None, logprobs: Sequence[float] | None = None,
                 ref_logprobs: Sequence[float] | None = None, ref_rewards: Mapping[str, Sequence[float]] | None = None,
                 values: Mapping[str, float] | None = None) -> dict[str, tuple[list[int], Group]]:
    """Each prompt's (row indices, ``Group``); ``per[pid]`` is its number of policy samples."""
    out: dict[str, tuple[list[int], Group]] = {}
    for pid, idx in rows_by_problem(samples).items():
        keys = [samples[i].key for i in idx]
        out[pid] = (idx, Group(
            rewards=np.array([grades[k].value() for k in keys]),
            answers=tuple(grades[k].answer for k in keys),
            scores=None if scores is None else np.array([scores[k] for k in keys]),
            logprobs=None if logprobs is None else np.array([logprobs[i] for i in idx]),
            ref_logprobs=None if ref_logprobs is None else np.array([ref_logprobs[i] for i in idx]),
            ref_rewards=np.array(ref_rewards[pid]) if ref_rewards and pid in ref_rewards else None,
            expert=np.array([samples[i].sample_idx >= per[pid] for i in idx]),
            value=None if values is None else float(values[pid]),
        ))
    return out


def objective_weights(objective: Objective, groups: Mapping[str, tuple[list[int], Group]], n_rows: int) -> np.ndarray:
    """Every row's weight from the objective, checked (shape, finiteness)."""
    weights = np.zeros(n_rows)
    for pid, (idx, group) in groups.items():
        w = np.asarray(objective.weights(group), dtype=np.float64)
        if w.shape != (len(idx),) or not np.all(np.isfinite(w)):
            raise BonbenchError(f"objective {objective.name!r} returned bad weights for {pid!r}: {w!r}")
        weights[idx] = w
    return weights


def normalise_advantages(weights: np.ndarray, policy: np.ndarray, group_size: np.ndarray, mode: str,
                         reduce: Callable[[Sequence[float]], list[float]] | None = None) -> np.ndarray:
    """Batch normalisation of the step's advantages (Chow et al.: "advantages are normalised over the batch").

    The advantage of a policy row is a_i = G_j w_i (weights carry their group's 1/G_j). ``mode``:
    "none" returns ``weights``; "batch" whitens, a <- (a - mean a) / std a over the step's policy rows
    (the PPO / TRL convention); "std" only divides by std a (keeps each weight's sign and the
    estimator's direction). The result is divided by G_j again, so the loss keeps its scale
    convention. Rows that are not policy samples (demonstrations) keep their weights. A batch whose
    advantages are all equal (std 0) is only centred ("batch") or left as is ("std").
    Normalising by a statistic of the batch makes an unbiased estimator biased (by a per-step scale
    and, for "batch", a shift); it trades that for steps of a steady size.
    ``reduce`` (data parallelism: an element-wise sum over ranks, called by every rank) makes the
    mean and std those of the global batch, each rank holding part of its rows (maybe none).
    """
    if mode == "none":
        return weights
    if mode not in ("batch", "std"):
        raise BonbenchError(f"unknown advantage normalisation {mode!r}; choose from none, batch, std")
    out = np.array(weights, dtype=np.float64)
    a = out[policy] * group_size[policy]
    if reduce is None:
        if a.size == 0:
            return out
        mean, std = float(a.mean()), float(a.std())
    else:
        # two passes, as numpy's std: the mean first, then the squared deviations from it
        n, total = reduce([float(a.size), float(a.sum())])
        if n == 0:
            return out
        mean = total / n
        std = float(np.sqrt(reduce([float(((a - mean) ** 2).sum())])[0] / n))
        if a.size == 0:
            return out
    centred = a - mean if mode == "batch" else a
    scaled = centred / std if std > 0 else centred
    out[policy] = scaled / group_size[policy]
    return out


# ------------------------------------------------------------------------------------------------
# STaR rationalisation (Zelikman et al. 2022, arXiv 2203.14465, §3.2)

HINT = "\n\n(Hint: the final answer is {answer}.)"


def check_gold_answers(task: Task) -> None:
    """Rationalisation hints with the gold answer: the task must be judged by correctness and carry
    reference solutions (then ``Problem.target`` is an answer, not test code or a reward prompt)."""
    if task.judged_by == "reward" or not all(p.target and p.meta.get("solution") for p in task.problems):
        raise BonbenchError(f"--rationalize hints the gold answer, and task {task.name!r} has no gold answers with "
                            "reference solutions in its train split; use a task that has them (math) or drop --rationalize")


def hinted(problem: Problem) -> Problem:
    """The problem with its gold answer appended as a hint (the same id: its samples are graded as its own)."""
    return replace(problem, input=problem.input + HINT.format(answer=problem.target))


def failed_prompts(problems: Sequence[Problem], samples: Sequence[Sample], per: Mapping[str, int],
                   grades: Mapping[tuple[str, int], Grade]) -> list[Problem]:
    """Prompts none of whose policy samples is correct (value > 0): the ones STaR rationalises."""
    solved = {s.problem_id for s in samples if s.sample_idx < per[s.problem_id] and grades[s.key].value() > 0}
    return [p for p in problems if p.id not in solved]


def sampled_kl(policy_tokens: np.ndarray, ref_tokens: np.ndarray) -> float:
    """KL(pi || pi_ref) of one completion sampled from pi, estimated so that it cannot go negative:
    sum_t exp(r_t) - 1 - r_t with r_t = log pi_ref(y_t | y<t) - log pi(y_t | y<t) (Schulman's "k3",
    the estimator of TRL's GRPO). Each term is >= 0 (e^r >= 1 + r) and, y_t drawn from pi, its
    expectation given the prefix is KL(pi(.|y<t) || pi_ref(.|y<t)) (E e^r = 1, E -r = that KL), so
    the sum is an unbiased estimate of the sequence KL. The plain log-ratio sum (k1, -sum_t r_t) is
    unbiased too, but one sample of it is negative whenever pi_ref gave the sample more probability."""
    r = np.asarray(ref_tokens, dtype=np.float64) - np.asarray(policy_tokens, dtype=np.float64)
    return float(np.sum(np.expm1(r) - r))
