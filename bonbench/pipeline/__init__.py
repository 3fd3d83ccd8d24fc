"""Layer 6, the pipeline: the stages of one run and what they store.

``prepared`` (a run resolved to its directory, config.json, the ids that key stored rows),
``stages`` (sample, grade, verify, evaluate), ``scoring`` (metrics.json and curves.json),
``compare`` (kl, win rates, kl_bon@k), ``shard`` (one run's problems split over shards),
``readers`` and ``imported`` (samples files from other harnesses), ``progress`` (the callback
type) and ``report`` (the metrics table).

It does not turn names into a task, model, sampler or verifier, plan runs or parse flags:
``bonbench.run`` resolves and plans and hands the stages what they need (no module here imports a
plugin package or a task), and ``bonbench.apps.cli`` parses. Importing the package loads none of its modules.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any


def __getattr__(name: str) -> Any:
    """0.1's ``bonbench.pipeline`` was one module: its names (``prepare``, ``score``, ...) still
    resolve here, from ``bonbench.pipeline.stages``, with a DeprecationWarning, for one release."""
    if name.startswith("__"):
        raise AttributeError(name)
    stages = importlib.import_module("bonbench.pipeline.stages")
    if not hasattr(stages, name) or isinstance(getattr(stages, name), type(importlib)):
        # not an old name (or a submodule: Python imports it itself after this AttributeError)
        raise AttributeError(f"module 'bonbench.pipeline' has no attribute {name!r}")
    warnings.warn(f"bonbench.pipeline.{name} moved to bonbench.pipeline.stages.{name}; the old path goes in the next release",
                  DeprecationWarning, stacklevel=2)
    return getattr(stages, name)
