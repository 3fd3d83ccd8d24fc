"""bonbench: exact inference-time scaling evaluation (pass@k, bon@k, maj@k for every k <= n).

The package is in layers, each a folder; a module imports only from the layers below its own
(docs/architecture.md has the diagram and the rule, tests/test_layers.py enforces it):

    core <- metrics <- api <- plugins <- (bonbench_tasks) <- pipeline <- run <- apps

This module holds the version (``__version__``) and imports nothing: no layer, no plugin, no torch
or vLLM. Each name lives in one module and is imported from there (``BonbenchError`` from
``bonbench.core.errors``). It defines no command; the ``bonbench`` command is ``bonbench.apps.cli``.
"""

from __future__ import annotations

__version__ = "0.2.0"
