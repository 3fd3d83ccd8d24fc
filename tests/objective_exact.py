"""An independent exactness checker for the trainer's per-group objectives (issue 24, section 1).

A tabular softmax policy pi = softmax(theta) over K outcomes. The exact expectation of an
objective's per-group update E[sum_i w_i grad log pi(y_i)] is computed by enumerating every
composition of a group of G iid draws (counts n_1..n_K with their multinomial probability): the
objectives' weights are functions of the group as a multiset, so one ordering per composition is
enough, and G = 32 costs thousands of calls instead of K^G. The objectives are reached only through
their public API (``make_objective(...).weights``). Objective values are written here from their
definitions (closed forms or sums over k-tuples) in torch float64, and differentiated by autograd,
so nothing of the objectives' own algebra is reused.

``ascent_coefficient`` reduces an expected update to (c, cosine, relative error) against the exact
gradient: c = <E, g>/|g|^2, so E = c g exactly when the cosine is 1 (c = 1: unbiased).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import torch

from bonbench.api.objective import Group


def softmax(theta: np.ndarray) -> np.ndarray:
    z = np.exp(np.asarray(theta, dtype=np.float64) - np.max(theta))
    return z / z.sum()


def theta_of(probs: Sequence[float]) -> np.ndarray:
    """Logits whose softmax is ``probs`` (all > 0)."""
    return np.log(np.asarray(probs, dtype=np.float64))


def compositions(G: int, K: int) -> Iterator[tuple[int, ...]]:
    """Every (n_1..n_K) with n_a >= 0 and sum n_a = G (stars and bars)."""
    for bars in itertools.combinations(range(G + K - 1), K - 1):
        edges = (-1,) + bars + (G + K - 1,)
        yield tuple(edges[j + 1] - edges[j] - 1 for j in range(K))


def log_multinomial(counts: Sequence[int], probs: np.ndarray) -> float:
    G = sum(counts)
    out = math.lgamma(G + 1)
    for n, p in zip(counts, probs, strict=True):
        if n:
            out += n * math.log(p) - math.lgamma(n + 1)
    return out


def expected_update(theta: np.ndarray, G: int, weights_of: Callable[[np.ndarray], np.ndarray],
                    sample_probs: np.ndarray | None = None) -> np.ndarray:
    """E over G iid draws (from softmax(theta), or ``sample_probs``) of sum_i w_i (e_{a_i} - pi_theta).

    ``weights_of(outcomes)`` gets the group's outcome indices (sorted) and returns one weight per row.
    """
    pi = softmax(theta)
    q = pi if sample_probs is None else np.asarray(sample_probs, dtype=np.float64)
    K = pi.size
    total = np.zeros(K)
    for counts in compositions(G, K):
        if any(n and q[a] == 0 for a, n in enumerate(counts)):
            continue
        outcomes = np.repeat(np.arange(K), counts)
        w = np.asarray(weights_of(outcomes), dtype=np.float64)
        step = np.bincount(outcomes, weights=w, minlength=K) - w.sum() * pi
        total += math.exp(log_multinomial(counts, q)) * step
    return total


def grad(J: Callable[[torch.Tensor], torch.Tensor], theta: np.ndarray) -> np.ndarray:
    """d J / d theta in float64 by autograd; J gets pi = softmax(theta) as a tensor."""
    t = torch.tensor(np.asarray(theta, dtype=np.float64), requires_grad=True)
    (g,) = torch.autograd.grad(J(torch.softmax(t, 0)), t)
    return g.numpy()


def tuple_expectation(pi: torch.Tensor, k: int, f: Callable[[tuple[int, ...]], float]) -> torch.Tensor:
    """E[f(y_1..k)] over k iid draws, summed over all K^k tuples (a polynomial in pi)."""
    K = pi.shape[0]
    total = torch.zeros((), dtype=torch.float64)
    for t in itertools.product(range(K), repeat=k):
        v = f(t)
        if v:
            total = total + v * torch.prod(pi[list(t)])
    return total


def ascent_coefficient(update: np.ndarray, g: np.ndarray) -> tuple[float, float, float]:
    """(c, cosine, relative error |E - g| / |g|) of an expected update E against the gradient g."""
    gg = float(g @ g)
    c = float(update @ g) / gg
    cos = float(update @ g) / math.sqrt(gg * float(update @ update)) if np.any(update) else 0.0
    return c, cos, float(np.linalg.norm(update - g) / math.sqrt(gg))


def group_of(rewards: np.ndarray, **fields: np.ndarray | None) -> Callable[[np.ndarray], Group]:
    """outcomes -> Group with per-outcome arrays indexed by the outcomes (``fields`` per outcome)."""
    def build(outcomes: np.ndarray) -> Group:
        kw = {k: (None if v is None else np.asarray(v)[outcomes]) for k, v in fields.items()}
        return Group(rewards=np.asarray(rewards, dtype=np.float64)[outcomes], **kw)
    return build
