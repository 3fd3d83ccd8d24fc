"""The generic registry (``bonbench.core.registry``): coercion of CLI strings by annotation, lazy
targets, entry points, schemes, precedence, and the one-line message of a broken plugin."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
import types
from collections.abc import Sequence
from importlib.metadata import EntryPoint, distribution
from pathlib import Path
from typing import Any, Literal, Optional, Union

import pytest

from bonbench.core import registry as core
from bonbench.core.errors import BonbenchError
from bonbench.core.registry import Registry, coerce, coerce_kwargs, type_name


def c(value: Any, annotation: Any) -> Any:
    return coerce(value, annotation, param="x", owner="task 't'")


# ------------------------------------------------------------------ coercion


@pytest.mark.parametrize("annotation,text,want", [
    (int, "12", 12), (int, "-3", -3), (float, "0.25", 0.25), (float, "1e-3", 1e-3), (float, "7", 7.0),
    (str, "abc", "abc"), (Any, "abc", "abc"), (Path, "a/b", Path("a/b")),
    (bool, "true", True), (bool, "YES", True), (bool, "1", True), (bool, "on", True),
    (bool, "false", False), (bool, "No", False), (bool, "0", False), (bool, "off", False),
    (Optional[int], "none", None), (int | None, "null", None), (int | None, "4", 4),
    (int | str | None, "Level 3", "Level 3"), (int | str | None, "3", 3), (int | str, "None", "None"),
    (Union[float, None], "2.5", 2.5), (str | None, "None", None),
    (Literal["loo", "none"], "loo", "loo"), (Literal["loo", "none"], "LOO", "loo"), (Literal[1, 2], "2", 2),
    (Literal["a"] | None, "none", None),
    (tuple[int, ...], "1,2, 3", (1, 2, 3)), (list[float], "0.5,1", [0.5, 1.0]), (tuple[int, str], "4,x", (4, "x")),
    (Sequence[str], "a,b", ("a", "b")), (tuple[int, ...], "", ()),
])
def test_coerce_every_annotation_kind(annotation: Any, text: str, want: Any) -> None:
    got = c(text, annotation)
    assert got == want and type(got) is type(want)


def test_string_annotations_are_resolved() -> None:
    # modules with `from __future__ import annotations` give strings
    assert c("5", "int | None") == 5 and c("none", "Optional[float]") is None and c("x", "Literal['x', 'y']") == "x"
    assert c("a,b", "tuple[str, ...]") == ("a", "b") and c("p", "Path") == Path("p")


def test_values_that_are_not_strings_pass_unchanged() -> None:
    assert c(3, int) == 3 and c(0.5, int) == 0.5 and c(None, int) is None and c([1], tuple[int, ...]) == [1]


@pytest.mark.parametrize("annotation,text,shown", [
    (int, "abc", "int"), (int, "1.5", "int"), (float, "fast", "float"), (bool, "maybe", "bool"),
    (int | None, "many", "int or None"), (Literal["loo", "none"], "mean", "one of 'loo', 'none'"),
    (tuple[int, ...], "1,x", "a comma-separated list of int"), (tuple[int, int], "1", "a comma-separated list of int"),
    (int, "none", "int"),  # "none" is None only where the annotation allows None
])
def test_a_wrong_type_is_one_line_naming_parameter_and_type(annotation: Any, text: str, shown: str) -> None:
    with pytest.raises(BonbenchError) as err:
        coerce(text, annotation, param="limit", owner="task 'math'")
    msg = str(err.value)
    assert msg == f"task 'math' argument limit takes {shown}, got {text!r}" and "\n" not in msg


def test_type_names() -> None:
    assert type_name(int) == "int" and type_name("float | None") == "float or None"
    assert type_name(Literal["a", "b"]) == "one of 'a', 'b'" and type_name(list[str]) == "a comma-separated list of str"


def _factory(data_dir: str | None = None, size: int = 3, mode: Literal["a", "b"] = "a", scale: float = 1.0) -> dict[str, Any]:
    return {"size": size, "mode": mode, "scale": scale}


def test_coerce_kwargs_checks_names_and_types() -> None:
    assert (coerce_kwargs(_factory, {"size": "5", "mode": "b", "scale": 2}, owner="task 't'")
            == {"size": 5, "mode": "b", "scale": 2})
    with pytest.raises(BonbenchError, match=r"^task 't' has no -T argument 'sise'; its -T arguments are: size, mode, scale$"):
        coerce_kwargs(_factory, {"sise": "5"}, owner="task 't'", hidden=("data_dir",), noun="-T argument")
    with pytest.raises(BonbenchError, match=r"^reward model 'r' option mode takes one of 'a', 'b', got 'c'$"):
        coerce_kwargs(_factory, {"mode": "c"}, owner="reward model 'r'", noun="option")

    def open_ended(size: int = 1, **rest: Any) -> None: ...

    assert coerce_kwargs(open_ended, {"size": "2", "other": "x"}, owner="o") == {"size": 2, "other": "x"}


def test_get_task_coerces_t_args_and_names_the_type(data_dir: Path) -> None:
    from bonbench.api.task import get_task

    assert len(get_task("math500", data_dir=str(data_dir), level="2", fewshot="0").problems) > 0
    with pytest.raises(BonbenchError, match=r"^task 'math500' argument fewshot takes int, got 'four'$"):
        get_task("math500", data_dir=str(data_dir), fewshot="four")
    with pytest.raises(BonbenchError, match=r"^task 'math500' has no argument 'shots'; its -T arguments are: "
                                            r"level, subject, fewshot, percent, decimal_comma, gold_boxes$"):
        get_task("math500", shots="2")


def test_make_objective_coerces_o_values() -> None:
    from bonbench.api.objective import make_objective

    assert make_objective("passk", k="3", baseline="loo").options["k"] == 3
    with pytest.raises(BonbenchError, match=r"^objective 'passk' option k takes int, got 'three'$"):
        make_objective("passk", k="three")


# ------------------------------------------------------------------ the registry


@pytest.fixture
def plugin_module(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A module ``regtest_plugin`` importable by name, counting its imports."""
    mod = types.ModuleType("regtest_plugin")
    mod.imports = 0
    mod.thing = lambda: "thing"
    monkeypatch.setitem(sys.modules, "regtest_plugin", mod)
    return mod


def _with_entry_points(monkeypatch: pytest.MonkeyPatch, group: str, eps: list[EntryPoint]) -> None:
    monkeypatch.setattr(core, "entry_points", lambda group_=None, **kw: eps if kw.get("group", group_) == group else [])


def test_lazy_target_is_imported_on_first_use_only(monkeypatch: pytest.MonkeyPatch, plugin_module: types.ModuleType) -> None:
    _with_entry_points(monkeypatch, "g", [])
    reg: Registry[Any] = Registry("widget", "g")
    reg.add("w", "regtest_plugin:thing", note="lazy")
    monkeypatch.delitem(sys.modules, "regtest_plugin")
    assert reg.names() == ["w"] and reg.meta("w") == {"note": "lazy"} and "regtest_plugin" not in sys.modules
    monkeypatch.setitem(sys.modules, "regtest_plugin", plugin_module)
    assert reg.get("w")() == "thing" and reg.meta("w") == {"note": "lazy"}


def test_entry_points_read_once_and_in_process_registration_wins(monkeypatch: pytest.MonkeyPatch,
                                                                  plugin_module: types.ModuleType) -> None:
    calls = []
    eps = [EntryPoint("w", "regtest_plugin:thing", "g"), EntryPoint("inline", "regtest_plugin:thing", "g")]
    monkeypatch.setattr(core, "entry_points", lambda group: calls.append(group) or eps)
    reg: Registry[Any] = Registry("widget", "g")

    @reg.register("inline")
    def inline() -> str:
        return "mine"

    assert reg.names() == ["inline", "w"] and reg.names() == ["inline", "w"] and calls == ["g"]
    assert reg.get("inline")() == "mine" and reg.get("w")() == "thing"


def test_module_entry_points_register_by_importing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "regtest_registering.py").write_text(
        "from bonbench.api.objective import register_objective, Objective\n"
        "@register_objective('regtest_obj', paper='test', summary='a test objective')\n"
        "def build(scale: float = 1.0):\n"
        "    return Objective('regtest_obj', lambda g: g.rewards * scale, frozenset(), {'scale': scale})\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from bonbench.api import objective as api_objective

    reg: Registry[Any] = Registry("objective", api_objective.OBJECTIVE_GROUP)
    monkeypatch.setattr(api_objective, "OBJECTIVES", reg)
    _with_entry_points(monkeypatch, api_objective.OBJECTIVE_GROUP,
                       [EntryPoint("pkg", "regtest_registering", api_objective.OBJECTIVE_GROUP)])
    assert list(api_objective.REGISTRY) == ["regtest_obj"] and api_objective.REGISTRY["regtest_obj"].options == {"scale": 1.0}
    assert api_objective.make_objective("regtest_obj", scale="2").options == {"scale": 2.0}


def test_a_broken_plugin_is_one_line_naming_it_and_what_to_reinstall(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = EntryPoint("bad", "no_such_module_xyz:thing", "g")
    broken_module = EntryPoint("badmod", "no_such_module_xyz", "g")
    _with_entry_points(monkeypatch, "g", [broken, broken_module])
    reg: Registry[Any] = Registry("widget", "g")
    with pytest.warns(UserWarning, match=r"widget plugin 'badmod' \(no_such_module_xyz\) failed to load: ModuleNotFoundError"):
        assert reg.names() == ["bad"]
    with pytest.raises(BonbenchError) as err:
        reg.get("bad")
    msg = str(err.value)
    assert msg.startswith("widget 'bad' (no_such_module_xyz:thing) failed to load: ModuleNotFoundError: ")
    assert "reinstall" in msg and "\n" not in msg


def test_schemes_get_the_rest_of_the_name(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_entry_points(monkeypatch, "g", [EntryPoint("ep:", "regtest_missing:x", "g")])
    reg: Registry[Any] = Registry("widget", "g")
    reg.register("pre:")(lambda rest: f"built {rest}")
    reg.register("pre:long:")(lambda rest: f"long {rest}")
    reg.register("plain")(lambda: "plain")
    assert reg.schemes() == ["ep:", "pre:", "pre:long:"] and reg.names() == ["plain"]
    factory, rest = reg.resolve("pre:a:b")
    assert factory(rest) == "built a:b"
    factory, rest = reg.resolve("pre:long:x")  # the longest prefix wins
    assert factory(rest) == "long x"
    assert reg.resolve("plain")[1] is None and "pre:zzz" in reg and "zzz" not in reg
    with pytest.raises(BonbenchError,
                       match=r"^unknown widget 'zzz'; choose one of: plain, ep:\.\.\., pre:\.\.\., pre:long:\.\.\. \(see x\)$"):
        reg.get("zzz", hint=" (see x)")


def test_the_installed_schemes_are_plugins() -> None:
    """rm:, learned:, hf: and vllm: come from the entry points of the installed bonbench, not from api code."""
    from bonbench.api.reward import REWARD_MODELS
    from bonbench.api.verifier import VERIFIERS, get_verifier

    assert {"rm:", "learned:"} <= set(VERIFIERS.schemes()) and {"hf:", "vllm:"} <= set(REWARD_MODELS.schemes())
    assert get_verifier("rm:tldr-proxy-train?max_words=20").name == "rm-tldr-proxy-train-max_words-20"
    with pytest.raises(BonbenchError, match="reward model 'tldr-proxy-train' option max_words takes int, got 'x'"):
        get_verifier("rm:tldr-proxy-train?max_words=x")
    api_sources = "".join(p.read_text() for p in (Path(__file__).parents[1] / "bonbench" / "api").glob("*.py"))
    assert "bonbench.plugins" not in "".join(line for line in api_sources.splitlines() if line.startswith(("from", "import")))


HIDDEN = """
import importlib, json, pkgutil
import bonbench.core.registry as registry
registry.entry_points = lambda group: []  # no installed metadata: only what code registers
import bonbench.plugins
for info in pkgutil.walk_packages(bonbench.plugins.__path__, "bonbench.plugins."):
    importlib.import_module(info.name)
from bonbench.api.reward import REWARD_MODELS
from bonbench.api.sampler import SAMPLERS
from bonbench.api.verifier import VERIFIERS
from bonbench.api.metric.kind import METRICS
print(json.dumps([r.names() + r.schemes() for r in (SAMPLERS, REWARD_MODELS, VERIFIERS, METRICS)]))
"""


def test_builtin_plugins_are_declared_once_as_entry_points() -> None:
    """pyproject.toml's entry points are the one list of the built-in plugins: the installed bonbench
    carries the same ones, each resolves, and importing every plugin module with the entry points
    hidden registers no backend, reward model, verifier or metric kind (no second list in code). Tasks and
    objectives register by the decorator on their factory, in the module their entry point names."""
    declared = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["entry-points"]
    ours = {(group, name, value) for group, table in declared.items() for name, value in table.items()}
    installed = {(ep.group, ep.name, ep.value) for ep in distribution("bonbench").entry_points if ep.group in declared}
    assert installed == ours, "the installed bonbench's entry points differ from pyproject.toml: reinstall it (pip install -e .)"
    for _, _, value in sorted(ours):
        assert core.load_target(value) is not None
    got = subprocess.run([sys.executable, "-c", HIDDEN], capture_output=True, text=True, check=True)
    assert json.loads(got.stdout) == [[], [], [], []], got.stdout


def test_sampler_backends_come_from_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import dataclass

    from bonbench.api import sampler as api_sampler
    from bonbench.plugins.samplers import select

    @dataclass(frozen=True)
    class EchoOptions:
        dtype: str = "float32"
        word: str = "hi"

    api_sampler.sampler_names()  # the installed entry points read into the registry, which the copy then restores
    monkeypatch.setattr(api_sampler.SAMPLERS, "_entries", dict(api_sampler.SAMPLERS._entries))
    api_sampler.register_sampler("echo", options=EchoOptions)(lambda model, *, seed, options, **_: (model, seed, options))
    assert api_sampler.sampler_names() == ["echo", "hf", "openai", "scripted", "vllm"]
    assert select.backend_options("echo", dtype=None, word="yo") == EchoOptions(word="yo")
    assert select.get_sampler("echo", "m", seed=3, word="yo") == ("m", 3, EchoOptions(word="yo"))
    with pytest.raises(BonbenchError,
                       match=r"the echo backend does not take batch_size \(--batch-size\); its options are dtype, word"):
        select.backend_options("echo", batch_size=2)
    with pytest.raises(BonbenchError, match="unknown backend 'llamacpp': choose one of echo, hf, openai, scripted, vllm"):
        select.get_sampler("llamacpp", None, seed=0)


def test_a_task_declares_its_family() -> None:
    """Families come from the tasks' registrations (no table elsewhere): verifiers and verifier
    training read them through ``task_family`` without loading any data."""
    from bonbench.api.task import TASKS, Task, family_tasks, get_task, register_task, task_family
    from bonbench.core.records import Problem, Prompt
    from bonbench.plugins.verifiers import manifest

    # other tests register toy tasks of their own families, so only the built-ins are pinned here
    builtin = {"functional_math", "math", "math500", "mathodyssey", "code_contests", "humaneval", "mbpp", "taco"}
    assert builtin & set(family_tasks("math")) == {"functional_math", "math", "math500", "mathodyssey"}
    assert builtin & set(family_tasks("code")) == {"code_contests", "humaneval", "mbpp", "taco"}
    assert task_family("imdb") == "imdb" and task_family("no-such-task") == "no-such-task"
    assert not hasattr(manifest, "task_family")  # one definition: verifier folders read api.task's

    def build() -> Task:
        return Task(name="famtest", version=1, problems=(Problem(id="p", input="x", target="y"),),
                    render=lambda p, s: Prompt(problem_id=p.id, text=p.input), grader=None, prompt_id="f")

    assert build().family == "famtest"  # a task that names no family is a family of one
    try:
        register_task("famtest", family="toyfam")(build)
        assert task_family("famtest") == "toyfam" and get_task("famtest").family == "toyfam"
    finally:
        TASKS.remove("famtest")


def test_a_reward_scheme_gets_its_named_options_typed() -> None:
    """A plugin's reward-model scheme is coerced by the same rule as every factory: a named option
    arrives typed, a wrong type or an unknown option is one line."""
    from bonbench.api.reward import REWARD_MODELS, get_reward_model, register_reward_model
    from bonbench.core.errors import BonbenchError

    def judge(source: str, name: str | None = None, data_dir: str | None = None, temperature: float = 1.0) -> tuple:
        return (source, temperature)

    register_reward_model("judgetest:")(judge)
    try:
        assert get_reward_model("judgetest:abc?temperature=0") == ("abc", 0.0)
        with pytest.raises(BonbenchError, match=r"^reward model 'judgetest:abc' option temperature takes float, got 'hot'$"):
            get_reward_model("judgetest:abc?temperature=hot")
        with pytest.raises(BonbenchError, match="has no option 'tmp'; its options are: temperature$"):
            get_reward_model("judgetest:abc?tmp=1")
    finally:
        REWARD_MODELS.remove("judgetest:")


def test_list_tasks_names_each_task_family(capsys: pytest.CaptureFixture[str]) -> None:
    from bonbench.apps.cli import main

    assert main(["list", "tasks"]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()}
    assert rows["math500"][1:3] == ["family", "math"] and rows["humaneval"][1:3] == ["family", "code"]
    assert rows["imdb"][1:3] == ["family", "imdb"]  # a task that shares with none is a family of one
    assert " ".join(rows["math500"][3:]) == "MATH-500, the 500-problem test subset of PRM800K (Lightman et al. 2023)"
