"""bonbench: exact inference-time scaling evaluation (pass@k, bon@k, maj@k for every k <= n).

The package is in layers, each a folder; a module imports only from the layers below its own
(docs/architecture.md has the diagram and the rule, tests/test_layers.py enforces it):

    core <- metrics <- api <- plugins <- (bonbench_tasks) <- pipeline <- run <- apps
"""

from __future__ import annotations

__version__ = "0.1.0"

from bonbench import compat  # noqa: E402
from bonbench.core.errors import BonbenchError  # noqa: E402

compat.install()

__all__ = ["BonbenchError", "__version__"]
