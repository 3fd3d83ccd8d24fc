"""A problem's statement, gold answer (or tests) and rendered prompt, from the run's task.

A run directory stores no prompt: the task makes it from the dataset. ``TaskTexts`` builds the
task of a run's config.json (``bonbench.api.task.get_task`` with the run's ``task_args`` and the
data folder, ``--data-dir`` or ``$BONBENCH_DATA_DIR``) once, on the first page that asks, and keeps
its problems by id; the prompt is rendered in the run's ``prompt_style``. A task that cannot be
built here (not installed, its data not found, a synthetic run) is not an error: the pages say
why the texts are missing, once, and show the rest.

What it does not do: grade, sample, or load a model or a grader's workers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bonbench.api.task import Task, get_task
from bonbench.core.data import resolve_data_dir
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Problem


@dataclass(frozen=True)
class ProblemTexts:
    """What the task says of one problem."""

    statement: str
    target: str
    prompt: str  # the rendered prompt: its text, or its chat messages one per paragraph
    meta: Mapping[str, Any]


def _prompt_text(task: Task, problem: Problem, style: str) -> str:
    prompt = task.render(problem, "chat" if style == "chat" else "base")
    if prompt.text is not None:
        return prompt.text
    return "\n\n".join(f"[{m.get('role', '')}]\n{m.get('content', '')}" for m in prompt.messages or ())


class TaskTexts:
    """The tasks of the runs shown, each built once and only when a page needs its texts."""

    def __init__(self, data_dir: str | None) -> None:
        self.data_dir = data_dir
        self._tasks: dict[str, tuple[Task | None, dict[str, Problem], str]] = {}

    def _task(self, config: Mapping[str, Any]) -> tuple[Task | None, dict[str, Problem], str]:
        name = str(config.get("task", ""))
        args = dict(config.get("task_args") or {})
        key = f"{name}|{sorted(args.items())}"
        if key not in self._tasks:
            try:
                root = resolve_data_dir(self.data_dir)
                task = get_task(name, **args, **({"data_dir": str(root)} if root is not None else {}))
                self._tasks[key] = (task, {p.id: p for p in task.problems}, "")
            except (BonbenchError, OSError, ValueError, TypeError, KeyError) as exc:
                first = str(exc).split("; ")[0][:200]  # the cause, not the fix meant for `bonbench run`
                self._tasks[key] = (None, {}, f"prompts and gold need the task {name!r} and its data (--data-dir), and "
                                              f"it could not be built here: {first}")
        return self._tasks[key]

    def texts(self, config: Mapping[str, Any], problem_id: str) -> tuple[ProblemTexts | None, str]:
        """The texts of one problem, or None and why they are missing."""
        task, problems, why = self._task(config)
        if task is None:
            return None, why
        problem = problems.get(problem_id)
        if problem is None:
            return None, f"problem {problem_id!r} is not in the task {task.name!r} as built here (another version?)"
        style = str(config.get("prompt_style") or "base")
        return ProblemTexts(problem.input, problem.target, _prompt_text(task, problem, style), dict(problem.meta)), ""

    def statements(self, config: Mapping[str, Any]) -> dict[str, str]:
        """problem_id -> statement, for searching the table by text (empty when the task is not here)."""
        return {pid: p.input for pid, p in self._task(config)[1].items()}
