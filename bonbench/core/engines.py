"""What every vLLM engine in bonbench needs before it starts: the CPU settings, the quiet log level,
and an import of vllm that names the fix when the install is broken.

What it does: ``cpu_ranges`` (CPU lists in ``VLLM_CPU_OMP_THREADS_BIND`` form), ``set_cpu_env_defaults``
(on a machine without CUDA: use every allowed CPU, no reserved CPU, 4 GiB of KV cache, the engine
core in-process; the user's own values win), ``debug`` / ``quiet_log_level`` (``--debug`` shows the
engine's log; otherwise vLLM logs at ERROR) and ``import_vllm``. The sampler
(``bonbench.plugins.samplers.vllm``, its local server), the vLLM reward models
(``bonbench.plugins.rewards.vllm_pooling``) and the trainer's rollouts share them from here, below
every plugin.

What it does not do: build an engine, render prompts or redirect the engine's output into a log
file (``bonbench.plugins.samplers.engine_log``); it imports vllm only inside ``import_vllm``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from bonbench.core.errors import BonbenchError

ENV_DEBUG = "BONBENCH_DEBUG"

_BROKEN_INSTALL = (
    "vllm cannot be imported ({err}): on CPU machines pip install 'bonbench[cpu]' and then "
    "pip uninstall -y torchvision torchaudio torchcodec (see README), or use --backend hf"
)


def debug() -> bool:
    """Whether the user asked to see everything (``--debug``: ``BONBENCH_DEBUG=1``)."""
    return os.environ.get(ENV_DEBUG, "") not in ("", "0")


def quiet_log_level() -> str:
    """vLLM's log level: ERROR normally (errors still show), DEBUG with ``--debug``."""
    return "DEBUG" if debug() else "ERROR"


def cpu_ranges(cpus: Sequence[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"``, the format VLLM_CPU_OMP_THREADS_BIND takes."""
    out: list[str] = []
    ordered = sorted(cpus)
    start = prev = ordered[0]
    for c in ordered[1:] + [None]:
        if c is not None and c == prev + 1:
            prev = c
            continue
        out.append(f"{start}-{prev}" if prev != start else str(start))
        if c is not None:
            start = prev = c
    return ",".join(out)


def set_cpu_env_defaults() -> None:
    """Set vLLM's CPU knobs to use the whole machine unless the user set them (no-op with CUDA)."""
    try:
        import torch

        if torch.cuda.is_available():
            return
    except ImportError:
        pass
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", cpu_ranges(cpus))
    os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "4")
    # Run the engine core in this process. With the default separate core process, requests reach
    # the scheduler while it is already stepping, so batch composition (and with it the engine-seeded
    # samples) varies from run to run; in-process, generate() enqueues everything before the first
    # step and the same seed reproduces every sample. Measured on 2 cores: same tokens/s, faster start.
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def import_vllm() -> Any:
    """Import vllm (after setting the CPU defaults) or raise a ``BonbenchError`` naming the fix."""
    set_cpu_env_defaults()
    # vLLM logs to stdout by default; bonbench's stdout is the metrics table and the run dir.
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
    # ERROR: vLLM's INFO/WARNING start-up lines are not the user's business (--debug shows them)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", quiet_log_level())
    try:
        import vllm
        from vllm import LLM, SamplingParams  # noqa: F401  (the LLM path is what pulls torchvision in)
    except Exception as exc:  # RuntimeError/OSError from CUDA builds of torchvision & co, ImportError
        raise BonbenchError(_BROKEN_INSTALL.format(err=f"{type(exc).__name__}: {exc}".splitlines()[0])) from exc
    return vllm
