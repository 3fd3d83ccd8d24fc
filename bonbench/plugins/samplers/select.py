"""Pick and build a sampling backend by name (``vllm``, ``hf``, ``openai`` or ``scripted``), with its own typed options.

``backend=None`` means vllm when it is installed here, else hf. Backends are imported lazily so
that choosing ``hf`` never imports vllm (7-9 s, and a broken vllm install must not block hf).

Each engine backend has a frozen options record (``VLLMOptions``, ``HFOptions``, ``OpenAIOptions``): ``backend_options``
builds it from the settings a user actually gave (None = not given, so the backend's default holds),
and a setting the chosen backend does not take is a one-line error naming the ones it does
(``--batch-size`` means nothing to vLLM, which schedules its own batches). The scripted backend
replays given samples or a script and is built here too, the one place that constructs samplers.

This module does not resolve models beyond calling ``resolve_model`` on a plain name.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Callable, Mapping, Sequence

from bonbench.core import models
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Sample
from bonbench.api.sampler import Sampler

BACKENDS = ("vllm", "hf", "openai", "scripted")


@dataclass(frozen=True)
class VLLMOptions:
    """vLLM engine settings (``vllm.LLM`` arguments of the same names; ``chunk_samples``: sequences
    per ``generate`` call, each chunk's samples are stored as soon as it returns)."""

    dtype: str = "bfloat16"
    max_model_len: int | None = None
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9
    enforce_eager: bool | None = None
    chunk_samples: int = 512


@dataclass(frozen=True)
class HFOptions:
    """transformers backend settings: ``batch_size`` sequences decoded together, ``device`` (default:
    CUDA when available, else CPU)."""

    dtype: str = "bfloat16"
    batch_size: int = 64
    device: str | None = None


def _openai_options() -> type:
    from bonbench.plugins.samplers.openai_backend import OpenAIOptions  # no engine behind it: cheap to import

    return OpenAIOptions


OPTIONS: dict[str, type] = {"vllm": VLLMOptions, "hf": HFOptions, "openai": _openai_options()}


def recorded_options(options: Any) -> dict[str, Any]:
    """The options as config.json records them (not hashed): the openai backend leaves out its API key."""
    recorded = getattr(options, "recorded", None)
    return recorded() if callable(recorded) else asdict(options)


def default_backend() -> str:
    """``"vllm"`` if the vllm package is installed, else ``"hf"``.

    Only looks the package up (milliseconds): importing vllm takes 15-45 s, and a dry run or a
    rerun with nothing left to sample must not pay that. A vllm that is installed but broken is
    not silently replaced by hf (the backend is part of the run id, so that would quietly start a
    different run): building the sampler raises an error naming the fix or ``--backend hf``.
    """
    import importlib.util

    return "vllm" if importlib.util.find_spec("vllm") is not None else "hf"


def backend_options(backend: str, **given: Any) -> Any:
    """The typed options of ``backend`` from the settings given (values of None are not given)."""
    if backend not in OPTIONS:
        raise BonbenchError(f"the {backend} backend takes no engine options")
    cls = OPTIONS[backend]
    names = {f.name for f in fields(cls)}
    chosen = {k: v for k, v in given.items() if v is not None}
    unknown = sorted(set(chosen) - names)
    if unknown:
        flags = ", ".join("--" + k.replace("_", "-") for k in unknown)
        raise BonbenchError(f"the {backend} backend does not take {', '.join(unknown)} ({flags}); "
                            f"its options are {', '.join(sorted(names))}")
    return cls(**chosen)


def get_sampler(backend: str | None, model: str | models.ResolvedModel | None, *, seed: int,
                options: Any = None, samples: Sequence[Sample] | None = None,
                script: Mapping[str, Sequence[str]] | Callable[[str, int], str] | None = None,
                **settings: Any) -> Sampler:
    """Build the sampler for ``backend`` on ``model`` (a name, a resolved model, or None = embedded).

    Engine settings come as ``options`` or as keywords (checked by ``backend_options``). The
    ``scripted`` backend replays ``samples`` and/or a ``script``; ``model`` then only names it.
    """
    name = backend or default_backend()
    if name not in BACKENDS:
        raise BonbenchError(f"unknown backend '{name}': choose one of {', '.join(BACKENDS)}")
    if name == "scripted":
        from bonbench.plugins.samplers.scripted import ScriptedSampler

        if samples is None and script is None:
            raise BonbenchError("the scripted backend replays samples: --backend scripted --samples FILE")
        label = model.name if isinstance(model, models.ResolvedModel) else (model or "scripted")
        return ScriptedSampler(script, samples=samples, model=label)
    opts = options if options is not None else backend_options(name, **settings)
    if options is not None and settings:
        raise BonbenchError("pass engine settings either as options or as keywords, not both")
    if not isinstance(opts, OPTIONS[name]):
        raise BonbenchError(f"the {name} backend takes {OPTIONS[name].__name__}, not {type(opts).__name__}")
    if name == "openai":
        from bonbench.plugins.samplers.openai_backend import OpenAISampler, served_model

        served = model if isinstance(model, models.ResolvedModel) else served_model(model, opts)
        return OpenAISampler(served, seed=seed, options=opts)
    resolved = model if isinstance(model, models.ResolvedModel) else models.resolve_model(model)
    if name == "hf":
        from bonbench.plugins.samplers.hf import HFSampler

        return HFSampler(resolved, seed=seed, **asdict(opts))
    from bonbench.plugins.samplers.vllm import VLLMSampler

    return VLLMSampler(resolved, seed=seed, **asdict(opts))
