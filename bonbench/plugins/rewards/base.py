"""The reward-model interface, the task grader built on it, and the bon@k verifier adapter.

``RewardModel`` (the protocol lives in ``bonbench.api.reward``) is what every backend implements
(Hugging Face classifiers, vLLM pooling models,
the offline IMDB classifier, the TL;DR proxies): a filename-safe ``name``, a ``version`` (bumped
when its scoring recipe changes), a ``fingerprint`` (a digest of what it scores with: weights,
config, training data) and a batched ``score(prompts, completions)``. Higher is better.

What text a reward model judges: the prompt given to ``score`` is the problem's own text
(``Problem.input``, or ``Problem.meta["reward_prompt"]`` when a task sets one), never the rendered
model prompt. The rendered prompt carries few-shot examples, chat templates and instructions that
depend on the prompt renderer and the policy; the reward must judge the same thing whichever
renderer produced the sample, so that runs with different prompts stay comparable. Each backend
then decides how to combine prompt and completion (concatenated, completion only, or a text pair;
see the backends).

- ``RewardGrader``: a task grader whose grades carry the reward (``correct=None``,
  ``score=reward``, ``answer=None``). A sample the model fails on becomes a grade with ``error``
  set and no score; a configuration error (``BonbenchError``: missing weights, a label the model
  does not have) stops grading with its one-line fix, since no sample could be graded.
- ``RewardVerifier``: any reward model as a bon@k verifier; name ``rm-<model name>``, version and
  fingerprint forwarded so that stored scores are reused only for the same model. Its rows carry the
  model's cost (``Score.tokens``, ``Score.calls``) where the model counts it (``score_with_cost``).

This module loads nothing; backends and ``bonbench.plugins.rewards.registry`` do.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from bonbench.api.reward import CountedScore, CountsCost, RewardModel
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Grade, Problem, Sample, Score

# Samples handed to a reward model per call: large enough for length-sorted batching to pay off,
# small enough that the tokenized chunk stays a few hundred MB at most.
SCORE_CHUNK = 4096


def reward_prompt(problem: Problem) -> str:
    """The prompt text a reward model sees for ``problem`` (see the module docstring)."""
    override = problem.meta.get("reward_prompt") if problem.meta else None
    return override if isinstance(override, str) else problem.input


def score_with_cost(model: RewardModel, prompts: Sequence[str], completions: Sequence[str]) -> list[CountedScore]:
    """(score, tokens, calls) of every pair: the model's own counts where it keeps them
    (``api.reward.CountsCost``), else its scores with None for the cost (not counted)."""
    if isinstance(model, CountsCost):
        got = model.score_counted(prompts, completions)
        values = check_scores(model, [v for v, _, _ in got], len(completions))
        return [(v, tokens, calls) for v, (_, tokens, calls) in zip(values, got, strict=True)]
    return [(v, None, None) for v in check_scores(model, model.score(prompts, completions), len(completions))]


def check_scores(model: RewardModel, values: Sequence[float], n: int) -> list[float]:
    """``values`` as floats, or a ``BonbenchError`` if the model returned the wrong number."""
    if len(values) != n:
        raise BonbenchError(f"reward model {model.name!r} returned {len(values)} scores for {n} texts; "
                            "this is a bug in that backend")
    return [float(v) for v in values]


class RewardGrader:
    """Grades a reward-judged task: every grade carries the reward in ``score`` (``correct=None``).

    Tasks using it set ``Task.judged_by="reward"`` and should put ``grade_args()`` into
    ``Task.grade_args``: a grade row has no fingerprint of its own, so a retrained reward model must
    change the grading id to be regraded.
    """

    def __init__(self, model: RewardModel, name: str | None = None) -> None:
        self.model = model
        self.name = name or f"reward-{model.name}"

    @property
    def version(self) -> int:
        return int(self.model.version)

    def grade_args(self) -> dict[str, str]:
        """The settings that key stored grades: which reward model, exactly."""
        return {"reward_model": self.model.name, "reward_fingerprint": self.model.fingerprint}

    def grade(self, problems: Mapping[str, Problem], samples: Sequence[Sample]) -> list[Grade]:
        out: list[Grade] = []
        for start in range(0, len(samples), SCORE_CHUNK):
            chunk = samples[start:start + SCORE_CHUNK]
            out.extend(self._grade_chunk(problems, chunk))
        return out

    def _grade_chunk(self, problems: Mapping[str, Problem], chunk: Sequence[Sample]) -> list[Grade]:
        prompts = [reward_prompt(problems[s.problem_id]) for s in chunk]
        completions = [s.completion for s in chunk]
        try:
            values: list[float | str] = list(check_scores(self.model, self.model.score(prompts, completions), len(chunk)))
        except BonbenchError:
            raise  # configuration: no sample could be graded, the user must fix it
        except Exception:  # noqa: BLE001  one bad text must not sink the batch: isolate it
            values = [self._score_one(p, c) for p, c in zip(prompts, completions, strict=True)]
        return [self._grade(s, v) for s, v in zip(chunk, values, strict=True)]

    def _score_one(self, prompt: str, completion: str) -> float | str:
        try:
            return check_scores(self.model, self.model.score([prompt], [completion]), 1)[0]
        except BonbenchError:
            raise
        except Exception as exc:  # noqa: BLE001  recorded as data in Grade.error
            return f"reward model failed: {type(exc).__name__}: {exc}"[:500]

    def _grade(self, s: Sample, value: float | str) -> Grade:
        if isinstance(value, str):
            return Grade(s.problem_id, s.sample_idx, self.name, self.version, correct=None, error=value)
        if not math.isfinite(value):
            return Grade(s.problem_id, s.sample_idx, self.name, self.version, correct=None,
                         error=f"reward model returned a non-finite reward ({value})")
        return Grade(s.problem_id, s.sample_idx, self.name, self.version, correct=None, score=value)


class RewardVerifier:
    """Any reward model as a bon@k verifier (``--verifier rm:<spec>``).

    Its scores do not depend on the grades (``uses_grades = False``); ``version`` and
    ``fingerprint`` are the model's, so a retrained model re-scores instead of reusing old rows.
    """

    uses_grades = False

    def __init__(self, model: RewardModel) -> None:
        self.model = model
        self.name = f"rm-{model.name}"

    @property
    def version(self) -> int:
        return int(self.model.version)

    @property
    def fingerprint(self) -> str:
        return str(self.model.fingerprint)

    def score(self, problems: Mapping[str, Problem], samples: Sequence[Sample],
              grades: Mapping[tuple[str, int], Grade]) -> list[Score]:
        out: list[Score] = []
        for start in range(0, len(samples), SCORE_CHUNK):
            chunk = samples[start:start + SCORE_CHUNK]
            counted = score_with_cost(self.model, [reward_prompt(problems[s.problem_id]) for s in chunk],
                                      [s.completion for s in chunk])
            for s, (v, tokens, calls) in zip(chunk, counted, strict=True):
                if not math.isfinite(v):
                    # a NaN would silently lose (or win) every bon@k comparison it takes part in
                    raise BonbenchError(f"reward model {self.model.name!r} gave sample {s.key} a non-finite score ({v}); "
                                        "check the model and its ?read= option")
                out.append(Score(s.problem_id, s.sample_idx, self.name, v, tokens=tokens, calls=calls))
        return out
