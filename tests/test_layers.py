"""The layer rule of docs/architecture.md holds for every import in the package (tests/layer_rules.py).

Also checks that the checker itself catches each kind of break, on small fake modules: a rule test
that could not fail would prove nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import layer_rules as rules


def test_the_layers_hold() -> None:
    problems = rules.violations()
    assert problems == [], "\n".join(problems)


def _module(name: str, source: str) -> rules.Module:
    path = rules.ROOT / "bonbench" / Path(*name.split(".")[1:]).with_suffix(".py")
    return rules.Module(name, path, ast.parse(source))


def test_the_checker_sees_an_upward_import() -> None:
    m = _module("bonbench.core.fake", "from bonbench.run.runner import plan\n")
    assert any("higher layer" in p for p in rules._layer_problems(m, "bonbench.run.runner", "x"))


def test_the_checker_sees_a_plugin_importing_another_plugin() -> None:
    m = _module("bonbench.plugins.rewards.fake", "import bonbench.plugins.samplers.vllm\n")
    assert any("imports plugin" in p for p in rules._layer_problems(m, "bonbench.plugins.samplers.vllm", "x"))
    task = _module("bonbench_tasks.fake", "")
    assert rules._layer_problems(task, "bonbench.plugins.graders.math", "x") == []  # tasks compose plugins
    assert any("imports plugin" in p for p in rules._layer_problems(task, "bonbench_tasks.math", "x"))


def test_tasks_share_one_common_module_that_imports_no_task() -> None:
    task = _module("bonbench_tasks.fake", "")
    assert rules._layer_problems(task, "bonbench_tasks.common", "x") == []  # a task may use the shared module
    other_task = rules._layer_problems(task, "bonbench_tasks.math", "x")  # but never another task
    assert any("imports plugin tasks.math" in p and "bonbench_tasks.common" in p for p in other_task)
    common = _module("bonbench_tasks.common", "")
    assert any("shared task module imports the task tasks.math" in p
               for p in rules._layer_problems(common, "bonbench_tasks.math", "x"))
    assert rules._layer_problems(common, "bonbench.plugins.graders.math", "x") == []  # it composes plugins, like a task
    grader = _module("bonbench.plugins.graders.fake", "")
    assert any("higher layer" in p for p in rules._layer_problems(grader, "bonbench_tasks.common", "x"))
    # the module the rule allows is the one in the tree
    assert "bonbench_tasks." + rules.SHARED_TASKS.split(".", 1)[1] in {m.name for m in rules.modules()}


def test_the_checker_sees_cycles_private_names_and_imports_in_functions() -> None:
    assert rules._cycles({"a": {"b"}, "b": {"a"}}) == ["import cycle: a -> b -> a"]
    assert rules._cycles({"p": {"p.x"}, "p.x": set()}) == []  # a package re-exporting its own module
    m = _module("bonbench.core.fake", "import bonbench.core.store as st\nx = st._private\n")
    assert rules._private_attributes(m, {"st": "bonbench.core.store"}, {"bonbench.core.store"})
    lazy = _module("bonbench.core.fake", "def f():\n    import json\n    import torch\n")
    found = [(target, top) for _, target, _, top in rules.imports(lazy, set())]
    assert found == [("json", False), ("torch", False)]
    assert "torch" in rules.HEAVY and "json" not in rules.HEAVY


def test_the_checker_sees_an_upward_lazy_target() -> None:
    m = _module("bonbench.api.fake", 'TARGETS = {"x": "bonbench.run.plan:plan"}\n')
    known = {"bonbench.run.plan", "bonbench.api.fake"}
    assert any("higher layer" in p for p in rules._lazy_targets(m, known))
    same = _module("bonbench.plugins.samplers.fake", 'X = "bonbench.plugins.samplers.hf:make"\n')
    assert rules._lazy_targets(same, {"bonbench.plugins.samplers.hf"}) == []
