"""The ``hf`` backend's registry factory: builds ``HFSampler`` (transformers) from its options.

Registered lazily (``bonbench.plugins.samplers.select`` and the ``bonbench.samplers`` entry point
``hf``), so that torch is imported only when the hf backend is chosen. This module does nothing else.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from bonbench.api.sampler import Sampler
from bonbench.core import models
from bonbench.plugins.samplers.hf import HFSampler


def hf_sampler(model: str | models.ResolvedModel | None, *, seed: int, options: Any, **_: Any) -> Sampler:
    """transformers (``HFSampler``): batched decoding on CUDA or CPU; the fallback without vllm."""
    resolved = model if isinstance(model, models.ResolvedModel) else models.resolve_model(model)
    return HFSampler(resolved, seed=seed, **asdict(options))
