"""Verifiers: score every sample so that bon@k can pick the best of k.

- ``oracle``: the task's own correctness (1.0 / 0.0). bon@k then equals pass@k exactly, which makes
  it the upper bound a learned verifier is compared with.
- ``logprob``: the policy's mean token log-probability of the completion (no extra model). The
  sampler records the cumulative log-probability; the mean removes the length bias of the sum.
- reward models (``--verifier rm:<spec>``) live in ``bonbench.plugins.rewards`` (``RewardVerifier``).

Every verifier has a ``name``, a ``version`` (bump it when its scoring changes) and a
``fingerprint`` (what it was built from: a reward model's weights, say); stored scores are reused
only when all three match. ``uses_grades`` marks verifiers whose scores are a function of the
grades, so that a regrade also re-scores them.

Cost (``Score.tokens``, ``Score.calls``): both read no model, so every row records 0 tokens and 0
calls: the oracle reads the grade and logprob a number the sampler already recorded. 0 is a
measured cost, unlike None (a row of a verifier that does not count, or written before the fields).

Verifier scores are stored in ``scores/<verifier>.jsonl`` rows keyed by (problem_id, sample_idx).
Verifiers are registered through the ``bonbench.verifiers`` entry-point group (pyproject.toml); this
module imports nothing from the registry and loads no models.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bonbench.core.errors import BonbenchError
from bonbench.core.records import Grade, Problem, Sample, Score


class OracleVerifier:
    """Score = the grade's outcome: correctness as 1.0 / 0.0 (None counts as 0), or the reward of a
    reward-judged task (``Grade.value``)."""

    name = "oracle"
    version = 1
    fingerprint = ""
    uses_grades = True
    reads_text = False  # no think= reading applies (bonbench.api.think)

    def score(self, problems: Mapping[str, Problem], samples: Sequence[Sample],
              grades: Mapping[tuple[str, int], Grade]) -> list[Score]:
        out = []
        for s in samples:
            g = grades.get(s.key)
            if g is None:
                raise BonbenchError(f"oracle verifier: sample {s.key} has no grade; run grading first (`bonbench run` does)")
            out.append(Score(s.problem_id, s.sample_idx, self.name, g.value(), tokens=0, calls=0))
        return out


class LogprobVerifier:
    """Score = mean token log-probability under the sampling policy."""

    name = "logprob"
    version = 1
    fingerprint = ""
    uses_grades = False
    reads_text = False  # no think= reading applies (bonbench.api.think)

    def score(self, problems: Mapping[str, Problem], samples: Sequence[Sample],
              grades: Mapping[tuple[str, int], Grade]) -> list[Score]:
        out = []
        for s in samples:
            lp = s.mean_logprob
            if lp is None:
                raise BonbenchError(
                    f"logprob verifier: sample {s.key} has no log-probability (scripted or imported samples); "
                    "use --verifier oracle or a reward model, or sample with --backend vllm|hf"
                )
            out.append(Score(s.problem_id, s.sample_idx, self.name, float(lp), tokens=0, calls=0))
        return out

