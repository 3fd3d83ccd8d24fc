"""Rollouts from OpenAI-compatible servers while the learner trains (``--rollout-backend openai``).

The learner keeps its LoRA adapters; every ``--sync-every`` optimiser steps rank 0 saves them
(peft's adapter folder: ``adapter_config.json`` + ``adapter_model.safetensors``) under
``<checkpoint>/adapters/<name>-step<k>`` and loads that folder into every ``--endpoint`` through
vLLM's runtime LoRA API (``POST /v1/load_lora_adapter``, then ``/v1/unload_lora_adapter`` for the
previous one). Rollouts are then sampled with that adapter's name as the model, through the
pipeline's ``openai`` backend (per-sample seeds, retries, failover across endpoints).

The server must serve the trainer's base model with LoRA on and runtime updates allowed::

    VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve BASE --enable-lora --max-lora-rank 16

and read the adapter folder by its path (same machine or a shared filesystem). Between two syncs
the rollouts come from weights up to ``sync_every - 1`` steps old (``sync_every`` 1: on-policy up to
the server's numerics). A resumed run publishes the restored weights at once, so with
``sync_every`` > 1 it may sample from fresher weights than the killed run would have.

This module does not start servers, sample reference rollouts (those stay on the local base) or
support full fine-tuning (the server would have to reload every weight).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

from bonbench.core.errors import BonbenchError
from bonbench.core.models import ResolvedModel
from bonbench.core.served import OpenAIOptions, base_url
from bonbench.plugins.samplers.openai_backend import OpenAISampler

SERVER_HINT = ("start it with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve BASE --enable-lora "
               "--max-lora-rank R (R >= --lora-rank), on a machine that can read the checkpoint folder")


class AdapterPublisher:
    """Saves the live adapters and loads them into every endpoint; builds samplers on the newest."""

    def __init__(self, run_name: str, folder: Path, endpoints: tuple[str, ...], is_chat: bool, timeout: float = 600.0) -> None:
        self.run_name, self.folder, self.is_chat, self.timeout = run_name, Path(folder) / "adapters", is_chat, timeout
        self.options = OpenAIOptions(endpoints=tuple(endpoints))
        self.current: str | None = None  # the adapter name the endpoints sample with

    def name(self, step: int) -> str:
        return f"{self.run_name}-step{step}"

    def publish(self, lm: Any, step: int) -> str:
        """Save ``lm``'s adapters as of ``step`` steps and load them into every endpoint (rank 0 only)."""
        name = self.name(step)
        path = (self.folder / name).resolve()
        if path.exists():
            shutil.rmtree(path)
        lm.save_pretrained(str(path))
        previous = self.current
        for ep in self.options.endpoints:
            if previous is None:  # a resumed run: the killed one may have left this name loaded
                self._post(ep, "unload_lora_adapter", {"lora_name": name}, check=False)
            self._post(ep, "load_lora_adapter", {"lora_name": name, "lora_path": str(path)})
        self.current = name
        if previous is not None and previous != name:
            for ep in self.options.endpoints:
                # a server that lost it (restarted) has nothing to unload: not an error
                self._post(ep, "unload_lora_adapter", {"lora_name": previous}, check=False)
            shutil.rmtree(self.folder / previous, ignore_errors=True)
        return name

    def use(self, step: int) -> None:
        """Ranks that did not publish: sample with the adapter rank 0 published for ``step``."""
        self.current = self.name(step)

    def sampler(self, seed: int) -> OpenAISampler:
        if self.current is None:
            raise BonbenchError("no adapter was published to the rollout servers yet; this is a trainer bug")
        digest = hashlib.sha256(f"adapter\0{self.current}".encode()).hexdigest()[:16]
        model = ResolvedModel(name=self.current, path=str(self.folder / self.current), is_chat=self.is_chat,
                              fingerprint=f"served:{digest}")
        return OpenAISampler(model, seed=seed, options=self.options)

    def _post(self, endpoint: str, route: str, body: dict[str, str], check: bool = True) -> None:
        import httpx

        url = f"{base_url(endpoint)}/{route}"
        try:
            resp = httpx.post(url, json=body, timeout=self.timeout,
                              headers={"Authorization": f"Bearer {self.options.api_key}"})
        except httpx.HTTPError as exc:
            raise BonbenchError(f"rollout server {endpoint}: {route} failed ({exc}); is it running? {SERVER_HINT}") from None
        if check and resp.status_code >= 400:
            detail = resp.text.strip().splitlines()[0][:200] if resp.text.strip() else ""
            raise BonbenchError(f"rollout server {endpoint}: {route} answered {resp.status_code} {detail}; {SERVER_HINT}")
