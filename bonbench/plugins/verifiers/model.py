"""The model of a learned verifier: a causal LM backbone and a scalar head, P(correct | problem, completion).

The verifier reads ``verifier_text(problem, completion)`` (the problem, then the completion; no
few-shot exemplars, which would cost a forward over ~700 prompt tokens per sample and say nothing
about the sample), keeps its last ``max_length`` tokens (the final answer sits at the end), and
runs the backbone without its LM head (the vocabulary projection is most of a small model's
compute: Gemma 3 has a 262k vocabulary). The feature of a sample is the final hidden state of
its last token next to the mean of its hidden states; the head is a linear layer on the
standardised feature; the score is its sigmoid, the probability that the sample is correct.
Texts are batched by length, so little compute goes to padding.

The folder layout is ``bonbench.plugins.verifiers.folder``, its file names and manifest reader ``manifest``; training is
``bonbench.apps.verifier_training``. This module imports torch and transformers (and peft for LoRA).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError

from bonbench.core.errors import BonbenchError
from bonbench.core.models import EMBEDDED_MODEL, ResolvedModel, resolve_model
from bonbench.plugins.verifiers.manifest import ADAPTER_DIR, DEFAULT_MAX_LENGTH, HEAD_FILE, read_verifier_manifest, weights_sha256

Progress = Callable[[int], None]


class VerifierModel:
    """Backbone (transformers, no LM head; LoRA adapters when the method is ``lora``) + scalar head."""

    def __init__(self, base: ResolvedModel, *, method: str = "head", dtype: str = "bfloat16",
                 max_length: int = DEFAULT_MAX_LENGTH, lora: Mapping[str, Any] | None = None,
                 adapter: Path | None = None, device: str | None = None) -> None:
        from transformers import AutoModel, AutoTokenizer

        if method not in ("head", "lora"):
            raise BonbenchError(f"unknown verifier method {method!r}; use head (frozen backbone) or lora")
        self.base, self.method, self.max_length = base, method, int(max_length)
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.dtype = getattr(torch, dtype)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(base.path, revision=base.revision)
            # AutoModel on a causal-LM folder gives the decoder without its LM head
            backbone = AutoModel.from_pretrained(base.path, revision=base.revision, dtype=self.dtype)
        except (OSError, ValueError, SafetensorError) as exc:
            # a truncated or damaged model.safetensors is a SafetensorError ("incomplete metadata, file not fully covered")
            reason = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
            fix = ("its weights are damaged or cut short: copy or download the model again"
                   if isinstance(exc, SafetensorError) else "check --model names a model folder or hub id")
            raise BonbenchError(f"cannot load verifier base model {base.name!r} from {base.path} ({reason}); {fix}") from None
        # keep the end of long texts: the answer is there
        self.tokenizer.truncation_side = "left"
        self.tokenizer.padding_side = "right"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        backbone.requires_grad_(False)
        if method == "lora":
            from peft import LoraConfig, PeftModel, get_peft_model

            if adapter is not None:
                backbone = PeftModel.from_pretrained(backbone, str(adapter), is_trainable=False)
            else:
                opts = dict(lora or {})
                backbone = get_peft_model(backbone, LoraConfig(r=int(opts.get("rank", 8)),
                                                               lora_alpha=int(opts.get("alpha", 16)), lora_dropout=0.0,
                                                               target_modules=opts.get("targets", "all-linear")))
        self.backbone = backbone.to(self.device).eval()
        self.hidden = int(self.backbone.config.hidden_size)
        self.head = ScalarHead(2 * self.hidden).to(self.device)

    # ---------------------------------------------------------------- features

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        return [ids for ids in self.tokenizer(list(texts), truncation=True, max_length=self.max_length)["input_ids"]]

    def _batch(self, ids: Sequence[Sequence[int]]) -> tuple[Any, Any]:
        width = max(len(x) for x in ids)
        pad = int(self.tokenizer.pad_token_id)
        tok = torch.full((len(ids), width), pad, dtype=torch.long)
        mask = torch.zeros((len(ids), width), dtype=torch.long)
        for r, x in enumerate(ids):
            tok[r, :len(x)] = torch.tensor(x, dtype=torch.long)
            mask[r, :len(x)] = 1
        return tok.to(self.device), mask.to(self.device)

    def features_of_batch(self, ids: Sequence[Sequence[int]]) -> Any:
        """[B, 2H] float32 features (last token's hidden state, mean hidden state) of one padded batch;
        differentiable when the backbone has trainable adapters and grad is enabled."""
        tok, mask = self._batch(ids)
        with torch.autocast(device_type=self.device.type, dtype=self.dtype, enabled=self.dtype != torch.float32):
            hidden = self.backbone(input_ids=tok, attention_mask=mask).last_hidden_state
        hidden = hidden.float()
        m = mask.unsqueeze(-1).float()
        last = hidden[torch.arange(hidden.shape[0], device=hidden.device), mask.sum(1) - 1]
        mean = (hidden * m).sum(1) / m.sum(1)
        return torch.cat([last, mean], dim=-1)

    def features(self, texts: Sequence[str], batch_size: int = 16, progress: Progress | None = None) -> Any:
        """Features of every text, in input order. Texts are batched by length (little padding), which
        is where this beats a plain forward loop over the same batches in arrival order."""
        return self.features_of_ids(self.encode(texts), batch_size, progress)

    def features_of_ids(self, ids: Sequence[Sequence[int]], batch_size: int = 16, progress: Progress | None = None) -> Any:
        """``features`` of texts already encoded (``encode``)."""
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = torch.empty((len(ids), 2 * self.hidden), dtype=torch.float32)
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                rows = order[start:start + batch_size]
                out[rows] = self.features_of_batch([ids[i] for i in rows]).cpu()
                if progress is not None:
                    progress(len(rows))
        return out

    def score_texts(self, texts: Sequence[str], batch_size: int = 16, progress: Progress | None = None) -> list[float]:
        """P(correct) of every text."""
        return self.score_features(self.features(texts, batch_size, progress))

    def score_ids(self, ids: Sequence[Sequence[int]], batch_size: int = 16) -> list[float]:
        """P(correct) of every encoded text (``encode``): the caller keeps the token counts."""
        return self.score_features(self.features_of_ids(ids, batch_size))

    def score_features(self, feats: Any) -> list[float]:
        """P(correct) from features (host or device tensor; the head runs where the model is)."""
        with torch.inference_mode():
            return torch.sigmoid(self.head(feats.to(self.device))).cpu().double().tolist()

    # ---------------------------------------------------------------- files

    def save(self, folder: Path) -> None:
        """Write the head (and adapters) into ``folder``; the manifest is the caller's, written last."""
        from safetensors.torch import save_file

        folder.mkdir(parents=True, exist_ok=True)
        save_file({k: v.detach().cpu().contiguous() for k, v in self.head.state_dict().items()}, str(folder / HEAD_FILE))
        if self.method == "lora":
            self.backbone.save_pretrained(str(folder / ADAPTER_DIR))

    def load_head(self, folder: Path) -> None:
        from safetensors.torch import load_file

        try:
            state = load_file(str(folder / HEAD_FILE))
        except (OSError, SafetensorError) as exc:
            raise BonbenchError(f"cannot read {folder / HEAD_FILE} ({str(exc).splitlines()[0]}); copy the verifier folder "
                                "again or retrain it") from None
        try:
            self.head.load_state_dict(state)
        except RuntimeError as exc:
            raise BonbenchError(f"{folder / HEAD_FILE} does not fit base model {self.base.name!r} ({exc}".splitlines()[0]
                                + "); retrain the verifier on this base") from None
        self.head.to(self.device)


class ScalarHead(torch.nn.Module):
    """logit = w . (x - mu) / sigma + b; mu and sigma are set from the training features."""

    mu: torch.Tensor  # buffers (register_buffer below)
    sigma: torch.Tensor

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.register_buffer("mu", torch.zeros(dim))
        self.register_buffer("sigma", torch.ones(dim))
        self.linear = torch.nn.Linear(dim, 1)
        torch.nn.init.zeros_(self.linear.weight)
        torch.nn.init.zeros_(self.linear.bias)

    def standardise_from(self, feats: Any) -> tuple[Any, Any]:
        """Set mu and sigma from ``feats``; return them on the features' device (the head may be on the GPU
        while the features are on the host, where scikit-learn fits)."""
        mu, sigma = feats.mean(0), feats.std(0).clamp_min(1e-6)
        with torch.no_grad():
            self.mu.copy_(mu)
            self.sigma.copy_(sigma)
        return mu, sigma

    def forward(self, feats: Any) -> Any:
        return self.linear((feats - self.mu) / self.sigma).squeeze(-1)


def load_verifier_model(folder: Path, manifest: Mapping[str, Any] | None = None, device: str | None = None) -> VerifierModel:
    """The trained model of a verifier folder; the base model must be the one it was trained on."""
    folder = Path(folder)
    doc = dict(manifest or read_verifier_manifest(folder))
    # the embedded model by its name (its cache folder differs per machine), anything else by its path
    base = resolve_model(doc["base"]["name"] if doc["base"]["name"] == EMBEDDED_MODEL else doc["base"]["path"])
    if base.fingerprint != doc["base"]["fingerprint"]:
        raise BonbenchError(f"verifier {folder.name!r} was trained on base model {doc['base']['name']!r} with fingerprint "
                            f"{doc['base']['fingerprint']}, which is now {base.fingerprint}; "
                            "retrain it with `bonbench train-verifier`")
    if weights_sha256(folder) != doc["weights_sha256"]:
        raise BonbenchError(f"the weights in {folder} do not match its manifest (edited or half-copied); copy the folder "
                            "again or retrain it")
    hyper = doc.get("hyper", {})
    model = VerifierModel(base, method=doc["method"], dtype=hyper.get("dtype", "bfloat16"),
                          max_length=int(hyper.get("max_length", DEFAULT_MAX_LENGTH)),
                          adapter=folder / ADAPTER_DIR if doc["method"] == "lora" else None, device=device)
    model.load_head(folder)
    return model


