"""Old import paths of the flat 0.1 layout keep working for one release (bonbench.compat)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from bonbench import compat


@pytest.mark.parametrize("old", sorted(compat.MOVED))
def test_every_old_module_imports_as_the_new_one(old: str) -> None:
    new = importlib.import_module(compat.MOVED[old])
    assert importlib.import_module(old) is new


def test_old_submodules_map_by_prefix_and_unknown_names_do_not() -> None:
    assert compat.new_name("bonbench.trainer.objectives.tang") == "bonbench.plugins.objectives.tang"
    assert compat.new_name("bonbench.trainer.loop") == "bonbench.apps.trainer.loop"
    assert compat.new_name("bonbench.sampler.base") == "bonbench.api.sampler"
    assert compat.new_name("bonbench.core.store") is None
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("bonbench.no_such_module")


def test_an_old_path_warns_once_with_the_new_path() -> None:
    # a fresh interpreter: in this one the old names may already be imported
    code = ("import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
            "try:\n    from bonbench.runner import RunRequest\nexcept DeprecationWarning as w:\n    print(w)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "bonbench.runner moved to bonbench.run.runner" in out.stdout, out.stderr
    code = ("from bonbench.estimators import pass_at_k; from bonbench.metrics.estimators import pass_at_k as p\n"
            "assert pass_at_k is p\n")
    assert subprocess.run([sys.executable, "-W", "ignore", "-c", code], timeout=120).returncode == 0


def test_the_old_pipeline_module_names_resolve_from_stages() -> None:
    # 0.1's bonbench.pipeline was a module; it is a package now, whose old names come from stages
    code = ("import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
            "import bonbench.pipeline as p\nfrom bonbench.pipeline import stages, compare\n"
            "try:\n    p.prepare\nexcept DeprecationWarning as w:\n    print(w)\n"
            "warnings.simplefilter('ignore')\nassert p.score is stages.score\n"
            "try:\n    p.no_such_name\nexcept AttributeError:\n    print('unknown refused')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "bonbench.pipeline.prepare moved to bonbench.pipeline.stages.prepare" in out.stdout, out.stderr
    assert "unknown refused" in out.stdout


def test_python_dash_m_runs_an_old_module_path() -> None:
    # 0.1's docs and install script ran `python -m bonbench.sampler.cpu_preload --print`; old
    # packages keep their __main__ (`python -m bonbench.cli` is the CLI)
    new = subprocess.run([sys.executable, "-m", "bonbench.plugins.samplers.cpu_preload", "--print"],
                         capture_output=True, text=True, timeout=120)
    old = subprocess.run([sys.executable, "-m", "bonbench.sampler.cpu_preload", "--print"],
                         capture_output=True, text=True, timeout=120)
    assert old.returncode == new.returncode == 0 and old.stdout == new.stdout, old.stderr
    cli = subprocess.run([sys.executable, "-m", "bonbench.cli", "--version"], capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0 and cli.stdout.startswith("bonbench "), cli.stderr
