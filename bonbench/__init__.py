"""bonbench: exact inference-time scaling evaluation (pass@k, bon@k, maj@k for every k <= n).

The package is in layers, each a folder; a module imports only from the layers below its own
(docs/architecture.md has the diagram and the rule, tests/test_layers.py enforces it):

    core <- metrics <- api <- plugins <- (bonbench_tasks) <- pipeline <- run <- apps

Importing ``bonbench`` loads only ``bonbench.core.errors`` (``BonbenchError``) and ``compat`` (the
0.1 import paths): no layer beyond that, no plugin, no torch or vLLM. It defines no command; the
``bonbench`` command is ``bonbench.apps.cli``.
"""

from __future__ import annotations

__version__ = "0.1.0"

from bonbench import compat  # noqa: E402
from bonbench.core.errors import BonbenchError  # noqa: E402

compat.install()

__all__ = ["BonbenchError", "__version__"]
