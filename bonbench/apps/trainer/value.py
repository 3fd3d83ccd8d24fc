"""The learned value head: a per-prompt estimate V(x) that objectives use as a baseline or as the
failure probability p (Chow et al., math-reference §2.8: "a learned value baseline is used in all RL
runs ... for BoN-RLB the value network estimates the failure probability p").

V(x) = w . h(x) + b, a linear head on h(x), the policy's last-layer hidden state at the last prompt
token (``Policy.prompt_features``, no gradient). It regresses by mean squared error on one number
per prompt group, the objective's ``value_target`` (an unbiased estimate of E[R | x], J_N(x) or p(x)),
with its own AdamW at its own rate (``--value-lr``). The features are detached, so the value loss
never moves the policy and the policy's gradient stays exactly -(1/P) sum w grad log pi (the
trainer's exactness test is unchanged); the cost is that the head can only read what the policy's
features already separate. Estimates are read before a step's samples are seen (a function of x
alone), so a baseline built on them adds no bias; the head then learns from that step's groups.

TRL's PPO value head (``AutoModelForCausalLMWithValueHead``) is the same shape (a linear layer on the
last hidden state) but shares the backbone's gradient; the separation here is deliberate.

This module does not decide which objectives use the value (they declare "value" in ``needs``) and
does not save itself (``checkpoint`` stores ``state_dict``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch


class ValueHead:
    """V(x) = w . h(x) + b with its own AdamW (see the module docstring)."""

    def __init__(self, hidden_size: int, lr: float, device: torch.device | str = "cpu") -> None:
        self.head = torch.nn.Linear(hidden_size, 1, dtype=torch.float32, device=device)
        # start at V = 0 everywhere: no baseline (or p = 0) until the head has seen a group
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)
        self.optimizer = torch.optim.AdamW(self.head.parameters(), lr=lr, weight_decay=0.0)

    @torch.no_grad()
    def predict(self, features: torch.Tensor) -> np.ndarray:
        """V for each row of ``features`` [P, H] as float64."""
        return self.head(features.float()).squeeze(-1).double().cpu().numpy()

    def update(self, features: torch.Tensor, targets: Sequence[float], total: int | None = None,
               sum_grads: Callable[[Sequence[torch.nn.Parameter]], None] | None = None) -> float:
        """One AdamW step on the mean squared error to ``targets``; returns the loss before the step.
        Data parallelism: ``total`` is the number of prompts over all ranks (the squared errors are
        divided by it, not by ``len(targets)``, and the returned loss is this rank's share of the
        sum), and ``sum_grads`` sums the head's gradients over ranks before the step, so every rank
        takes the single-process step of the global batch (a rank may hold no prompts)."""
        y = torch.tensor(list(targets), dtype=torch.float32, device=features.device)
        self.optimizer.zero_grad(set_to_none=True)
        pred = self.head(features.float().detach()).squeeze(-1)
        if total is None:
            loss = torch.nn.functional.mse_loss(pred, y)
        else:
            loss = ((pred - y) ** 2).sum() / max(total, 1)
        loss.backward()
        if sum_grads is not None:
            sum_grads(list(self.head.parameters()))
        self.optimizer.step()
        return float(loss.detach())

    def state_dict(self) -> dict[str, Any]:
        return {"head": {k: v.detach().cpu().clone() for k, v in self.head.state_dict().items()},
                "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.head.load_state_dict(state["head"])
        self.optimizer.load_state_dict(state["optimizer"])
