"""0.2.0 gives every module one path: the import paths of the flat 0.1 layout and the re-exporting
shims that answered them (``bonbench.compat``, ``bonbench.run.runner``, the 0.1 names of
``bonbench.pipeline``) are gone. Stored 0.1 data still reads: ``tests/test_old_outputs.py``."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import bonbench
import bonbench.pipeline
from bonbench.apps.trainer import loop

# the modules 0.1 had, which 0.2's compat module answered (CHANGELOG.md lists where each one went)
OLD_MODULES = (
    "bonbench.analysis", "bonbench.cache", "bonbench.cli", "bonbench.compare", "bonbench.config", "bonbench.data",
    "bonbench.errors", "bonbench.estimators", "bonbench.estimators_checks", "bonbench.estimators_maj", "bonbench.flags",
    "bonbench.graders", "bonbench.imported_runs", "bonbench.metricinfo", "bonbench.models", "bonbench.outputs",
    "bonbench.prompts", "bonbench.ray_cluster", "bonbench.readers", "bonbench.records", "bonbench.registry",
    "bonbench.report", "bonbench.rewards", "bonbench.runner", "bonbench.sampler", "bonbench.sampler.base",
    "bonbench.shard", "bonbench.store", "bonbench.trainer", "bonbench.trainer.objectives",
    "bonbench.trainer.objectives.base", "bonbench.verifier_choice", "bonbench.verifier_folder",
    "bonbench.verifier_model", "bonbench.verifier_train", "bonbench.verifiers", "bonbench.winrate",
    # the shims themselves
    "bonbench.compat", "bonbench.run.runner",
)


@pytest.mark.parametrize("old", OLD_MODULES)
def test_an_old_module_path_is_gone(old: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_no_finder_answers_old_paths_and_no_old_names_remain() -> None:
    assert not any(type(f).__module__.startswith("bonbench") for f in sys.meta_path)
    assert not hasattr(bonbench.pipeline, "prepare") and not hasattr(bonbench.pipeline, "score")
    assert not hasattr(loop, "prepare")  # 0.1's name of apps.trainer.setup.prepare_training
    assert bonbench.__version__ == "0.2.0"


def test_python_dash_m_with_an_old_path_fails() -> None:
    old = subprocess.run([sys.executable, "-m", "bonbench.sampler.cpu_preload", "--print"],
                         capture_output=True, text=True, timeout=120)
    assert old.returncode != 0 and "No module named 'bonbench.sampler'" in old.stderr
    new = subprocess.run([sys.executable, "-m", "bonbench.plugins.samplers.cpu_preload", "--print"],
                         capture_output=True, text=True, timeout=120)
    assert new.returncode == 0, new.stderr
