"""The Sampler protocol every backend implements, and the request/params records it consumes.

A backend receives many ``SampleRequest``s at once (batch them: prefix sharing and throughput
come from that) and yields finished ``Sample``s in groups as soon as they are done, so the run
store can persist them and an interrupted run keeps what finished. A request names exactly the
sample indices still missing for its problem, which is how resume and growing n work.

A backend is a plugin like any other (``bonbench.core.registry``): ``@register_sampler("name",
options=NameOptions)`` on a factory, or a package's ``bonbench.samplers`` entry point
``name = "module:factory"``, whose options record is the one its module's decorator declares, else
the annotation of the factory's ``options`` parameter (how the built-ins declare theirs). The factory is
called as ``factory(model, seed=..., options=..., samples=..., script=...)``: ``model`` is a model
name, a ``ResolvedModel`` or None (the embedded model); ``options`` an instance of the declared
frozen options record (None when the backend declares none); ``samples`` / ``script`` what a
replaying backend replays (None otherwise). Engine settings the user gives (``--dtype``,
``--batch-size``, ...) are checked against the options record's fields before any model loads.

This module does not import any engine, and knows no backend: the built-ins are the entry points
pyproject.toml lists (factories in ``bonbench.plugins.samplers``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, is_dataclass
from typing import Any, Protocol

from bonbench.core.records import Prompt, Sample
from bonbench.core.registry import Registry, parameter_types

SAMPLER_GROUP = "bonbench.samplers"


def sample_seed(seed: int, problem_id: str, sample_idx: int) -> int:
    """The seed of one sample's random stream, for backends that seed per key (hf, openai): a hash of
    (run seed, problem id, sample index), so neighbouring indices get unrelated streams and a sample
    does not depend on the batch, actor or server that drew it. Stored samples depend on this formula."""
    digest = hashlib.sha256(f"{seed}\0{problem_id}\0{sample_idx}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & 0x7FFF_FFFF_FFFF_FFFF


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 512
    seed: int = 0
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class SampleRequest:
    prompt: Prompt
    sample_indices: tuple[int, ...]

    @property
    def problem_id(self) -> str:
        return self.prompt.problem_id


class Sampler(Protocol):
    """A sampling backend. ``is_chat`` tells the task which prompt style to render."""

    name: str
    model: str
    is_chat: bool
    fingerprint: str

    def generate(self, requests: Sequence[SampleRequest], params: SamplingParams) -> Iterator[list[Sample]]:
        """Yield lists of finished samples (any grouping) until every requested index is done."""
        ...

    def close(self) -> None: ...


SamplerFactory = Callable[..., Sampler]
SAMPLERS: Registry[SamplerFactory] = Registry("backend", SAMPLER_GROUP)


def register_sampler(name: str, *, options: type | None = None, description: str = "") -> Callable[[Any], Any]:
    """Decorator: register a sampler factory (module docstring) under ``name`` with its typed
    ``options`` record (a frozen dataclass whose fields are the engine settings it takes)."""
    return SAMPLERS.register(name, options=options, description=description)


def sampler_names() -> list[str]:
    """Every registered backend name, sorted (nothing is imported)."""
    return SAMPLERS.names()


def sampler_options(name: str) -> type | None:
    """The options record backend ``name`` declared (None: it takes no engine settings): the one
    given to ``register_sampler``, else the dataclass its factory's ``options`` parameter is
    annotated with (loading the factory; a backend's module must be light, like a scheme's)."""
    meta = SAMPLERS.meta(name)
    if "options" in meta:
        return meta["options"]
    factory = SAMPLERS.get(name)  # an entry point not loaded yet: loading may run its decorator
    meta = SAMPLERS.meta(name)
    if "options" in meta:
        return meta["options"]
    annotation = parameter_types(factory).get("options")
    return annotation if isinstance(annotation, type) and is_dataclass(annotation) else None
