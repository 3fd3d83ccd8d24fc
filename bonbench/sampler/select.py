"""Pick and build a sampling backend by name: ``vllm``, ``hf`` or ``scripted``.

``backend=None`` means vllm when it imports cleanly here, else hf. Backends are imported lazily so
that choosing ``hf`` never imports vllm (7-9 s, and a broken vllm install must not block hf).

Engine arguments the CLI collects for every backend are routed here: options that only mean
something to the other backend (``batch_size`` for vllm, which schedules its own batches;
``max_model_len`` / ``tensor_parallel_size`` / ``gpu_memory_utilization`` for hf) are dropped, and
an argument neither backend knows is a user error.

This module does not resolve models beyond calling ``resolve_model`` on a plain name.
"""

from __future__ import annotations

from typing import Any

from bonbench.errors import BonbenchError
from bonbench.models import ResolvedModel, resolve_model
from bonbench.sampler.base import Sampler

BACKENDS = ("vllm", "hf", "scripted")
_HF_ARGS = {"dtype", "batch_size", "device"}
_VLLM_ONLY = {"max_model_len", "tensor_parallel_size", "gpu_memory_utilization", "enforce_eager", "chunk_samples"}


def default_backend() -> str:
    """``"vllm"`` if the vllm package is installed, else ``"hf"``.

    Only looks the package up (milliseconds): importing vllm takes 15-45 s, and a dry run or a
    rerun with nothing left to sample must not pay that. A vllm that is installed but broken is
    not silently replaced by hf (the backend is part of the run id, so that would quietly start a
    different run): building the sampler raises an error naming the fix or ``--backend hf``.
    """
    import importlib.util

    return "vllm" if importlib.util.find_spec("vllm") is not None else "hf"


def get_sampler(backend: str | None, model: str | ResolvedModel | None, *, seed: int, **engine_args: Any) -> Sampler:
    """Build the sampler for ``backend`` on ``model`` (a name, a resolved model, or None = embedded).

    For ``scripted``, pass ``path=`` (a JSONL file of sample rows); ``model`` is ignored.
    """
    name = backend or default_backend()
    if name not in BACKENDS:
        raise BonbenchError(f"unknown backend '{name}': choose one of {', '.join(BACKENDS)}")
    if name == "scripted":
        from pathlib import Path

        from bonbench.sampler.scripted import ScriptedSampler

        path = engine_args.pop("path", None)
        if path is None:
            raise BonbenchError("the scripted backend needs a samples file: --backend scripted --samples FILE.jsonl")
        return ScriptedSampler.from_file(Path(path))
    resolved = model if isinstance(model, ResolvedModel) else resolve_model(model)
    if name == "hf":
        unknown = set(engine_args) - _HF_ARGS - _VLLM_ONLY
        if unknown:
            raise BonbenchError(f"the hf backend does not take {', '.join(sorted(unknown))}; its options are {', '.join(sorted(_HF_ARGS))}")
        from bonbench.sampler.hf import HFSampler

        return HFSampler(resolved, seed=seed, **{k: v for k, v in engine_args.items() if k in _HF_ARGS})
    from bonbench.sampler.vllm import VLLMSampler

    engine_args.pop("batch_size", None)
    engine_args.pop("device", None)
    return VLLMSampler(resolved, seed=seed, **engine_args)
