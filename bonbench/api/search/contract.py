"""The search contract: a step sampler, a partial-solution scorer, a strategy, and the strategy registry.

A search runs a ``Strategy`` on one problem at a time. The strategy asks a ``StepSampler`` to
continue a batch of prefixes (each to the next step delimiter, or to the end of the solution) and
a ``PartialScorer`` to score lists of steps that need not end in an answer (a process reward
model's per-step scores), and returns a ``records.SearchResult``: N final candidates with their
steps, step scores and the tree they came from, and what the search cost.

Strategies are plugins like every other kind (``bonbench.core.registry``): a class whose keyword
arguments are its options, registered in-process with ``@register_strategy("name")`` or by a
package's ``bonbench.strategies`` entry point (``beam = "my_pkg.beam:BeamSearch"``).
``make_strategy(name, **options)`` builds one with its options coerced by annotation (``-S width=4``
arrives as a string), so a wrong value is one line naming the option and its type.

What it does not do: implement a strategy (``bonbench.plugins.strategies``), a step sampler or a
scorer (the backends and verifiers), or store a search.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from bonbench.api.search.records import Continuation, Prefix, SearchProblem, SearchResult, StepScores
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Prompt
from bonbench.core.registry import Registry, coerce_kwargs, parameter_types, type_name

STRATEGY_GROUP = "bonbench.strategies"


class StepSampler(Protocol):
    """Continues prefixes one step at a time.

    The text of a prefix is ``prompt + delimiter.join(steps)`` followed by ``delimiter`` when there
    are steps. A continuation stops at the first ``delimiter`` it generates (not included in its
    text; finish ``"step"``), at the end of the solution (``"end"``) or at max tokens (``"length"``);
    a ``to_end`` prefix ignores the delimiter. Each prefix is sampled from its own ``seed``, so a
    continuation does not depend on the batch it came in.

    ``prompt_text`` turns a run's rendered prompt into the text its prefixes start with: a base
    prompt's text as is, a chat prompt's messages through the policy's chat template with the
    assistant turn opened, which the steps then continue as raw text (search-and-learn's use of an
    instruct policy). A strategy never calls it: the run does, once per problem.
    """

    delimiter: str

    def prompt_text(self, prompt: Prompt) -> str:
        """The text prefixes of ``prompt`` start with (a chat prompt the backend cannot render: one error line)."""
        ...

    def continue_prefixes(self, prefixes: Sequence[Prefix]) -> list[Continuation]:
        """One continuation per prefix, in order."""
        ...


@runtime_checkable
class PartialScorer(Protocol):
    """Scores partial solutions: one score per step of each list of steps, none of which needs to
    end in an answer (a process reward model's step scores; ``questions[i]`` is the problem text
    the scorer reads for ``steps[i]``). A list with no step scores ``()`` and costs nothing."""

    def score_steps(self, questions: Sequence[str], steps: Sequence[Sequence[str]]) -> list[StepScores]: ...


def partial_scorer(verifier: object, name: str) -> PartialScorer:
    """``verifier`` as the scorer of a search, or the one-line error for a verifier that scores only
    whole solutions (``name``: how the user named it)."""
    if not isinstance(verifier, PartialScorer):
        raise BonbenchError(f"verifier {name!r} cannot score partial solutions, which a search ranks: "
                            "use a process reward model (--verifier prm:SOURCE, docs/verifiers.md)")
    return verifier


class Strategy(Protocol):
    """A search strategy with its options bound (the keyword arguments of its class).

    ``check(n)`` raises ``BonbenchError`` when the strategy cannot spend a budget of ``n`` (say, n
    not a multiple of the width), before anything is sampled. ``search`` is deterministic given
    ``seed`` and what the sampler and scorer answer.
    """

    name: str

    def check(self, n: int) -> None: ...

    def options(self) -> tuple[tuple[str, object], ...]: ...

    def search(self, problem: SearchProblem, sampler: StepSampler, scorer: PartialScorer, *,
               n: int, seed: int) -> SearchResult: ...


StrategyFactory = Callable[..., Strategy]
STRATEGIES: Registry[StrategyFactory] = Registry("strategy", STRATEGY_GROUP)


def register_strategy(name: str) -> Callable[[Any], Any]:
    """Decorator: register a strategy class (or factory) under ``name``; its keyword arguments are its options."""
    return STRATEGIES.register(name)


def strategy_names() -> list[str]:
    """Every registered strategy, sorted (nothing is imported)."""
    return STRATEGIES.names()


def make_strategy(name: str, **options: Any) -> Strategy:
    """Strategy ``name`` with ``options`` checked and coerced by annotation; an unknown name or
    option, or a value of the wrong type, is one line naming the fix."""
    factory = STRATEGIES.get(name)
    owner = f"strategy {name!r}"
    try:
        strategy = factory(**coerce_kwargs(factory, options, owner=owner, noun="option"))
    except ValueError as exc:  # an option outside its range: the class says which and why
        raise BonbenchError(f"{owner}: {exc}") from None
    if getattr(strategy, "name", None) != name:  # the name its results carry must be the one it was asked by
        raise BonbenchError(f"strategy entry point {name!r} built {strategy!r:.60}, whose name is not {name!r}; "
                            "fix the plugin's entry point or reinstall it")
    return strategy


def strategy_listing() -> list[str]:
    """``bonbench list strategies``: each registered strategy (entry points included) with the first
    sentence of its docstring and every option as ``name=default (type)``."""
    lines = []
    for name in strategy_names():
        factory = STRATEGIES.get(name)
        doc = " ".join((factory.__doc__ or "").strip().split("\n\n")[0].split())
        summary = doc.removeprefix(f"{name}:").strip().split(". ")[0].rstrip(".")  # "beam: keep ..." reads "keep ..."
        types_ = parameter_types(factory)
        options = ", ".join(f"{key}={value} ({type_name(types_.get(key, Any))})" for key, value in make_strategy(name).options())
        lines.append(f"{name:<19} {summary}; options: {options or 'none'}")
    return lines + ["use as --strategy NAME -S key=value, with --n N and --verifier prm:SOURCE (docs/search.md)"]
