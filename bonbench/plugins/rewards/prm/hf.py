"""The transformers engine of process reward models: every step score of a sample from one forward.

``HFStepScorer`` loads the tokenizer and the model the family needs (a token classifier, a causal
LM, or a backbone with the value head read from the checkpoint), encodes each sample
(``encode.StepEncoder``), and runs batches padded on the right: a causal model's real tokens never
attend to the padding after them and their position ids stay 0..n-1, so a sample's scores do not
depend on its batch (``tests/test_prm.py`` checks batch size 1 against n). Only the positions of
the step ends are read; for an LM head only the rows of the class tokens are multiplied, not the
whole vocabulary.

A checkpoint whose architecture transformers lacks (Qwen2.5-Math-PRM's ``Qwen2ForProcessRewardModel``)
runs its own code only when the user passed ``trust_remote_code``. This module does not split
steps, aggregate or store anything (``verifier``); vLLM's pooling runner is the other engine (``pooling``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bonbench.core.errors import BonbenchError
from bonbench.plugins.rewards.prm.encode import Encoded, StepEncoder
from bonbench.plugins.rewards.prm.family import PRMFamily

VALUE_HEAD = "v_head.summary"  # the value head's weights in a Skywork PRM checkpoint


def needs_remote_code(config: Any) -> bool:
    """Whether the config's architecture exists only as the checkpoint's own code."""
    import transformers

    archs = getattr(config, "architectures", None) or []
    return bool(getattr(config, "auto_map", None)) and not any(hasattr(transformers, a) for a in archs)


class HFStepScorer:
    """Per-step scores with transformers (module docstring)."""

    def __init__(self, path: str, source: str, family: PRMFamily, *, device: str, dtype: str,
                 batch_size: int | None, trust_remote_code: bool, max_length: int | None = None) -> None:
        import torch
        from transformers import AutoConfig, AutoTokenizer

        self.family, self.device = family, device
        self.batch_size = batch_size or (16 if device.startswith("cuda") else 4)
        self.tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
        self.encoder = StepEncoder(family, self.tokenizer, source, max_length)
        config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
        self.model = self._load(path, config, getattr(torch, dtype), trust_remote_code).to(device).eval()
        self.pad_id = next((t for t in (self.tokenizer.pad_token_id, self.tokenizer.eos_token_id) if t is not None), 0)
        self.weight: Any = None  # the rows of the LM head's class tokens, or the value head
        self.bias: Any = None
        if family.head == "lm_tokens":
            lm_head = self.model.get_output_embeddings()
            self.weight = lm_head.weight[self.encoder.class_ids].detach()
            self.bias = None if getattr(lm_head, "bias", None) is None else lm_head.bias[self.encoder.class_ids].detach()
        elif family.head == "value":
            self.weight, self.bias = _value_head(path, source, device, self.model.dtype)
        self.forwards = 0  # forward passes made (a test counts them)

    def _load(self, path: str, config: Any, dtype: Any, trust_remote_code: bool) -> Any:
        from transformers import AutoModel, AutoModelForCausalLM, AutoModelForTokenClassification

        loader = self.family.loader
        if loader == "token_classifier" and needs_remote_code(config):
            if not trust_remote_code:
                raise BonbenchError(f"PRM {path!r} ({', '.join(config.architectures)}) runs its own modelling code: add "
                                    "?trust_remote_code=true if you trust the model's source")
            return AutoModel.from_pretrained(path, dtype=dtype, trust_remote_code=True)
        cls = {"token_classifier": AutoModelForTokenClassification, "causal_lm": AutoModelForCausalLM,
               "backbone": AutoModel}[loader]
        try:
            return cls.from_pretrained(path, dtype=dtype)
        except (OSError, ValueError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise BonbenchError(f"could not load PRM {path!r} as a {loader.replace('_', ' ')} ({first}); "
                                "pass ?family= with its family") from None

    def encode(self, questions: Sequence[str], steps: Sequence[Sequence[str]]) -> list[Encoded]:
        """Every sample's input and read positions (tokenizer only)."""
        return [self.encoder.encode(q, s) for q, s in zip(questions, steps, strict=True)]

    def step_scores(self, questions: Sequence[str], steps: Sequence[Sequence[str]]) -> list[tuple[tuple[float, ...], int]]:
        """(per-step scores, tokens read) of every sample; a sample without steps reads nothing."""
        import torch

        encoded = self.encode(questions, steps)
        out: list[tuple[tuple[float, ...], int]] = [((), 0)] * len(encoded)
        order = sorted((i for i, e in enumerate(encoded) if e.ids), key=lambda i: -len(encoded[i].ids))
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                batch = [encoded[i] for i in order[start:start + self.batch_size]]
                for i, scores in zip(order[start:start + self.batch_size], self._batch(batch), strict=True):
                    out[i] = (scores, len(encoded[i].ids))
        return out

    def _batch(self, batch: Sequence[Encoded]) -> list[tuple[float, ...]]:
        import torch

        width = max(len(e.ids) for e in batch)
        ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for r, e in enumerate(batch):
            ids[r, :len(e.ids)] = torch.tensor(e.ids)
            mask[r, :len(e.ids)] = 1
        rows = torch.tensor([r for r, e in enumerate(batch) for _ in e.positions])
        cols = torch.tensor([p for e in batch for p in e.positions])
        read = self._read(ids.to(self.device), mask.to(self.device), rows.to(self.device), cols.to(self.device))
        f = self.family
        probs = torch.softmax(read, dim=-1)[:, f.index] if f.squash == "softmax" else torch.sigmoid(read[:, f.index])
        flat = probs.tolist()
        out, at = [], 0
        for e in batch:
            out.append(tuple(float(v) for v in flat[at:at + len(e.positions)]))
            at += len(e.positions)
        return out

    def _read(self, ids: Any, mask: Any, rows: Any, cols: Any) -> Any:
        """The head's outputs at (rows, cols): (steps, classes) as float32."""
        self.forwards += 1
        if self.family.head == "classes":
            out = self.model(input_ids=ids, attention_mask=mask)
            logits = out.logits if hasattr(out, "logits") else out[0]
            return logits[rows, cols].float()
        backbone = self.model.base_model if self.family.head == "lm_tokens" else self.model
        hidden = backbone(input_ids=ids, attention_mask=mask).last_hidden_state[rows, cols]
        read = hidden @ self.weight.T
        return (read if self.bias is None else read + self.bias).float()


def _value_head(path: str, source: str, device: str, dtype: Any) -> tuple[Any, Any]:
    """(weight, bias) of the value head stored beside the backbone's weights (``VALUE_HEAD``)."""
    from safetensors import safe_open

    folder = Path(path)
    if not folder.is_dir():
        from huggingface_hub import snapshot_download

        folder = Path(snapshot_download(path, allow_patterns=["*.safetensors"]))
    found: dict[str, Any] = {}
    for file in sorted(folder.glob("*.safetensors")):
        with safe_open(str(file), "pt") as st:
            for key in st.keys():
                if key.endswith((VALUE_HEAD + ".weight", VALUE_HEAD + ".bias")):
                    found[key.rsplit(".", 1)[1]] = st.get_tensor(key).to(device=device, dtype=dtype)
    if "weight" not in found:
        raise BonbenchError(f"PRM {source!r} has no value head ({VALUE_HEAD}.weight) in its safetensors files: "
                            "it is not a Skywork PRM; pass ?family= with its family")
    return found["weight"], found.get("bias")
