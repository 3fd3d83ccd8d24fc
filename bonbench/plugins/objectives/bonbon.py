"""BoNBoN (Gui, Garbacea, Veitch 2024, arXiv 2406.00832) as per-group weights: alpha * SFT on the best
of N + (1 - alpha) * IPO between the best and the worst of N, target log-ratio gap (N-1) H_{N-1}.

The weights are the exact gradient of the group's loss at the current theta (they depend on theta
through the log-probabilities, unlike the score-function objectives).
Exactness: tests/test_objectives_bon.py; docs/objectives-bon.md.

It does not sample or compute log-probabilities: the paper's data pipeline (N samples of the
reference model) is not here, the group's policy rows play that role, and the trainer fills the
``Group``'s log-probabilities. Importing it imports numpy, not torch (``bonbon_loss_torch`` imports
torch when called).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bonbench.api.objective import Group, Objective, register_objective
from bonbench.core.errors import BonbenchError
from bonbench.plugins.objectives.common import check_int, policy_rows_with_ref, scatter

GUI = "Gui, Garbacea, Veitch 2024 (BoNBoN), arXiv 2406.00832"



def bonbon_target(N: int) -> float:
    """1/(2 beta*_N) = (N-1) H_{N-1}: E over N reference draws of the gap between the best and the worst
    draw's log(pi_bon/pi_ref) for a continuous reward ((N-1)(E log U_(N) - E log U_(1)) with U_(N) ~
    Beta(N, 1), U_(1) ~ Beta(1, N)); beta*_N = 1/(2 (N-1) sum_{k<N} 1/k). Checked in the tests."""
    return (N - 1) * sum(1.0 / k for k in range(1, N))


def bonbon_pairs(rewards: np.ndarray, N: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(best, worst, P, top): for every N-subset of the G rows its best and worst row, aggregated.

    Rows are ordered by (reward, row index): rows are iid draws, so breaking ties by index is a
    uniformly random tie-break in distribution. With ascending ranks a < b, the pair (worst = a,
    best = b) occurs in C(b-a-1, N-2) of the C(G, N) subsets; P are those fractions, ``top`` the
    fraction of subsets whose best is each row (C(b-1, N-1)/C(G, N), the hockey-stick sum of P).
    """
    r = np.asarray(rewards, dtype=np.float64)
    G = r.size
    if N < 2 or G < N:
        raise BonbenchError(f"bonbon needs N >= 2 and at least N = {N} samples per prompt, got G = {G}")
    order = np.argsort(r, kind="stable")
    total = math.comb(G, N)
    worst, best, P = [], [], []
    for a in range(G):
        for b in range(a + N - 1, G):
            worst.append(order[a])
            best.append(order[b])
            P.append(math.comb(b - a - 1, N - 2) / total)
    top = np.zeros(G)
    for b in range(N - 1, G):
        top[order[b]] = math.comb(b, N - 1) / total
    return np.array(best, dtype=int), np.array(worst, dtype=int), np.array(P), top


def bonbon_loss_numpy(logprobs: np.ndarray, ref_logprobs: np.ndarray, rewards: np.ndarray, N: int = 8,
                      alpha: float = 0.5) -> float:
    """BoNBoN loss of one group (to minimise), averaged over its N-subsets:

      alpha * (-log pi_theta(y_best)) + (1 - alpha) * (h(y_best) - h(y_worst) - (N-1) H_{N-1})^2,
      h(y) = log pi_theta(y) - log pi_ref(y)   (SFT-BoN + IPO-BoN with beta*_N, Gui et al. §4)
    """
    lp = np.asarray(logprobs, dtype=np.float64)
    h = lp - np.asarray(ref_logprobs, dtype=np.float64)
    best, worst, P, top = bonbon_pairs(rewards, N)
    ipo = np.sum(P * (h[best] - h[worst] - bonbon_target(N)) ** 2)
    return float(alpha * np.sum(top * -lp) + (1.0 - alpha) * ipo)


def bonbon_loss_torch(logprobs: Any, ref_logprobs: Any, rewards: np.ndarray, N: int = 8, alpha: float = 0.5) -> Any:
    """``bonbon_loss_numpy`` on torch tensors (logprobs carries the gradient; ref_logprobs is detached):
    the trainer's loss hook for BoNBoN."""
    import torch

    best, worst, P, top = bonbon_pairs(rewards, N)
    lp = logprobs
    h = lp - ref_logprobs.detach()
    bi = torch.as_tensor(best, device=lp.device)
    wi = torch.as_tensor(worst, device=lp.device)
    Pt = torch.as_tensor(P, dtype=lp.dtype, device=lp.device)
    tt = torch.as_tensor(top, dtype=lp.dtype, device=lp.device)
    ipo = (Pt * (h[bi] - h[wi] - bonbon_target(N)) ** 2).sum()
    return alpha * (tt * -lp).sum() + (1.0 - alpha) * ipo


def bonbon_weights(logprobs: np.ndarray, ref_logprobs: np.ndarray, rewards: np.ndarray, N: int = 8,
                   alpha: float = 0.5) -> np.ndarray:
    """w = -d(bonbon loss)/d log pi_theta(y_i) at the current log-probabilities.

    The loss is a function of the group's log pi_theta(y_i) only, so by the chain rule
    sum_i w_i grad log pi_theta(y_i) is exactly -grad loss at the current theta: the IPO term needs no
    linearisation. SFT part: alpha * top_i; IPO part: with D = h_best - h_worst - (N-1) H_{N-1},
    -2 (1-alpha) P D on the best row and +2 (1-alpha) P D on the worst. Unlike the score-function
    objectives, the weights depend on theta through the logprobs: recompute them at every step
    (the trainer's surrogate -sum w_i log pi is a correct gradient only at the theta it came from).
    """
    lp = np.asarray(logprobs, dtype=np.float64)
    h = lp - np.asarray(ref_logprobs, dtype=np.float64)
    best, worst, P, top = bonbon_pairs(rewards, N)
    D = h[best] - h[worst] - bonbon_target(N)
    w = alpha * top
    np.add.at(w, best, -2.0 * (1.0 - alpha) * P * D)
    np.add.at(w, worst, 2.0 * (1.0 - alpha) * P * D)
    return w


@register_objective("bonbon", paper=GUI, needs=("logprobs", "ref_logprobs"),
                    summary="BoNBoN: alpha SFT on the best of N + (1-alpha) IPO(best vs worst of N, target (N-1)H_{N-1})")
def bonbon(N: int = 8, alpha: float = 0.5) -> Objective:
    """BoNBoN (``bonbon_loss_numpy``), as the exact loss gradient at the current theta (``bonbon_weights``).

    The paper's data are N samples of the reference model, best and worst by the reward; here the
    group's policy rows play that role (sample them from pi_ref, or accept an on-policy variant whose
    sampling distribution is not differentiated). G > N averages over all N-subsets. alpha: the paper
    tunes it (value not recovered here); 0.5 is a neutral default. alpha = 1 is SFT on the best of N.
    """
    check_int("bonbon", "N", N, 2)
    if not (isinstance(alpha, (int, float)) and 0.0 <= alpha <= 1.0):
        raise BonbenchError(f"bonbon: alpha must lie in [0, 1], got {alpha!r}")

    def weights(group: Group) -> np.ndarray:
        mask, r, lp, lr = policy_rows_with_ref(group, "bonbon")
        return scatter(mask, bonbon_weights(lp, lr, r, N, alpha))

    return Objective("bonbon", weights, frozenset({"logprobs", "ref_logprobs"}), {"N": N, "alpha": alpha}, N)
