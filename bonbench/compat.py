"""Old import paths (bonbench 0.1's flat layout) keep working for one release.

``bonbench.runner``, ``bonbench.estimators``, ``bonbench.trainer.objectives`` and every other module
that moved into a layer folder in 0.2 still imports: a finder on ``sys.meta_path`` answers the old
name with the module at its new place (the same module object, so patching either name patches
both) and warns once with a ``DeprecationWarning`` naming the new path. It does no more than that:
nothing new is importable under an old name, and the aliases go in the release after 0.2.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from types import CodeType, ModuleType

# old module -> new module; a submodule of an old package maps by its longest listed prefix
MOVED = {
    "bonbench.errors": "bonbench.core.errors", "bonbench.records": "bonbench.core.records",
    "bonbench.config": "bonbench.core.config", "bonbench.store": "bonbench.core.store",
    "bonbench.outputs": "bonbench.core.outputs", "bonbench.cache": "bonbench.core.cache",
    "bonbench.data": "bonbench.core.data", "bonbench.models": "bonbench.core.models",
    "bonbench.flags": "bonbench.core.flags", "bonbench.prompts": "bonbench.core.prompts",
    "bonbench.ray_cluster": "bonbench.core.ray_cluster",
    "bonbench.estimators": "bonbench.metrics.estimators", "bonbench.estimators_maj": "bonbench.metrics.maj",
    "bonbench.estimators_checks": "bonbench.metrics.checks", "bonbench.winrate": "bonbench.metrics.winrate",
    "bonbench.metricinfo": "bonbench.metrics.info",
    "bonbench.registry": "bonbench.api.task", "bonbench.sampler.base": "bonbench.api.sampler",
    "bonbench.trainer.objectives.base": "bonbench.api.objective",
    "bonbench.sampler": "bonbench.plugins.samplers", "bonbench.graders": "bonbench.plugins.graders",
    "bonbench.rewards": "bonbench.plugins.rewards", "bonbench.verifiers": "bonbench.plugins.verifiers.builtin",
    "bonbench.verifier_folder": "bonbench.plugins.verifiers.folder",
    "bonbench.verifier_model": "bonbench.plugins.verifiers.model",
    "bonbench.trainer.objectives": "bonbench.plugins.objectives",
    "bonbench.compare": "bonbench.pipeline.compare", "bonbench.shard": "bonbench.pipeline.shard",
    "bonbench.readers": "bonbench.pipeline.readers", "bonbench.imported_runs": "bonbench.pipeline.imported",
    "bonbench.report": "bonbench.pipeline.report",
    "bonbench.runner": "bonbench.run.runner", "bonbench.verifier_choice": "bonbench.run.verifier_choice",
    "bonbench.cli": "bonbench.apps.cli", "bonbench.analysis": "bonbench.apps.analysis",
    "bonbench.trainer": "bonbench.apps.trainer", "bonbench.verifier_train": "bonbench.apps.verifier_training",
}


def new_name(old: str) -> str | None:
    """Where the module once imported as ``old`` lives now (None: it did not move)."""
    parts = old.split(".")
    for n in range(len(parts), 1, -1):
        prefix = ".".join(parts[:n])
        if prefix in MOVED:
            return ".".join([MOVED[prefix], *parts[n:]])
    return None


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{spec.name} moved to {self.target}; the old path goes in the next release",
                      DeprecationWarning, stacklevel=4)
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """The module at the new path is already executed."""

    def get_code(self, fullname: str) -> CodeType | None:
        """The new module's code, so that ``python -m <old path>`` (runpy) runs the new module."""
        warnings.warn(f"{fullname} moved to {self.target}; run `python -m {self.target}` "
                      "(the old path goes in the next release)", DeprecationWarning, stacklevel=2)
        spec = importlib.util.find_spec(self.target)
        get_code = getattr(spec.loader, "get_code", None) if spec is not None else None
        return get_code(self.target) if get_code is not None else None


class MovedModules(importlib.abc.MetaPathFinder):
    """Answers an old module name with the module at its new place."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("bonbench."):
            return None
        moved = new_name(fullname)
        found = importlib.util.find_spec(moved) if moved is not None else None
        if moved is None or found is None:
            return None
        # a package stays a package under its old name (``python -m bonbench.cli`` runs its __main__)
        return importlib.util.spec_from_loader(fullname, _Alias(moved), is_package=found.submodule_search_locations is not None)


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, MovedModules) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedModules())
