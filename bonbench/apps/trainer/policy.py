"""The policy being trained: a transformers causal LM with LoRA adapters (peft) or all weights
trainable, its reference (the adapters switched off, or a frozen copy), an EMA anchor, batched
token log-probabilities with gradients, a sampler over the live weights, and the export of a
merged Hugging Face folder.

Sequences are laid out with the prompt left-padded and the completion right-padded, so every
completion starts at the same column and the logits of the completion positions alone are
computed (``logits_to_keep``): the vocabulary of small models is large (Gemma 3: 262k), and
logits over prompt positions would dominate memory. Log-probabilities are of the completion's
text re-tokenized after the rendered prompt (the samplers' encoding; ``hf_logprobs`` uses the same
convention), at the sampling temperature.

This module does not choose what to optimise (``loop`` and ``objectives`` do).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bonbench.apps.trainer.config import TrainConfig
from bonbench.core.errors import BonbenchError
from bonbench.core.models import ResolvedModel
from bonbench.core.records import Prompt
from bonbench.plugins.samplers.hf import HFSampler
from bonbench.plugins.samplers.hf_logprobs import encode_pair


def check_weight_files(resolved: ResolvedModel) -> None:
    """Every safetensors file of a local model folder must be complete: a truncated or garbled one is
    a one-line error naming it, before anything loads (safetensors checks that the header's tensors
    cover the file exactly; only the header is read)."""
    folder = Path(resolved.path)
    if not folder.is_dir():
        return
    from safetensors import SafetensorError, safe_open

    for path in sorted(folder.glob("*.safetensors")):
        try:
            with safe_open(str(path), framework="pt"):
                pass
        except (SafetensorError, OSError) as exc:
            raise BonbenchError(f"{path} is truncated or not a safetensors file ({str(exc).splitlines()[0]}); copy or "
                                f"download the model '{resolved.name}' again") from None


@dataclass
class Batch:
    """Token tensors of a micro-batch: ``ids``/``mask`` [B, Lp + W]; ``targets``/``tmask`` [B, W]."""

    ids: torch.Tensor
    mask: torch.Tensor
    pos: torch.Tensor
    targets: torch.Tensor
    tmask: torch.Tensor

    @property
    def width(self) -> int:
        return int(self.targets.shape[1])


class Policy:
    """Trainable policy (see the module docstring)."""

    def __init__(self, resolved: ResolvedModel, cfg: TrainConfig, device: str | None = None) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.resolved, self.cfg = resolved, cfg
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(resolved.path, revision=resolved.revision)
            # float32 master weights; the forward runs under autocast (cfg.dtype)
            # Any: transformers' annotations (the wrapped .to, a LoRA wrapper in place of the model) do not fit
            base: Any = AutoModelForCausalLM.from_pretrained(resolved.path, revision=resolved.revision, dtype=torch.float32)
        except OSError as exc:
            raise BonbenchError(f"cannot load model '{resolved.name}': {exc}".splitlines()[0]) from exc
        base.to(self.device)
        self._frozen_ref: Any = None
        if cfg.full_finetune:
            self.lm: Any = base
        else:
            from peft import LoraConfig, get_peft_model

            targets: Any = (cfg.lora_targets if cfg.lora_targets == "all-linear"
                            else [t.strip() for t in cfg.lora_targets.split(",")])
            lora = LoraConfig(r=cfg.lora_rank, lora_alpha=cfg.lora_alpha, lora_dropout=0.0, target_modules=targets,
                              task_type="CAUSAL_LM")
            try:
                self.lm = get_peft_model(base, lora)
            except ValueError as exc:
                raise BonbenchError(f"--lora-targets {cfg.lora_targets!r}: {exc}".splitlines()[0]) from exc
        # no dropout anywhere: sampling and the gradient must see the same policy
        self.lm.eval()
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else (self.tokenizer.eos_token_id or 0)
        self.ema: dict[str, torch.Tensor] | None = None
        if cfg.kl_anchor == "ema" and cfg.kl_active:
            self.ema = {n: p.detach().clone() for n, p in self.named_trainable()}

    # ---------------------------------------------------------------- parameters

    def named_trainable(self) -> list[tuple[str, torch.nn.Parameter]]:
        return [(n, p) for n, p in self.lm.named_parameters() if p.requires_grad]

    def trainable(self) -> list[torch.nn.Parameter]:
        return [p for _, p in self.named_trainable()]

    def trainable_state(self) -> dict[str, torch.Tensor]:
        return {n: p.detach().cpu().clone() for n, p in self.named_trainable()}

    def load_trainable_state(self, state: dict[str, torch.Tensor]) -> None:
        params = dict(self.named_trainable())
        if set(params) != set(state):
            raise BonbenchError("the saved training state does not fit this model (other LoRA settings?); "
                                "use another --name or the settings it was trained with")
        with torch.no_grad():
            for n, p in params.items():
                p.copy_(state[n].to(p.device, p.dtype))

    def update_ema(self) -> None:
        if self.ema is None:
            return
        rate = self.cfg.ema_rate
        with torch.no_grad():
            for n, p in self.named_trainable():
                self.ema[n].mul_(1 - rate).add_(p.detach(), alpha=rate)

    # ---------------------------------------------------------------- anchors

    @contextlib.contextmanager
    def reference(self) -> Iterator[Any]:
        """The reference policy as a module: the adapters switched off (LoRA), or a frozen copy of
        the base weights (full fine-tuning, loaded on first use)."""
        if not self.cfg.full_finetune:
            with self.lm.disable_adapter():
                yield self.lm
            return
        if self._frozen_ref is None:
            from transformers import AutoModelForCausalLM

            self._frozen_ref = AutoModelForCausalLM.from_pretrained(self.resolved.path, revision=self.resolved.revision,
                                                                    dtype=torch.float32).to(self.device).eval()  # type: ignore[arg-type]  # as in hf.py
            self._frozen_ref.requires_grad_(False)
        yield self._frozen_ref

    @contextlib.contextmanager
    def anchor(self) -> Iterator[Any]:
        """The KL anchor: the reference, or the policy with its EMA weights swapped in."""
        if self.ema is None:
            with self.reference() as ref:
                yield ref
            return
        params = dict(self.named_trainable())
        saved = {n: p.detach().clone() for n, p in params.items()}
        with torch.no_grad():
            for n, p in params.items():
                p.copy_(self.ema[n])
        try:
            yield self.lm
        finally:
            with torch.no_grad():
                for n, p in params.items():
                    p.copy_(saved[n])

    # ---------------------------------------------------------------- tokens

    def encode(self, prompt: Prompt, completion: str) -> tuple[list[int], list[int]]:
        """(prompt ids, completion ids) as KL scoring encodes them (``hf_logprobs.encode_pair``)."""
        return encode_pair(self.tokenizer, prompt, completion)

    def batch(self, pairs: Sequence[tuple[list[int], list[int]]]) -> Batch:
        lp = max(len(p) for p, _ in pairs)
        w = max(1, max(len(c) for _, c in pairs))
        n = len(pairs)
        ids = torch.full((n, lp + w), self.pad_id, dtype=torch.long)
        mask = torch.zeros((n, lp + w), dtype=torch.long)
        targets = torch.zeros((n, w), dtype=torch.long)
        tmask = torch.zeros((n, w), dtype=torch.float32)
        for r, (p, c) in enumerate(pairs):
            ids[r, lp - len(p):lp] = torch.tensor(p, dtype=torch.long)
            mask[r, lp - len(p):lp] = 1
            if c:
                ids[r, lp:lp + len(c)] = torch.tensor(c, dtype=torch.long)
                mask[r, lp:lp + len(c)] = 1
                targets[r, :len(c)] = torch.tensor(c, dtype=torch.long)
                tmask[r, :len(c)] = 1.0
        pos = (mask.cumsum(-1) - 1).clamp_(min=0)
        dev = self.device
        return Batch(ids.to(dev), mask.to(dev), pos.to(dev), targets.to(dev), tmask.to(dev))

    def log_softmax(self, module: Any, b: Batch) -> torch.Tensor:
        """log pi(. | prefix) at every completion position: [B, W, V] float32, at the training temperature."""
        dtype = getattr(torch, self.cfg.dtype)
        with torch.autocast(device_type=self.device.type, dtype=dtype, enabled=dtype != torch.float32):
            out = module(input_ids=b.ids, attention_mask=b.mask, position_ids=b.pos, logits_to_keep=b.width + 1)
        logits = out.logits[:, :-1].float() / self.cfg.temperature
        return torch.log_softmax(logits, dim=-1)

    @torch.no_grad()
    def prompt_features(self, prompts: Sequence[list[int]]) -> torch.Tensor:
        """The live policy's last-layer hidden state at each prompt's last token: [P, H] float32, no
        gradient (the value head's input; ``value.py``)."""
        out: list[torch.Tensor] = []
        dtype = getattr(torch, self.cfg.dtype)
        for start in range(0, len(prompts), self.cfg.micro_batch):
            b = self.batch([(p, []) for p in prompts[start:start + self.cfg.micro_batch]])
            lp = b.ids.shape[1] - b.width  # prompts are left-padded: column lp - 1 is every prompt's last token
            with torch.autocast(device_type=self.device.type, dtype=dtype, enabled=dtype != torch.float32):
                res = self.lm(input_ids=b.ids[:, :lp], attention_mask=b.mask[:, :lp], position_ids=b.pos[:, :lp],
                              output_hidden_states=True, logits_to_keep=1)
            out.append(res.hidden_states[-1][:, -1].float())
        return torch.cat(out)

    @property
    def hidden_size(self) -> int:
        config = self.lm.config
        return int(getattr(config, "hidden_size", None) or config.get_text_config().hidden_size)

    def sequence_logprobs(self, pairs: Sequence[tuple[list[int], list[int]]], which: str = "policy") -> list[float]:
        """Summed log-probabilities of each completion (no gradient) under the policy or the reference."""
        return self.logprobs(pairs, which)[0]

    @torch.no_grad()
    def logprobs(self, pairs: Sequence[tuple[list[int], list[int]]],
                 which: str = "policy") -> tuple[list[float], list[np.ndarray]]:
        """Each completion's summed log-probability and its per-token log-probabilities (float32, one
        array per completion), no gradient, under the policy or the reference."""
        sums: list[float] = []
        tokens: list[np.ndarray] = []
        ctx = contextlib.nullcontext(self.lm) if which == "policy" else self.reference()
        with ctx as module:
            for start in range(0, len(pairs), self.cfg.micro_batch):
                chunk = pairs[start:start + self.cfg.micro_batch]
                b = self.batch(chunk)
                lp = self.log_softmax(module, b).gather(-1, b.targets[..., None]).squeeze(-1)
                sums += (lp * b.tmask).sum(-1).double().tolist()
                rows = lp.float().cpu().numpy()
                tokens += [rows[i, :len(c)].copy() for i, (_, c) in enumerate(chunk)]
        return sums, tokens

    # ---------------------------------------------------------------- sampling and export

    def sampler(self, seed: int, batch_size: int = 64, reference: bool = False) -> HFSampler:
        """An HF sampler over the live weights (``reference``: the caller holds ``self.reference()``)."""
        return HFSampler.from_loaded(self.lm if not (reference and self.cfg.full_finetune) else self._frozen_ref,
                                     self.tokenizer, name=self.resolved.name, fingerprint=self.resolved.fingerprint,
                                     is_chat=self.resolved.is_chat, seed=seed, batch_size=batch_size)

    def export(self, folder: Path) -> str:
        """Write a merged Hugging Face folder (bf16 weights, tokenizer); return the weights' sha256.
        The adapters are merged into a copy, so training can go on afterwards."""
        folder.mkdir(parents=True, exist_ok=True)
        model = self.lm if self.cfg.full_finetune else copy.deepcopy(self.lm).merge_and_unload()
        model = copy.deepcopy(model) if self.cfg.full_finetune else model
        model.to(torch.bfloat16).save_pretrained(folder, safe_serialization=True)
        self.tokenizer.save_pretrained(folder)
        h = hashlib.sha256()
        for f in sorted(folder.glob("*.safetensors")):
            with f.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
        return h.hexdigest()
