"""The step sampler of a built sampling backend: the one place a search turns a ``Sampler`` into a ``StepSampler``.

``step_sampler(sampler, params, delimiter)`` dispatches on the sampler object's type: ``HFSampler``
-> ``HFStepSampler``, ``VLLMSampler`` -> ``VLLMStepSampler`` (its engine built with
``vllm_steps.step_engine_args()``), ``OpenAISampler`` -> ``OpenAIStepSampler`` (which probes the
servers for stop-string support); any other backend is a ``ValueError`` naming the ones that
support steps.

This module imports the transformers backend (and torch with it): the run layer loads it lazily,
by its ``"module:attr"`` address, only when a search runs.

What it does not do: build the backend (``select.get_sampler`` does), or choose the delimiter (the
scorer's family and the task do).
"""

from __future__ import annotations

from bonbench.api.sampler import SamplingParams
from bonbench.api.search.contract import StepSampler
from bonbench.plugins.samplers.hf import HFSampler
from bonbench.plugins.samplers.hf_steps import HFStepSampler
from bonbench.plugins.samplers.openai_backend import OpenAISampler
from bonbench.plugins.samplers.openai_steps import OpenAIStepSampler
from bonbench.plugins.samplers.vllm import VLLMSampler
from bonbench.plugins.samplers.vllm_steps import VLLMStepSampler

STEP_BACKENDS = ("hf", "vllm", "openai")  # the backends whose samplers continue prefixes step by step


def step_sampler(sampler: object, params: SamplingParams, delimiter: str) -> StepSampler:
    """The step sampler over ``sampler`` with ``params`` per step and ``delimiter`` (module docstring)."""
    if isinstance(sampler, HFSampler):
        return HFStepSampler(sampler, params, delimiter)
    if isinstance(sampler, VLLMSampler):
        return VLLMStepSampler(sampler, params, delimiter)
    if isinstance(sampler, OpenAISampler):
        return OpenAIStepSampler(sampler, params, delimiter)
    name = getattr(sampler, "name", type(sampler).__name__)
    raise ValueError(f"backend {name!r} has no step sampler, which a search continues prefixes with: "
                     f"use --backend {', '.join(STEP_BACKENDS[:-1])} or {STEP_BACKENDS[-1]}")
