"""Pick and build a sampling backend by name through the sampler registry, with its own typed options.

The built-ins' factories (``vllm``, ``openai``, ``scripted`` here; ``hf`` in ``hf_factory``) are
declared once, as the ``bonbench.samplers`` entry points in pyproject.toml; each factory's
``options`` annotation is its options record (``api.sampler.sampler_options``). A third-party
backend plugs into the same group (or ``bonbench.api.sampler.register_sampler``) and is built the
same way. ``backend=None`` means vllm when it is installed here, else hf. Choosing ``hf`` never
imports vLLM and choosing ``vllm`` never imports torch here: the hf factory loads ``HFSampler``
(and torch) when it builds one, and the vllm backend imports vLLM when it starts.

Each backend has a frozen options record (``VLLMOptions``, ``HFSamplerOptions``, ``OpenAIOptions``, a
plugin's own): ``backend_options`` builds it from the settings a user actually gave (None = not
given, so the backend's default holds), and a setting the chosen backend does not take is a
one-line error naming the ones it does (``--batch-size`` means nothing to vLLM, which schedules
its own batches). The scripted backend replays given samples or a script.

This module does not resolve models beyond calling ``resolve_model`` on a plain name.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from bonbench.api.sampler import SAMPLERS, Sampler, sampler_names, sampler_options
from bonbench.core import models
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Sample
from bonbench.core.served import OpenAIOptions, served_model
from bonbench.plugins.samplers.openai_backend import OpenAISampler
from bonbench.plugins.samplers.scripted import ScriptedSampler
from bonbench.plugins.samplers.vllm import VLLMSampler


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
    # None: vLLM's default; a search run turns caching on and chunked prefill off (vllm_steps.step_engine_args)
    enable_prefix_caching: bool | None = None
    enable_chunked_prefill: bool | None = None


@dataclass(frozen=True)
class HFSamplerOptions:
    """transformers backend settings: ``batch_size`` sequences decoded together, ``device`` (default:
    CUDA when available, else CPU)."""

    dtype: str = "bfloat16"
    batch_size: int = 64
    device: str | None = None


def _resolved(model: str | models.ResolvedModel | None) -> models.ResolvedModel:
    return model if isinstance(model, models.ResolvedModel) else models.resolve_model(model)


def vllm_sampler(model: str | models.ResolvedModel | None, *, seed: int, options: VLLMOptions, **_: Any) -> Sampler:
    """vLLM (``vllm.LLM``): the default backend where vllm is installed."""
    return VLLMSampler(_resolved(model), seed=seed, **asdict(options))


def openai_sampler(model: str | models.ResolvedModel | None, *, seed: int, options: OpenAIOptions, **_: Any) -> Sampler:
    """An OpenAI-compatible server (``--endpoint``); the model is the server's."""
    served = model if isinstance(model, models.ResolvedModel) else served_model(model, options)
    return OpenAISampler(served, seed=seed, options=options)


def scripted_sampler(model: str | models.ResolvedModel | None, *, seed: int, options: None = None,
                     samples: Sequence[Sample] | None = None,
                     script: Mapping[str, Sequence[str]] | Callable[[str, int], str] | None = None, **_: Any) -> Sampler:
    """Replays given samples (``--samples FILE``) or a script; ``model`` only names it."""
    if samples is None and script is None:
        raise BonbenchError("the scripted backend replays samples: --backend scripted --samples FILE")
    label = model.name if isinstance(model, models.ResolvedModel) else (model or "scripted")
    return ScriptedSampler(script, samples=samples, model=label)


def describe_backends() -> list[tuple[str, str]]:
    """(backend, the engine settings it takes) of every registered backend, by name."""
    out = []
    for name in sampler_names():
        try:
            cls = sampler_options(name)
        except BonbenchError as exc:
            out.append((name, f"(failed to load: {exc})"))
            continue
        out.append((name, ", ".join(f.name for f in fields(cls)) if cls is not None else "none (replays samples)"))
    return out


def backend_options_record(options: Any) -> dict[str, Any]:
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
    return "vllm" if importlib.util.find_spec("vllm") is not None else "hf"


def _check_known(name: str) -> None:
    if name not in sampler_names():
        raise BonbenchError(f"unknown backend '{name}': choose one of {', '.join(sampler_names())}")


def backend_options(backend: str, **given: Any) -> Any:
    """The typed options of ``backend`` from the settings given (values of None are not given)."""
    _check_known(backend)
    cls = sampler_options(backend)
    if cls is None:
        raise BonbenchError(f"the {backend} backend takes no engine options")
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
    _check_known(name)
    cls = sampler_options(name)
    if cls is None:
        if options is not None or settings:
            raise BonbenchError(f"the {name} backend takes no engine options")
        return SAMPLERS.get(name)(model, seed=seed, options=None, samples=samples, script=script)
    opts = options if options is not None else backend_options(name, **settings)
    if options is not None and settings:
        raise BonbenchError("pass engine settings either as options or as keywords, not both")
    if not isinstance(opts, cls):
        raise BonbenchError(f"the {name} backend takes {cls.__name__}, not {type(opts).__name__}")
    return SAMPLERS.get(name)(model, seed=seed, options=opts, samples=samples, script=script)
