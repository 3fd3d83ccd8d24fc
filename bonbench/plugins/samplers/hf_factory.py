"""The ``hf`` backend's registry factory: builds ``HFSampler`` (transformers) from its options.

The ``bonbench.samplers`` entry point ``hf`` names this factory; its ``options`` annotation
(``HFOptions``) is the backend's options record. Reading it imports no torch: ``HFSampler``, whose
module imports torch, is a lazy target loaded only when a sampler is built. This module does
nothing else.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from bonbench.api.sampler import Sampler
from bonbench.core import models
from bonbench.core.registry import load_target
from bonbench.plugins.samplers.select import HFOptions

HF_SAMPLER = "bonbench.plugins.samplers.hf:HFSampler"  # imports torch: loaded when a sampler is built


def hf_sampler(model: str | models.ResolvedModel | None, *, seed: int, options: HFOptions, **_: Any) -> Sampler:
    """transformers (``HFSampler``): batched decoding on CUDA or CPU; the fallback without vllm."""
    resolved = model if isinstance(model, models.ResolvedModel) else models.resolve_model(model)
    sampler: Sampler = load_target(HF_SAMPLER)(resolved, seed=seed, **asdict(options))
    return sampler
