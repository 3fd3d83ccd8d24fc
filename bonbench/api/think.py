"""What a verifier reads of a reasoning model's completion: the ``think`` options and the view that applies them.

Every verifier that reads completion text (``rm:``, ``prm:``, ``judge:``, ``learned:``, a third
party's) takes the same two options in its spec's query, whatever its scheme:
``--verifier 'prm:Qwen/Qwen2.5-Math-PRM-7B?agg=min&think=strip&think_tag=</think>'``.

- ``think``: ``strip`` (the default: the text after the last closing tag; an opened and never closed
  think block reads as the empty answer), ``require`` (no closing tag means no answer) or ``keep``
  (the whole trace), as ``bonbench.core.reasoning`` defines them.
- ``think_tag``: the closing tag (default ``</think>``).

``split_think`` takes the two options out of a verifier name before its scheme sees the rest, and
``answer_view`` wraps the built verifier in an ``AnswerView``, which hands the verifier each
sample with its completion cut to the answer. The view keeps the verifier's name (one score file per
model) and adds ``|think=MODE:TAG`` to its fingerprint, so rows scored under another reading are
not reused and each row's fingerprint records what was read. ``keep`` reads what every verifier read
before these options existed, so it keeps the verifier's own fingerprint and its stored rows.
Verifiers that read no text (``oracle``, ``logprob``: class attribute ``reads_text = False``) are
not wrapped, and a ``think`` option given to one is an error.

The run layer applies it (``bonbench.run.resolve.build_verifier``) to every verifier a run, the
trainer or ``eval-verifier`` builds from a name; ``get_verifier`` alone returns the bare verifier.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from bonbench.api.verifier import Rederives, ReusesStepScores, Verifier
from bonbench.core.errors import BonbenchError
from bonbench.core.reasoning import DEFAULT_TAG, THINK_MODES, ThinkMode, final_answer
from bonbench.core.records import Grade, Problem, Sample, Score

THINK_KEYS = ("think", "think_tag")


@dataclass(frozen=True)
class ThinkOptions:
    """How a verifier reads a completion (module docstring)."""

    mode: ThinkMode = "strip"
    tag: str = DEFAULT_TAG


def split_think(name: str) -> tuple[str, ThinkOptions | None]:
    """``name`` without its ``think`` / ``think_tag`` options, and those options (None when it names neither)."""
    base, sep, query = name.partition("?")
    if not sep:
        return name, None
    kept, given = [], {}
    for part in query.split("&"):
        key, eq, value = part.partition("=")
        if eq and key.strip() in THINK_KEYS:
            given[key.strip()] = value.strip()
        elif part:
            kept.append(part)
    if not given:
        return name, None
    mode = given.get("think", "strip")
    if mode not in THINK_MODES:
        raise BonbenchError(f"verifier option think={mode!r} in {name!r} is not one of {', '.join(THINK_MODES)}")
    tag = given.get("think_tag", DEFAULT_TAG)
    if not tag:
        raise BonbenchError(f"verifier option think_tag in {name!r} is empty: give the closing tag, e.g. think_tag=</think>")
    rest = "&".join(kept)
    return base + (f"?{rest}" if rest else ""), ThinkOptions(mode, tag)


class AnswerView:
    """A verifier that reads each completion's final answer, not its reasoning trace (module docstring)."""

    def __init__(self, inner: Verifier, think: ThinkOptions) -> None:
        self.inner, self.think = inner, think
        self.name = inner.name
        self.uses_grades = inner.uses_grades
        self.suffix = f"|think={think.mode}:{think.tag}"

    @property
    def version(self) -> int:  # read when first needed: a reward model loads when asked for its version
        return int(self.inner.version)

    @property
    def fingerprint(self) -> str:
        return f"{self.inner.fingerprint}{self.suffix}"

    def score(self, problems: Mapping[str, Problem], samples: Sequence[Sample],
              grades: Mapping[tuple[str, int], Grade]) -> list[Score]:
        mode, tag = self.think.mode, self.think.tag
        return self.inner.score(problems, [replace(s, completion=final_answer(s.completion, mode, tag)) for s in samples],
                                grades)

    def rederive(self, row: Score) -> Score | None:
        """The inner verifier's re-derivation of a row read the same way (a PRM's new aggregation); else None."""
        if not isinstance(self.inner, Rederives) or not row.verifier_fingerprint.endswith(self.suffix):
            return None
        return self.inner.rederive(replace(row, verifier_fingerprint=row.verifier_fingerprint[:-len(self.suffix)]))

    def reused_row(self, sample: Sample, steps: Sequence[str], scores: Sequence[float]) -> Score | str:
        """The inner verifier's row of a search candidate from its step scores, reading the answer as ``score`` does."""
        if not isinstance(self.inner, ReusesStepScores):
            return f"verifier {self.name!r} cannot take a search's step scores as its rows"
        return self.inner.reused_row(replace(sample, completion=final_answer(sample.completion, self.think.mode,
                                                                             self.think.tag)), steps, scores)


def answer_view(verifier: Verifier, think: ThinkOptions | None) -> Verifier:
    """``verifier`` reading final answers under ``think`` (None: the default, ``strip``); bare when it reads no
    text or keeps the whole trace."""
    if not getattr(verifier, "reads_text", True):
        if think is not None:
            raise BonbenchError(f"verifier {verifier.name!r} reads no completion text, so think= does not apply: drop it")
        return verifier
    think = think or ThinkOptions()
    return verifier if think.mode == "keep" else AnswerView(verifier, think)  # type: ignore[return-value]  # its version and fingerprint are read-only properties
