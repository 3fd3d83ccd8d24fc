"""Docs name only what exists: every ``bonbench.`` / ``bonbench_tasks.`` / ``bonbench_sandbox.``
dotted path in backticks in README.md, docs/*.md and the packages' docstrings and comments resolves
to a module or to a name its module defines, every backticked source path (``bonbench/...``,
``tasks/...``, ``sandbox/...``) is a file or folder, and every ``from bonbench... import name`` in
the docs' code blocks takes ``name`` from the
module that defines it (or from a documented facade: ``layer_rules.FACADES``).

Read with ``ast`` from the source, like ``tests/layer_rules.py``: nothing is imported.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import layer_rules as rules
import pytest

DOCS = sorted([rules.ROOT / "README.md", *(rules.ROOT / "docs").glob("*.md")])
_TICKED = re.compile(r"`+([^`\n]+?)`+")
_DOTTED = re.compile(r"\b(bonbench(?:_tasks|_sandbox)?(?:\.[A-Za-z_]\w*)+)(?::([A-Za-z_]\w*))?")
_PATH = re.compile(r"^(?:bonbench|tasks|sandbox)/[\w./-]*$")
_IMPORT = re.compile(r"^\s*from (bonbench(?:_tasks|_sandbox)?(?:\.\w+)*) import (\([^)]*\)|[\w, ]+)", re.M)
_GROUPS = {"bonbench.tasks", "bonbench.verifiers", "bonbench.reward_models", "bonbench.samplers",
           "bonbench.objectives", "bonbench.strategies"}  # entry-point group names, not modules


class Names:
    """What each module of the three packages defines, binds and holds (classes' own names)."""

    def __init__(self) -> None:
        mods = rules.modules()
        self.known = {m.name for m in mods}
        self.defined = {m.name: rules.defined_names(m.tree) for m in mods}
        self.bound = {m.name: {a.asname or a.name.split(".")[0] for n in ast.walk(m.tree)
                               if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names} for m in mods}
        self.members: dict[tuple[str, str], set[str]] = {}
        for m in mods:
            for node in m.tree.body:
                if isinstance(node, ast.ClassDef):
                    inner = ast.Module(body=node.body, type_ignores=[])
                    self.members[(m.name, node.name)] = rules.defined_names(inner)

    def problem(self, dotted: str, attr: str | None = None) -> str | None:
        """Why ``dotted`` (``a.b.c``, or ``a.b:c``) names nothing, or None when it resolves."""
        parts = dotted.split(".")
        cut = max((i for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in self.known), default=0)
        if not cut:
            return "no such module"
        module, rest = ".".join(parts[:cut]), parts[cut:] + ([attr] if attr else [])
        if not rest:
            return None
        name = rest[0]
        if name not in self.defined[module]:
            if name in self.bound[module] and module in rules.FACADES:
                return None
            return (f"{module} only imports {name}: name the module that defines it" if name in self.bound[module]
                    else f"{module} has no {name}")
        members = self.members.get((module, name))
        if len(rest) > 1 and members is not None and rest[1] not in members and not rest[1].startswith("__"):
            return f"{module}.{name} has no {rest[1]}"
        return None


NAMES = Names()


def _code_blocks(text: str) -> list[str]:
    return re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_dotted_name_in_the_docs_exists(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    problems = []
    for ticked in _TICKED.findall(text):
        for dotted, attr in _DOTTED.findall(ticked):
            if dotted in _GROUPS or ticked.strip().startswith(("pip ", "python -m pip")):
                continue
            why = NAMES.problem(dotted, attr or None)
            if why:
                problems.append(f"`{dotted}{':' + attr if attr else ''}`: {why}")
        path = ticked.strip()
        if _PATH.match(path) and not (rules.ROOT / path).exists():
            problems.append(f"`{path}`: no such file or folder")
    assert problems == [], f"{doc.name}:\n" + "\n".join(problems)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_code_examples_import_each_name_from_its_module(doc: Path) -> None:
    problems = []
    for block in _code_blocks(doc.read_text(encoding="utf-8")):
        for module, names in _IMPORT.findall(block):
            for name in filter(None, (n.strip().split(" as ")[0] for n in names.strip("()").split(","))):
                why = None if f"{module}.{name}" in NAMES.known else NAMES.problem(module, name)
                if why:
                    problems.append(f"from {module} import {name}: {why}")
    assert problems == [], f"{doc.name}:\n" + "\n".join(problems)


def test_every_dotted_name_in_the_packages_docstrings_exists() -> None:
    problems = []
    for m in rules.modules():
        for ticked in _TICKED.findall(m.path.read_text(encoding="utf-8")):
            for dotted, attr in _DOTTED.findall(ticked):
                why = None if dotted in _GROUPS else NAMES.problem(dotted, attr or None)
                if why:
                    problems.append(f"{m.path.relative_to(rules.ROOT)}: `{dotted}{':' + attr if attr else ''}`: {why}")
    assert problems == [], "\n".join(problems)


def test_the_checker_sees_a_name_that_does_not_exist() -> None:
    assert NAMES.problem("bonbench.pipeline.stages", "graded") is None
    assert NAMES.problem("bonbench.pipeline.stages.graded") is None
    assert NAMES.problem("bonbench.api.task.Task.read_samples") is None  # a field of the Task record
    assert NAMES.problem("bonbench.metrics.estimators.pass_at_k") is None  # through a documented facade
    assert NAMES.problem("bonbench.runner") == "bonbench has no runner"
    assert NAMES.problem("bonbench.run.runner.plan") == "bonbench.run has no runner"
    assert NAMES.problem("bonbench.pipeline.stages.PreparedRun") == (  # stages uses it, prepared defines it
        "bonbench.pipeline.stages only imports PreparedRun: name the module that defines it")
    assert NAMES.problem("bonbench.api.task.Task.read_humaneval_samples") == (
        "bonbench.api.task.Task has no read_humaneval_samples")
    assert NAMES.problem("bonbench_tasks.humaneval", "read_humaneval_samples") == (
        "bonbench_tasks.humaneval has no read_humaneval_samples")
    assert NAMES.problem("nothing.of.ours") == "no such module"
