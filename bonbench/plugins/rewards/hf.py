"""Hugging Face sequence classifiers as reward models (``hf:<folder or hub id>?options``).

Any ``AutoModelForSequenceClassification`` checkpoint: sentiment classifiers such as
``lvwerra/distilbert-imdb`` (read one label's probability) or reward models with one scalar head
such as the Pythia TL;DR reward models (read the logit). Options (see ``HFClassifierOptions``):

- ``label``: which output is the reward, by name (``POSITIVE``) or index (``1``). Required when
  the model has several labels (a wrong guess would silently invert the reward); a one-head model
  reads head 0.
- ``read``: ``prob`` (softmax over the labels; sigmoid for one head), ``logit`` (the raw logit) or
  ``margin`` (log-odds of the label: its logit minus the log-sum-exp of the others; for two labels,
  the logit difference). Default: ``prob`` for several labels, ``logit`` for one head.
- ``input``: ``concat`` (prompt + completion as one text, the default: what TRL's sentiment and
  TL;DR reward scripts feed), ``completion`` (completion alone) or ``pair`` (a tokenizer text pair,
  for cross-encoders).
- ``max_length``, ``batch_size``, ``device`` (``auto``/``cpu``/``cuda``), ``dtype``.

Texts longer than ``max_length`` tokens lose their *beginning* (left truncation; for ``pair`` the
prompt is cut), because the completion being judged is at the end. Texts are tokenized once,
sorted by length and padded per batch, so a batch carries little padding.

It does not download anything by itself beyond what ``from_pretrained`` does for a hub id, and it
does not train or fine-tune.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from bonbench.core.errors import BonbenchError
from bonbench.plugins.rewards.base import check_scores

VERSION = 1
Read = Literal["prob", "logit", "margin"]
InputMode = Literal["concat", "completion", "pair"]
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt",
                    "vocab.json", "merges.txt", "tokenizer.model", "spiece.model")
_BLOCKS, _BLOCK = 16, 1 << 16


@dataclass(frozen=True)
class HFClassifierOptions:
    """How to read a classifier (the ``?key=value`` options of an ``hf:`` spec)."""

    label: str | None = None
    read: Read | None = None
    input: InputMode = "concat"
    max_length: int | None = None
    batch_size: int | None = None
    device: str = "auto"
    dtype: str = "float32"


def classifier_fingerprint(folder: Path) -> str:
    """sha256 over config.json, the tokenizer files, and each weight file's name, size and 16
    sampled 64 KiB blocks.

    Sizes alone would miss a retrained model of the same architecture (same sizes, same
    safetensors header); hashing every byte costs seconds per GB on each load. Retraining changes
    essentially every weight, so the sampled blocks change with it.
    """
    h = hashlib.sha256()
    h.update((folder / "config.json").read_bytes())
    for p in sorted(folder.iterdir()):
        if p.name in _TOKENIZER_FILES:
            h.update(f"\0{p.name}\0".encode() + p.read_bytes())
        elif p.suffix in _WEIGHT_SUFFIXES:
            size = p.stat().st_size
            h.update(f"\0{p.name}\0{size}".encode())
            with open(p, "rb") as f:
                for i in range(_BLOCKS):
                    f.seek(size * i // _BLOCKS)
                    h.update(f.read(_BLOCK))
    return "sha256:" + h.hexdigest()[:16]


def resolve_source(source: str) -> tuple[str, str]:
    """(path for from_pretrained, fingerprint of the weights) for a local folder or a hub id."""
    local = Path(source).expanduser()
    if local.exists():
        if not (local / "config.json").is_file():
            raise BonbenchError(f"reward model folder {source!r} has no config.json: "
                                "save the classifier there with save_pretrained")
        return str(local.resolve()), classifier_fingerprint(local.resolve())
    if source.startswith((".", "/", "~")) or source.count("/") != 1:
        raise BonbenchError(f"reward model {source!r} not found: pass hf:<local folder> or hf:<org>/<name> (a hub id)")
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(source, "config.json")
    if isinstance(cached, str):  # the HF cache stores files under snapshots/<commit>/
        return source, f"hub:{source}@{Path(cached).parent.name}"
    try:
        from huggingface_hub import HfApi

        revision = HfApi().model_info(source, files_metadata=False).sha
    except Exception as exc:  # noqa: BLE001  offline, unknown or gated repo: the same fix
        raise BonbenchError(f"reward model {source!r} is neither a local folder nor reachable on the hub ({type(exc).__name__}); "
                            "download it where the hub is reachable and pass hf:<folder>, or use an offline reward model "
                            "(`bonbench list reward-models`)") from None
    return source, f"hub:{source}@{revision}"


def labels_of(config: Any) -> list[str]:
    """The model's label names in index order (LABEL_i where the config names none)."""
    n = int(getattr(config, "num_labels", 1))
    names = getattr(config, "id2label", None) or {}
    return [str(names.get(i, names.get(str(i), f"LABEL_{i}"))) for i in range(n)]


def pick_label(model_name: str, labels: Sequence[str], label: str | None) -> int:
    """The output index ``label`` names (name, case-insensitive name, or index) or a one-line error."""
    listing = ", ".join(f"{i}={n}" for i, n in enumerate(labels))
    if label is None:
        if len(labels) == 1:
            return 0
        raise BonbenchError(f"reward model {model_name!r} has {len(labels)} labels ({listing}): say which is the reward "
                            f"with ?label=NAME or ?label=INDEX, e.g. hf:{model_name}?label={labels[-1]}")
    if label in labels:
        return labels.index(label)
    folded = [n.lower() for n in labels]
    if label.lower() in folded and folded.count(label.lower()) == 1:
        return folded.index(label.lower())
    if label.lstrip("-").isdigit() and 0 <= int(label) < len(labels):
        return int(label)
    raise BonbenchError(f"reward model {model_name!r} has no label {label!r}; its labels are {listing}: "
                        "pass one of them as ?label=NAME or ?label=INDEX")


def read_logits(logits: Any, index: int, read: Read) -> Any:
    """The reward from a (batch, labels) float tensor of logits."""
    import torch

    if logits.shape[-1] == 1:
        one = logits[:, 0]
        if read == "prob":
            return torch.sigmoid(one)
        return one  # logit and margin coincide for one head: the log-odds of a sigmoid
    if read == "prob":
        return torch.softmax(logits, dim=-1)[:, index]
    if read == "logit":
        return logits[:, index]
    others = torch.cat([logits[:, :index], logits[:, index + 1:]], dim=-1)
    return logits[:, index] - torch.logsumexp(others, dim=-1)


class HFClassifierReward:
    """A sequence classifier as a ``RewardModel`` (module docstring for the options)."""

    version = VERSION

    def __init__(self, source: str, name: str, options: HFClassifierOptions = HFClassifierOptions()) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        if options.read not in (None, "prob", "logit", "margin"):
            raise BonbenchError(f"reward model option read={options.read!r} is not one of prob, logit, margin")
        if options.input not in ("concat", "completion", "pair"):
            raise BonbenchError(f"reward model option input={options.input!r} is not one of concat, completion, pair")
        self.name = name
        path, weights = resolve_source(source)
        device = options.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        elif device.startswith("cuda") and not torch.cuda.is_available():
            raise BonbenchError(f"reward model option device={device} but torch sees no CUDA device: use device=cpu (or auto)")
        dtype = getattr(torch, options.dtype, None)
        if not isinstance(dtype, torch.dtype):
            raise BonbenchError(f"reward model option dtype={options.dtype!r} is not a torch dtype (float32, bfloat16, float16)")
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            self.model = AutoModelForSequenceClassification.from_pretrained(path, dtype=dtype).to(device).eval()
        except (OSError, ValueError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise BonbenchError(f"could not load reward model {source!r} as a sequence classifier ({first}); "
                                "pass a folder saved with AutoModelForSequenceClassification.save_pretrained") from None
        labels = labels_of(self.model.config)
        self.index = pick_label(source, labels, options.label)
        self.read: Read = options.read or ("logit" if len(labels) == 1 else "prob")
        self.input: InputMode = options.input
        self.device = device
        self.batch_size = options.batch_size or (64 if device.startswith("cuda") else 16)
        if self.tokenizer.pad_token is None:  # GPT-style reward models (Pythia) ship no pad token
            self.tokenizer.pad_token = self.tokenizer.eos_token
        if getattr(self.model.config, "pad_token_id", None) is None:
            # decoder classifiers find the last real token through pad_token_id
            self.model.config.pad_token_id = self.tokenizer.pad_token_id
        self.tokenizer.truncation_side = "left"  # keep the completion, drop the start of the prompt
        self.max_length = options.max_length or _max_length(self.tokenizer, self.model.config)
        resolved = {"weights": weights, "label": self.index, "read": self.read, "input": self.input,
                    "max_length": self.max_length, "dtype": options.dtype}
        self.fingerprint = "sha256:" + hashlib.sha256(json.dumps(resolved, sort_keys=True).encode()).hexdigest()[:16]
        self.options = asdict(options)

    def encode(self, prompts: Sequence[str], completions: Sequence[str]) -> dict[str, list[list[int]]]:
        """Token ids (no padding) of every (prompt, completion) pair, as the model will read them."""
        if self.input == "pair":
            enc = self.tokenizer(list(prompts), list(completions), truncation="only_first", max_length=self.max_length)
        else:
            texts = [p + c for p, c in zip(prompts, completions, strict=True)] if self.input == "concat" else list(completions)
            enc = self.tokenizer(texts, truncation=True, max_length=self.max_length)
        return dict(enc)

    def score(self, prompts: Sequence[str], completions: Sequence[str]) -> list[float]:
        return [v for v, _, _ in self.score_counted(prompts, completions)]

    def score_counted(self, prompts: Sequence[str], completions: Sequence[str]) -> list[tuple[float, int | None, int | None]]:
        """(reward, tokens read after truncation, 1 forward) of every pair (``api.reward.CountsCost``)."""
        import torch

        if not completions:
            return []
        enc = self.encode(prompts, completions)
        ids = enc["input_ids"]
        # longest first: a batch that does not fit in memory fails at once, not at the end
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        out = [0.0] * len(ids)
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                batch = order[start:start + self.batch_size]
                feats = self.tokenizer.pad({k: [v[i] for i in batch] for k, v in enc.items()}, return_tensors="pt")
                logits = self.model(**{k: t.to(self.device) for k, t in feats.items()}).logits.float()
                for i, v in zip(batch, read_logits(logits, self.index, self.read).tolist(), strict=True):
                    out[i] = v
        values = check_scores(self, out, len(completions))
        # one forward per pair: each sits in exactly one padded batch
        return [(v, len(x), 1) for v, x in zip(values, ids, strict=True)]


def _max_length(tokenizer: Any, config: Any) -> int:
    """The longest input the model takes: the tokenizer's limit, the position table, 512 if neither."""
    limits = [int(x) for x in (getattr(tokenizer, "model_max_length", None), getattr(config, "max_position_embeddings", None))
              if isinstance(x, int) and 0 < x < 1_000_000]
    return min(limits) if limits else 512
