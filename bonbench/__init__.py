"""bonbench: exact inference-time scaling evaluation (pass@k, bon@k, maj@k for every k <= n)."""

from __future__ import annotations

__version__ = "0.1.0"

from bonbench.errors import BonbenchError  # noqa: E402

__all__ = ["BonbenchError", "__version__"]
