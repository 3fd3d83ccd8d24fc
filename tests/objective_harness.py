"""Exact expectations of objective estimators on a tabular softmax policy.

The policy is pi = softmax(theta) over K outcomes (an "answer set"); grad_theta log pi(a) = e_a - pi.
``expected_estimate`` enumerates every G-tuple of outcomes and returns
E[sum_i w_i grad log pi(y_i)] exactly (up to float rounding). ``k_sample_gradient`` is the exact
gradient of J_k = E_{y_1..k ~ pi}[f(y_1..k)] by the score-function identity (exact, not an estimate),
and ``autograd`` the gradient of any torch function of theta in float64.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np
import torch


def softmax(theta: np.ndarray) -> np.ndarray:
    z = np.exp(theta - theta.max())
    return z / z.sum()


def expected_estimate(theta: np.ndarray, G: int, weights_of: Callable[[tuple[int, ...]], np.ndarray]) -> np.ndarray:
    """E over G iid draws from softmax(theta) of sum_i w_i (e_{a_i} - pi), w = weights_of(tuple)."""
    pi = softmax(theta)
    K = len(theta)
    eye = np.eye(K)
    total = np.zeros(K)
    for tup in itertools.product(range(K), repeat=G):
        prob = float(np.prod(pi[list(tup)]))
        w = np.asarray(weights_of(tup), dtype=np.float64)
        total += prob * sum(w[i] * (eye[a] - pi) for i, a in enumerate(tup))
    return total


def k_sample_objective(theta: np.ndarray, k: int, f: Callable[[tuple[int, ...]], float]) -> float:
    """J_k = E[f(y_1..k)] exactly."""
    pi = softmax(theta)
    return float(sum(np.prod(pi[list(t)]) * f(t) for t in itertools.product(range(len(theta)), repeat=k)))


def k_sample_gradient(theta: np.ndarray, k: int, f: Callable[[tuple[int, ...]], float]) -> np.ndarray:
    """grad J_k = E[f(y) sum_i grad log pi(y_i)] (score-function identity; exact)."""
    return expected_estimate(theta, k, lambda t: np.full(k, f(t)))


def autograd(fn: Callable[[torch.Tensor], torch.Tensor], theta: np.ndarray) -> np.ndarray:
    """The gradient of a scalar torch function of theta, in float64."""
    t = torch.tensor(np.asarray(theta, dtype=np.float64), requires_grad=True)
    (g,) = torch.autograd.grad(fn(t), t)
    return g.detach().numpy()


def random_thetas(K: int, count: int, seed: int = 0) -> Sequence[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(size=K) for _ in range(count)]
