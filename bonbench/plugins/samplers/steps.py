"""The one factory of step samplers: a run's sampler object and its sampling settings -> the
``StepSampler`` a search continues prefixes with (``bonbench.api.search.contract``).

``step_sampler`` dispatches on the sampler object's type: ``HFSampler`` (transformers) ->
``HFStepSampler``. A sampler of any other backend is a ValueError naming the backends that support
steps; the run layer turns it into one ``error:`` line before anything is sampled. This module
imports the transformers backend (and torch with it): the run layer loads it lazily, by its
``"module:attr"`` address, only when a search runs.

What it does not do: build the sampler (``bonbench.run.resolve.build_sampler``) or sample.
"""

from __future__ import annotations

from bonbench.api.sampler import SamplingParams
from bonbench.api.search.contract import StepSampler
from bonbench.plugins.samplers.hf import HFSampler
from bonbench.plugins.samplers.hf_steps import HFStepSampler

STEP_BACKENDS = ("hf",)  # the backends whose samplers continue prefixes step by step


def step_sampler(sampler: object, params: SamplingParams, delimiter: str) -> StepSampler:
    """The step sampler over ``sampler`` with ``params`` (temperature, top_p, max tokens per continuation)
    and the step ``delimiter``; ValueError for a backend with no step sampler."""
    if isinstance(sampler, HFSampler):
        return HFStepSampler(sampler, params, delimiter)
    name = getattr(sampler, "name", type(sampler).__name__)
    raise ValueError(f"backend {name!r} has no step sampler, which a search continues prefixes with: "
                     f"use --backend {' or '.join(STEP_BACKENDS)}")
