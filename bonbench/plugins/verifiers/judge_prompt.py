"""What an LLM judge is asked, and how its answer becomes a score: the verification prompt and P(Yes).

A prompt is a template with ``{problem}`` and ``{solution}`` (replaced literally: LaTeX braces in a
problem are left alone) that ends where the judge's verdict token comes. A prompt for sampled
rationales (GenRM-CoT) also holds ``{rationale}``: the text before it is sent to sample a rationale,
and the whole template, rationale filled in, is sent to read the verdict. The rationale stops at the
first line of the text after ``{rationale}`` (the question that asks for the verdict). Built-in
prompts carry a version (``judge-v1``); a user's prompt file is versioned by the hash of its text.
Both the text and the version are part of a judge's fingerprint.

``p_yes`` turns the top log-probabilities of the verdict token into the score: the probability of the
Yes variants (``Yes``, `` Yes``, ``yes``, ``YES``, with tokenizer space marks or trailing
punctuation) renormalised over the Yes and No variants found among them. When no Yes variant is
among the top log-probabilities, P(Yes) is below the smallest listed one and is not known: the read
scores the judge's ``floor`` (default 0.0), and the caller counts it.

This module does no I/O beyond reading a prompt file, and knows no engine.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bonbench.core.errors import BonbenchError

PROBLEM, SOLUTION, RATIONALE = "{problem}", "{solution}", "{rationale}"

_INTRO = """You are a careful grader. Read the problem and the proposed solution, then decide whether the \
solution's final answer is correct.

Problem:
{problem}

Proposed solution:
{solution}

"""
_VERDICT = "Is the proposed solution correct? Answer Yes or No.\nAnswer:"
DIRECT_V1 = _INTRO + _VERDICT
COT_V1 = _INTRO + "Let's check the solution step by step.\n{rationale}\n" + _VERDICT
BUILTIN_VERSION = "judge-v1"

_SPACE_MARKS = ("\u2581", "\u0120")  # SentencePiece's and byte-level BPE's leading-space marks


@dataclass(frozen=True)
class JudgePrompt:
    """A verification prompt: its ``template`` and ``version`` (both fingerprinted)."""

    template: str
    version: str

    @property
    def cot(self) -> bool:
        """Whether the judge samples a rationale before its verdict (``{rationale}`` in the template)."""
        return RATIONALE in self.template

    def verdict(self, problem: str, solution: str, rationale: str = "") -> str:
        """The text after which the verdict token is read."""
        return self._fill(self.template, problem, solution).replace(RATIONALE, rationale)

    def rationale_prompt(self, problem: str, solution: str) -> str:
        """The text a rationale is sampled after (CoT prompts only)."""
        assert self.cot, "a direct prompt has no rationale"
        return self._fill(self.template.split(RATIONALE, 1)[0], problem, solution)

    @property
    def rationale_stop(self) -> tuple[str, ...]:
        """Where a sampled rationale ends: the first non-empty line after ``{rationale}``."""
        after = [line.strip() for line in self.template.split(RATIONALE, 1)[1].splitlines() if line.strip()]
        return (after[0],) if after else ()

    @staticmethod
    def _fill(text: str, problem: str, solution: str) -> str:
        # the solution last: a problem that quotes "{solution}" must not receive the solution
        return text.replace(PROBLEM, problem).replace(SOLUTION, solution)


def load_prompt(path: str | None, k: int) -> JudgePrompt:
    """The built-in prompt for ``k`` rationales (0: direct), or the user's file, checked against ``k``."""
    if path is None:
        return JudgePrompt(COT_V1 if k else DIRECT_V1, BUILTIN_VERSION)
    file = Path(path).expanduser()
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BonbenchError(f"judge prompt file {path!r} cannot be read ({type(exc).__name__}): "
                            "give a UTF-8 text file with {problem} and {solution}") from None
    missing = [p for p in (PROBLEM, SOLUTION) if p not in text]
    if missing:
        raise BonbenchError(f"judge prompt file {path!r} lacks {' and '.join(missing)}: "
                            "put them where the problem and the solution go")
    if k and RATIONALE not in text:
        raise BonbenchError(f"judge prompt file {path!r} has no {{rationale}} but k={k} asks for rationales: "
                            "put {rationale} where the judge's reasoning goes, or drop k")
    if not k and RATIONALE in text:
        raise BonbenchError(f"judge prompt file {path!r} has a {{rationale}} but k=0: give k=K (rationales "
                            "sampled per answer), or remove {rationale}")
    return JudgePrompt(text, "file-" + hashlib.sha256(text.encode()).hexdigest()[:16])


def verdict_of(token: str) -> str | None:
    """``"yes"`` / ``"no"`` when a top-logprob token is a Yes / No variant, else None."""
    text = token
    for mark in _SPACE_MARKS:
        text = text.replace(mark, " ")
    text = text.strip().rstrip(".,:;!").strip().lower()
    return text if text in ("yes", "no") else None


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    return top + math.log(math.fsum(math.exp(v - top) for v in values))


def p_yes(top: Sequence[tuple[str, float]], floor: float) -> tuple[float, bool]:
    """(score, floored): P(Yes variants) / P(Yes or No variants) among the top ``(token,
    logprob)`` pairs; ``(floor, True)`` when no Yes variant is among them."""
    yes = [lp for tok, lp in top if verdict_of(tok) == "yes" and math.isfinite(lp)]
    no = [lp for tok, lp in top if verdict_of(tok) == "no" and math.isfinite(lp)]
    if not yes:
        return floor, True
    if not no:
        return 1.0, False
    # 1 / (1 + P(no) / P(yes)), in log space: the top probabilities may be tiny
    return 1.0 / (1.0 + math.exp(_logsumexp(no) - _logsumexp(yes))), False
