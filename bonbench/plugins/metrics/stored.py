"""The metric kinds a run's comparisons write (``bonbench.pipeline.compare``): kl, kl_bon@k and
winrate@k, as records that compute nothing.

They are registered so that their names read like every other metric's: their better side (kl and
kl_bon@k lower: distance from the reference), whether a value is a closed form of n and k (kl_bon@k
to the run's own policy), their footnotes and their colours. ``how`` says what writes each, which is
what a user who asks for one as a metric of the run is told.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bonbench.api.metric.kind import MetricKind

KL_FOOTNOTE = ("kl estimates KL(policy ‖ reference) in nats per completion as the mean over the policy's own "
               "samples of log pi(y|x) − log pi_ref(y|x). The mean is unbiased and the true KL is ≥ 0, but single "
               "terms are negative wherever the reference gives a sample more probability than the policy, so when "
               "the true KL is small next to the sampling noise the estimate and its CI can fall below 0; read a "
               "negative value as \"not distinguishable from 0 at this sample size\".")
CLOSED_FORM_FOOTNOTE = ("kl_bon@k without a reference model is the KL of reward-best-of-k selection to the run's own "
                        "samples; with distinct rewards it equals the same closed form of n and k on every problem, "
                        "so it has no sampling interval and is not a measurement of the model (never gated).")


def _same_on_every_problem(notes: Mapping[str, Any], per_problem: Mapping[str, float] | None) -> bool:
    """kl_bon@k files written before ``closed_form`` was recorded: closed-form when every problem has
    the same value (the closed form of n and k that distinct rewards give)."""
    if not per_problem:
        return False
    values = list(per_problem.values())
    return max(values) - min(values) <= 1e-12 * max(1.0, abs(values[0]))


KL = MetricKind(
    "kl", "KL(policy ‖ reference) in nats per completion, the mean of log pi − log pi_ref over samples",
    direction="lower", takes_k=False, footnote=KL_FOOTNOTE, how="add --metric kl with --ref-model MODEL")
KL_BON = MetricKind(
    "kl_bon", "KL of reward-best-of-k selection to the reference (or to the run's own policy)",
    direction="lower", closed_form=_same_on_every_problem, footnote=CLOSED_FORM_FOOTNOTE, color="#9467bd",
    how="a reward-judged run writes kl_bon@k beside every max@k; ask for max@k")
WINRATE = MetricKind(
    "winrate", "probability that the reward-best of k samples beats the reference (ties 1/2); winrate is k = 1",
    bare=True, color="#d62728",
    how="add --metric winrate or winrate@k on a reward-judged task (with --ref-run RUN_DIR or reference answers)")
