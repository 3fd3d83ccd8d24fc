"""Every exact estimator in one place (the metrics' documented facade), and ``ProblemOutcome``, the
per-problem record the metric kinds' functions read.

Every estimator averages an inference procedure (pass / verifier best-of / majority vote) over all
k-subsets of a problem's n samples, exactly, without enumerating subsets (math-reference §1):

* ``pass_at_k``: Chen et al. 2021 (arXiv 2107.03374) product form. For real rewards it is max@k,
  the expected best reward of k samples (the oracle-verifier bon@k).
* ``bon_at_k``: expected ``correct`` of the top-scored sample of a random k-subset, score ties broken
  uniformly (rank weights C(i-1, k-1)/C(n, k), averaged over each tie block).
* ``maj_at_k``: exact probability that the plurality answer of a random k-subset is correct, ties
  uniform, ``None`` answers abstaining, a subset without votes scoring 0; every k from one
  generating-function pass (math-reference §1.3). About 0.5 ms of CPU per problem at n = 256
  (benchmarks/bench_estimators.py).

Per-problem functions raise ``ValueError`` for k < 1, k > n or mismatched lengths; the ``*_curve``
functions return NaN where a problem has fewer than k samples (never 1.0). Dataset values with
bootstrap CIs (``compute_metrics``, ``compute_curves``) are the metric registry's
(``bonbench.api.metric.values``): a metric kind is a registered record that wraps these functions
(``bonbench.plugins.metrics``).

Numerics: all counts are sums of products of non-negative numbers (no cancellation, no FFT), so
every coefficient keeps float64 relative precision. maj@k counts reach C(n, n/2), which float64 holds
up to n = 1024; above that the counts are kept in the platform's extended ``longdouble`` when it has
the range (x86-64 Linux), otherwise maj@k raises ``ValueError``. pass@k and bon@k have no n limit.

Layout: pass@k / bon@k are ``bonbench.metrics.pass_bon``, maj@k ``bonbench.metrics.maj``, the
bootstrap ``bonbench.metrics.bootstrap``, per-group metric names ``bonbench.metrics.names``, the
record of Monte Carlo curves ``bonbench.metrics.montecarlo`` and the shared argument checks
``bonbench.metrics.checks``. This module is also the metrics' documented
facade for users: it hands on their public names, so ``from bonbench.metrics.estimators import ...``
reaches every estimator. Nothing inside bonbench imports through it (each module imports a name
from the module that defines it; ``tests/layer_rules.py`` FACADES).

What it does not do: grading, answer canonicalisation (answers are compared with ``==``/hash),
parsing metric names, scaling-law fits, I/O.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

# the facade (see the docstring): users import every estimator, the per-group names, and the maj
# internals benchmarks/bench_estimators.py times, from this module
from bonbench.metrics.bootstrap import bootstrap_ci, paired_bootstrap_diff
from bonbench.metrics.maj import FLOAT64_MAX_N, WINS_CACHE, maj_at_k, maj_curve, maj_terms
from bonbench.metrics.montecarlo import SampledCurve
from bonbench.metrics.names import group_metric_name, split_metric_name
from bonbench.metrics.pass_bon import (
    bon_at_k,
    bon_curve,
    bon_weights,
    mean_correct,
    pass_at_k,
    pass_curve,
)

__all__ = [
    "FLOAT64_MAX_N", "WINS_CACHE", "ProblemOutcome", "SampledCurve", "bon_at_k", "bon_curve", "bon_weights",
    "bootstrap_ci", "group_metric_name", "maj_at_k", "maj_curve", "maj_terms", "mean_correct", "paired_bootstrap_diff",
    "pass_at_k", "pass_curve", "split_metric_name",
]


@dataclass(frozen=True)
class ProblemOutcome:
    """One problem's samples, in sample order: grader ``correct`` (0/1 or a reward), canonical
    ``answers`` (None abstains), verifier ``scores`` (None when no verifier ran) and the samples'
    ``logprobs`` (None unless a metric that reads them was asked for)."""

    problem_id: str
    correct: tuple[float, ...]
    answers: tuple[Hashable | None, ...]
    scores: tuple[float, ...] | None = None
    logprobs: tuple[float, ...] | None = None
