"""The ``Verifier`` protocol and the verifier registry (plain names and name schemes).

A verifier scores every sample so that bon@k can pick the best of k. Plain names (``oracle``,
``logprob``, a third party's) and schemes (``rm:<reward model spec>``, ``learned:PATH``) are
registered the same way: in-process with ``@register_verifier("name")`` / ``("prefix:")``, or by
a package through the ``bonbench.verifiers`` entry-point group (``name = "module:factory"``; an
entry named ``prefix:`` is a scheme). A scheme's factory is called with the rest of the name
(``get_verifier("rm:imdb-sentiment")`` calls the ``rm:`` factory with ``"imdb-sentiment"``).
Nothing is imported until a verifier is asked for.

This module knows no verifier itself: the built-ins are plugins (``bonbench.plugins.verifiers``,
``bonbench.plugins.rewards``) listed in pyproject.toml's entry points.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from bonbench.core.records import Grade, Problem, Sample, Score
from bonbench.core.registry import Registry

VERIFIER_GROUP = "bonbench.verifiers"


class Verifier(Protocol):
    """Scores samples so that bon@k can pick the best of k (a reward model, the policy's logprob...).

    ``version`` and ``fingerprint`` key its stored scores (see ``records.Score``); ``uses_grades``
    says its scores depend on the grades (then the grading settings join the fingerprint). A run
    hands it each completion cut to a reasoning model's final answer (``bonbench.api.think``) unless
    the verifier's class sets ``reads_text = False`` (it reads no completion text: ``logprob``).
    """

    name: str
    version: int
    fingerprint: str
    uses_grades: bool

    def score(
        self, problems: Mapping[str, Problem], samples: Sequence[Sample], grades: Mapping[tuple[str, int], Grade]
    ) -> list[Score]: ...


@runtime_checkable
class Rederives(Protocol):
    """A verifier that can re-derive its own stored row of another setting without its model (a
    process reward model's per-step scores under a new aggregation): ``rederive`` returns the row
    as this verifier would score it, or None when the row is not one it can reuse."""

    def rederive(self, row: Score) -> Score | None: ...


@runtime_checkable
class ReusesStepScores(Protocol):
    """A verifier that can write its row of a search's final candidate from the step scores the
    search's scorer (this same model) gave for exactly the candidate's steps, instead of scoring it
    a second time. ``reused_row`` returns that row (its ``tokens`` and ``calls`` 0: the search's
    ledger counted them), or, when scoring ``sample`` would read other steps than ``steps`` (its
    text split otherwise), the reason, one phrase, and the verify stage scores it as any sample."""

    def reused_row(self, sample: Sample, steps: Sequence[str], scores: Sequence[float]) -> Score | str: ...


VerifierFactory = Callable[..., Verifier]
VERIFIERS: Registry[VerifierFactory] = Registry("verifier", VERIFIER_GROUP)


def register_verifier(name: str) -> Callable[[VerifierFactory], VerifierFactory]:
    """Decorator: register a verifier factory under ``name``; a name ending in ``:`` is a scheme,
    whose factory takes the rest of the verifier name as its first argument."""
    return VERIFIERS.register(name)


def verifier_names() -> list[str]:
    """The plain verifier names (schemes: ``verifier_schemes``)."""
    return VERIFIERS.names()


def verifier_schemes() -> list[tuple[str, str]]:
    """(prefix, the first line of its factory's docstring) of every scheme; imports the schemes'
    modules (they must be light: a scheme loads its model when it first scores)."""
    out = []
    for prefix in VERIFIERS.schemes():
        factory = VERIFIERS.get(prefix)
        doc = (getattr(factory, "__doc__", None) or "").strip()
        out.append((prefix, doc.splitlines()[0] if doc else ""))
    return out


def get_verifier(name: str, **kwargs: Any) -> Verifier:
    """Verifier ``name`` (a plain name, or ``prefix:rest`` of a registered scheme)."""
    factory, rest = VERIFIERS.resolve(name, hint=" (see `bonbench list verifiers`)")
    return factory(**kwargs) if rest is None else factory(rest, **kwargs)
