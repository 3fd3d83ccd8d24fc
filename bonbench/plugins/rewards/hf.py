"""Hugging Face sequence classifiers as reward models (``hf:<folder or hub id>?options``).

Any ``AutoModelForSequenceClassification`` checkpoint: sentiment classifiers such as
``lvwerra/distilbert-imdb`` (read one label's probability), reward models with one scalar head
such as the Pythia TL;DR reward models or Skywork-Reward-V2 (read the logit), and remote-code
reward models loaded through that class (ArmoRM, with ``trust_remote_code=true``: its ``score``,
which its code also returns as ``logits``). Options (see ``HFClassifierOptions``):

- ``label``: which output is the reward, by name (``POSITIVE``) or index (``1``). Required when
  the model has several labels (a wrong guess would silently invert the reward); a one-head model
  reads head 0, and a model that returns one score per text (no label axis) reads that.
- ``read``: ``prob`` (softmax over the labels; sigmoid for one head), ``logit`` (the raw logit) or
  ``margin`` (log-odds of the label: its logit minus the log-sum-exp of the others; for two labels,
  the logit difference). Default: ``prob`` for several labels, ``logit`` for one head.
- ``input``: ``chat`` (the model's chat template over [user: question, assistant: answer], one
  BOS), ``concat`` (prompt + completion as one text: what TRL's sentiment and TL;DR reward scripts
  feed), ``completion`` (completion alone) or ``pair`` (a tokenizer text pair, for cross-encoders).
  Default: ``chat`` when the tokenizer has a chat template, else ``concat`` (``rewards.chat``).
- ``max_length``, ``batch_size``, ``device`` (``auto``/``cpu``/``cuda``/``mps``), ``dtype`` (``float32``,
  the default, ``bfloat16``, ``float16`` or ``auto``: ``core.torch_device``),
  ``trust_remote_code`` (run the model's own modelling code: ArmoRM).

Texts longer than ``max_length`` tokens lose their *beginning* (left truncation; for ``pair`` the
prompt is cut), because the completion being judged is at the end. Texts are tokenized once,
sorted by length and right-padded per batch, so a batch carries little padding. A decoder
classifier finds its last token through ``pad_token_id`` (the first pad, or the last non-pad
token, by version and model); Llama-3 reward models whose pad is their EOS / end-of-turn token
would read the wrong position, since the chat template ends the answer with that very token. So
each batch is padded with an id that occurs in none of its texts, set as the model's
``pad_token_id`` for that forward: every text is read at its own last token, whatever its batch.

It does not download anything by itself beyond what ``from_pretrained`` does for a hub id, and it
does not train or fine-tune. Reward models whose head is not a sequence classifier's (InternLM2's
reward token and ``get_score``) are refused with a one-line error (``check_head``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from bonbench.core.errors import BonbenchError
from bonbench.core.torch_device import resolve_device
from bonbench.plugins.rewards.base import check_scores
from bonbench.plugins.rewards.chat import InputMode, encode, resolve_input, template_hash

VERSION = 1
Read = Literal["prob", "logit", "margin"]
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt",
                    "vocab.json", "merges.txt", "tokenizer.model", "spiece.model")
_BLOCKS, _BLOCK = 16, 1 << 16


@dataclass(frozen=True)
class HFClassifierOptions:
    """How to read a classifier (the ``?key=value`` options of an ``hf:`` spec)."""

    label: str | None = None
    read: Read | None = None
    input: InputMode | None = None
    max_length: int | None = None
    batch_size: int | None = None
    device: str = "auto"
    dtype: str = "float32"
    trust_remote_code: bool = False


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


def check_head(source: str, config: dict[str, Any], trust_remote_code: bool) -> None:
    """A one-line error for reward models this backend would read wrong (config.json alone).

    InternLM2 reward models append a reward token (``reward_token_id``) to the conversation and read
    its value head through their own ``get_score``; their remote code registers ``AutoModel``, not
    ``AutoModelForSequenceClassification``, so this backend cannot read them. A model whose own code
    is its classifier (ArmoRM) must not load without it: transformers would fall back to the
    built-in class of its ``model_type`` and score with a randomly initialised head.
    """
    archs = [str(a) for a in config.get("architectures") or ()]
    if "AutoModelForSequenceClassification" in (config.get("auto_map") or {}) and not trust_remote_code:
        raise BonbenchError(f"reward model {source!r} scores with its own code ({', '.join(archs) or 'auto_map'}): "
                            "add ?trust_remote_code=true if you trust the model's source")
    if "reward_token_id" in config or any(a.startswith("InternLM2ForRewardModel") for a in archs):
        raise BonbenchError(f"reward model {source!r} ({', '.join(archs) or 'reward token'}) scores through a reward token "
                            "and its own get_score, which hf: and vllm: do not read: score it with its model card's "
                            "code and import the scores, or use a sequence-classifier reward model")


def raw_config(path: str) -> dict[str, Any]:
    """config.json of a folder or hub id as a dict (no remote code runs)."""
    from transformers import PretrainedConfig

    try:
        return dict(PretrainedConfig.get_config_dict(path)[0])
    except (OSError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise BonbenchError(f"could not read the config of reward model {path!r} ({first})") from None


class HFClassifierReward:
    """A sequence classifier as a ``RewardModel`` (module docstring for the options)."""

    version = VERSION

    def __init__(self, source: str, name: str, options: HFClassifierOptions = HFClassifierOptions()) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        if options.read not in (None, "prob", "logit", "margin"):
            raise BonbenchError(f"reward model option read={options.read!r} is not one of prob, logit, margin")
        self.name = name
        path, weights = resolve_source(source)
        check_head(source, raw_config(path), options.trust_remote_code)
        device, dtype_name = resolve_device(options.device, options.dtype, "reward model option")
        dtype = getattr(torch, dtype_name)
        trust = options.trust_remote_code
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust)
            self.input: InputMode = resolve_input(self.tokenizer, options.input, source)
            model, info = AutoModelForSequenceClassification.from_pretrained(
                path, dtype=dtype, trust_remote_code=trust, output_loading_info=True)
        except (OSError, ValueError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            hint = "" if trust else " (a model that runs its own code needs ?trust_remote_code=true)"
            raise BonbenchError(f"could not load reward model {source!r} as a sequence classifier ({first}){hint}; "
                                "pass a folder saved with AutoModelForSequenceClassification.save_pretrained") from None
        # a head initialised at random would score noise, silently (the backbone's own gaps, e.g. buffers, are
        # transformers' business)
        prefix = f"{getattr(model, 'base_model_prefix', '')}."
        missing = sorted(k for k in info.get("missing_keys") or () if prefix == "." or not k.startswith(prefix))
        if missing:
            raise BonbenchError(f"reward model {source!r} has no trained weights for {', '.join(missing[:3])}"
                                f"{' ...' if len(missing) > 3 else ''}: it is not a sequence classifier "
                                "(a base language model?); pass a reward model's folder or hub id")
        self.model = model.to(device).eval()
        labels = labels_of(self.model.config)
        self.index = pick_label(source, labels, options.label)
        self.read: Read = options.read or ("logit" if len(labels) == 1 else "prob")
        self.device = device
        self.batch_size = options.batch_size or (64 if device.startswith("cuda") else 16)
        if self.tokenizer.pad_token is None:  # GPT-style reward models (Pythia) ship no pad token
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.truncation_side = "left"  # keep the completion, drop the start of the prompt
        self.max_length = options.max_length or _max_length(self.tokenizer, self.model.config)
        resolved: dict[str, Any] = {"weights": weights, "label": self.index, "read": self.read, "input": self.input,
                                    "max_length": self.max_length, "dtype": dtype_name}
        if self.input == "chat":  # other modes keep the fingerprint their rows were stored under
            resolved["template"] = template_hash(self.tokenizer)
        self.fingerprint = "sha256:" + hashlib.sha256(json.dumps(resolved, sort_keys=True).encode()).hexdigest()[:16]
        self.options = asdict(options)

    def encode(self, prompts: Sequence[str], completions: Sequence[str]) -> dict[str, list[list[int]]]:
        """Token ids (no padding) of every (prompt, completion) pair, as the model will read them."""
        return encode(self.tokenizer, self.input, prompts, completions, self.max_length)

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
                feats = self.padded({k: [v[i] for i in batch] for k, v in enc.items()})
                result = self.model(**{k: t.to(self.device) for k, t in feats.items()})
                head = result.logits if getattr(result, "logits", None) is not None else result.score
                head = head.float()
                if head.dim() == 1:  # one score per text (ArmoRM's gated score): no label axis
                    head = head[:, None]
                for i, v in zip(batch, read_logits(head, self.index, self.read).tolist(), strict=True):
                    out[i] = v
        values = check_scores(self, out, len(completions))
        # one forward per pair: each sits in exactly one padded batch
        return [(v, len(x), 1) for v, x in zip(values, ids, strict=True)]

    def padded(self, rows: dict[str, list[list[int]]]) -> dict[str, Any]:
        """Right-padded tensors of one batch, padded with an id none of its texts holds (module docstring)."""
        import torch

        used = {t for row in rows["input_ids"] for t in row}
        pad = self.tokenizer.pad_token_id
        if pad is None or pad in used:
            pad = next(i for i in range(len(self.tokenizer)) if i not in used)
        for config in {id(c): c for c in (self.model.config, self.model.config.get_text_config())}.values():
            config.pad_token_id = pad
        width = max(len(r) for r in rows["input_ids"])
        return {k: torch.tensor([r + [pad if k == "input_ids" else 0] * (width - len(r)) for r in v])
                for k, v in rows.items()}


def _max_length(tokenizer: Any, config: Any) -> int:
    """The longest input the model takes: the tokenizer's limit, the position table, 512 if neither."""
    limits = [int(x) for x in (getattr(tokenizer, "model_max_length", None), getattr(config, "max_position_embeddings", None))
              if isinstance(x, int) and 0 < x < 1_000_000]
    return min(limits) if limits else 512
