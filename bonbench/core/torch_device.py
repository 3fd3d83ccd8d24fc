"""Where and in which precision a model scores: ``device`` and ``dtype`` options resolved once.

What it does: ``resolve_device`` turns the ``device`` / ``dtype`` options that the model-backed
verifiers and reward models take (``auto``, ``cpu``, ``cuda[:N]``, ``mps``; ``auto``, ``float32``,
``bfloat16``, ``float16``)
into concrete names, with a one-line error naming the fix when CUDA (or Apple's MPS) is asked for
and torch sees none. ``auto`` means CUDA when torch sees it, in bfloat16 there (what the model cards of the PRMs,
reward models and judges prescribe) and float32 on the CPU (where bfloat16 is slow and inexact).

What it does not do: load or move a model; it imports torch only when called.
"""

from __future__ import annotations

from bonbench.core.errors import BonbenchError

DTYPES = ("float32", "bfloat16", "float16")


def resolve_device(device: str, dtype: str, owner: str) -> tuple[str, str]:
    """``(device, dtype)`` with ``auto`` resolved; ``owner`` names the option's owner in errors
    (e.g. ``"PRM option"``)."""
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    elif device.startswith("cuda") and not torch.cuda.is_available():
        raise BonbenchError(f"{owner} device={device} but torch sees no CUDA device: use device=cpu (or auto)")
    elif device == "mps" and not _mps_available(torch):
        raise BonbenchError(f"{owner} device=mps but torch sees no MPS device: use device=cpu (or auto)")
    elif device not in ("cpu", "mps") and not device.startswith("cuda"):
        raise BonbenchError(f"{owner} device={device!r} is not auto, cpu, cuda[:N] or mps")
    if dtype == "auto":
        dtype = "bfloat16" if device.startswith("cuda") else "float32"
    if dtype not in DTYPES:
        raise BonbenchError(f"{owner} dtype={dtype!r} is not auto or one of {', '.join(DTYPES)}")
    return device, dtype


def _mps_available(torch: object) -> bool:
    backends = getattr(torch, "backends", None)
    mps = getattr(backends, "mps", None)
    return bool(mps is not None and mps.is_available())
