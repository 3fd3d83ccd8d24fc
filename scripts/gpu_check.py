"""The Python half of ``scripts/gpu_check.sh``: environment facts, local models, and the figures file.

Subcommands (``python scripts/gpu_check.py CMD ...``):

* ``env FIGURES``: the GPU, driver-side CUDA, torch and library versions, and whether vLLM imports
  (and why not), printed and recorded.
* ``lm DIR --shape tiny|FOLDER``: a causal LM with random weights in Hugging Face's format. ``tiny`` is
  a 2-layer Gemma 3 with a byte-level tokenizer (any text encodes). ``FOLDER`` holds a real model's
  ``config.json`` and tokenizer files (``tokenizer.json`` or ``tokenizer.json.xz``): the same
  architecture and tokenizer, random weights, so times and memory are the real model's while its
  text is noise (it seldom stops before ``--max-tokens``).
* ``rm DIR``: a tiny BERT sequence classifier (labels NEGATIVE / POSITIVE) with the byte-level
  tokenizer, for ``--verifier rm:hf:DIR?label=POSITIVE``.
* ``run-figures FIGURES PREFIX RUN_DIR WALL_S``: a finished ``bonbench run``'s samples, tokens,
  tokens/s of the whole command and metric values.
* ``train-figures FIGURES PREFIX CKPT WALL_S``: a ``bonbench train`` checkpoint's last log row
  (step seconds, tokens, tokens/s, loss, reward, KL) and the command's wall time.
* ``scripted-samples OUT DATA_DIR``: a samples file for MATH's train split in DATA_DIR, four completions
  per problem, two with the gold answer boxed and two with a wrong one, for ``bonbench run --backend
  scripted`` and then ``bonbench train-verifier`` (which needs right and wrong samples; a random-weight
  model gives none right).
* ``json-figures FIGURES PREFIX FILE KEY...``: the values under KEY in the JSON object in FILE (e.g. a
  learned verifier's ``bonbench_verifier.json``: ``metrics``, ``training``).
* ``record FIGURES KEY VALUE``: one figure (a number when it parses as one, else text).
* ``lines FIGURES KEY LOG PATTERN``: the lines of LOG matching the regular expression PATTERN, as a list.

The figures file is one JSON object, rewritten whole (temp file + rename) at every record, so a run
killed at its time limit still leaves every figure recorded before the kill. This module measures
nothing itself and asserts nothing about the figures.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]


def record(figures: Path, key: str, value: Any) -> None:
    """Set ``key`` in the JSON object at ``figures`` (created when missing) and print it."""
    data = json.loads(figures.read_text()) if figures.is_file() else {}
    data[key] = value
    tmp = figures.with_name(figures.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, figures)
    print(f"figure {key} = {value}", flush=True)


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def env_facts(figures: Path) -> None:
    """torch, CUDA, the card, library versions and vLLM's import, recorded under ``env.``."""
    import importlib.metadata as md

    import torch

    record(figures, "env.python", sys.version.split()[0])
    record(figures, "env.torch", torch.__version__)
    record(figures, "env.torch_cuda", torch.version.cuda)
    record(figures, "env.cuda_available", torch.cuda.is_available())
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        record(figures, "env.gpu", torch.cuda.get_device_name(0))
        record(figures, "env.gpu_count", torch.cuda.device_count())
        record(figures, "env.gpu_memory_gib", round(props.total_memory / 2**30, 1))
        record(figures, "env.gpu_capability", f"{props.major}.{props.minor}")
        record(figures, "env.bf16_supported", torch.cuda.is_bf16_supported())
    for dist in ("transformers", "peft", "accelerate", "tokenizers", "safetensors", "numpy", "sympy", "math-verify"):
        try:
            record(figures, f"env.{dist}", md.version(dist))
        except md.PackageNotFoundError:
            record(figures, f"env.{dist}", "not installed")
    try:
        import vllm

        record(figures, "env.vllm", getattr(vllm, "__version__", "unknown version"))
    except Exception as exc:  # noqa: BLE001  (any failure to import means the same here: its CUDA paths cannot run)
        record(figures, "env.vllm", f"not importable: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")


def byte_tokenizer() -> Any:
    """A byte-level BPE tokenizer without merges: one token per UTF-8 byte, so every text encodes."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {t: i for i, t in enumerate(SPECIALS + alphabet)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>",
                                   unk_token="<unk>")


def build_lm(folder: Path, shape: str, seed: int = 0) -> Path:
    """Save a random-weight causal LM to ``folder`` (see the module docstring for ``shape``)."""
    import torch
    from transformers import (
        AutoConfig,
        AutoModelForCausalLM,
        Gemma3ForCausalLM,
        Gemma3TextConfig,
    )

    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    if shape == "tiny":
        tok = byte_tokenizer()
        cfg = Gemma3TextConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                               num_attention_heads=2, num_key_value_heads=1, head_dim=32, sliding_window=16,
                               layer_types=["sliding_attention", "full_attention"], max_position_embeddings=4096,
                               pad_token_id=0, bos_token_id=1, eos_token_id=2)
        Gemma3ForCausalLM(cfg).save_pretrained(folder)
        tok.save_pretrained(folder)
        return folder
    src = Path(shape)
    if not (src / "config.json").is_file():
        raise SystemExit(f"error: --shape {shape}: no config.json there; "
                         "pass tiny or a folder with a model's config and tokenizer")
    cfg = AutoConfig.from_pretrained(src)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    model.save_pretrained(folder)
    for p in src.iterdir():
        if p.name == "config.json" or p.name.endswith(".safetensors"):
            continue
        if p.suffix == ".xz":
            with lzma.open(p) as f_in, open(folder / p.stem, "wb") as f_out:
                shutil.copyfileobj(f_in, f_out)
        elif p.is_file():
            shutil.copy(p, folder / p.name)
    return folder


def build_rm(folder: Path, seed: int = 0) -> Path:
    """Save a tiny random BERT classifier (NEGATIVE / POSITIVE) with the byte-level tokenizer."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    tok = byte_tokenizer()
    torch.manual_seed(seed)
    # num_labels and the label maps go through PretrainedConfig's **kwargs, which the stubs do not list
    config = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=1024, num_labels=2, pad_token_id=0,
                        id2label={0: "NEGATIVE", 1: "POSITIVE"}, label2id={"NEGATIVE": 0, "POSITIVE": 1})
    BertForSequenceClassification(config).eval().save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def run_figures(figures: Path, prefix: str, run_dir: Path, wall_s: float) -> None:
    """Samples, tokens, tokens/s over the command's wall time, and every metric value of one run."""
    rows = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines() if line.strip()]
    tokens = sum(int(r.get("n_tokens") or 0) for r in rows)
    record(figures, f"{prefix}.samples", len(rows))
    record(figures, f"{prefix}.tokens", tokens)
    record(figures, f"{prefix}.wall_s", round(wall_s, 1))
    record(figures, f"{prefix}.tokens_per_wall_s", round(tokens / wall_s, 1) if wall_s > 0 else None)
    metrics = json.loads((run_dir / "metrics.json").read_text())["metrics"]
    for name, m in metrics.items():
        record(figures, f"{prefix}.{name}", m.get("value"))
    record(figures, f"{prefix}.scores", sorted(p.name for p in (run_dir / "scores").glob("*.jsonl")))


TRAIN_KEYS = ("seconds", "sample_s", "tokens", "tokens_per_s", "loss", "reward", "kl_ref", "entropy", "grad_norm",
              "loss_scale")


def train_figures(figures: Path, prefix: str, ckpt: Path, wall_s: float) -> None:
    """The last logged step of a checkpoint (the keys in TRAIN_KEYS that it has) and the wall time."""
    rows = [json.loads(line) for line in (ckpt / "log.jsonl").read_text().splitlines() if line.strip()]
    last = rows[-1]
    record(figures, f"{prefix}.steps", len(rows))
    for key in TRAIN_KEYS:
        if key in last:
            value = last[key]
            record(figures, f"{prefix}.{key}", round(value, 4) if isinstance(value, float) else value)
    record(figures, f"{prefix}.wall_s", round(wall_s, 1))
    record(figures, f"{prefix}.exported", (ckpt / "model.safetensors").is_file())


def scripted_samples(out: Path, data_dir: Path) -> int:
    """Write the rows (problem_id, sample_idx, completion); return how many."""
    from bonbench.run.resolve import load_task

    task = load_task("math", {"split": "train"}, data_dir=str(data_dir), out=out.parent)
    rows = []
    for p in task.problems:
        for i in range(4):
            answer = p.target if i % 2 == 0 else f"{p.target}9"
            text = f"So the answer is $\\boxed{{{answer}}}$." if i % 2 == 0 else \
                f"We compute step by step, {'and then ' * (3 + i)}we get $\\boxed{{{answer}}}$ maybe."
            rows.append({"problem_id": p.id, "sample_idx": i, "completion": text})
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return len(rows)


def json_figures(figures: Path, prefix: str, path: Path, keys: list[str]) -> None:
    doc = json.loads(path.read_text())
    for key in keys:
        record(figures, f"{prefix}.{key}", doc.get(key))


def matching_lines(figures: Path, key: str, log: Path, pattern: str) -> None:
    rx = re.compile(pattern)
    found = [line.strip() for line in log.read_text(errors="replace").splitlines() if rx.search(line)]
    record(figures, key, found)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("env").add_argument("figures", type=Path)
    lm = sub.add_parser("lm")
    lm.add_argument("dir", type=Path)
    lm.add_argument("--shape", default="tiny")
    sub.add_parser("rm").add_argument("dir", type=Path)
    for name in ("run-figures", "train-figures"):
        p = sub.add_parser(name)
        p.add_argument("figures", type=Path)
        p.add_argument("prefix")
        p.add_argument("dir", type=Path)
        p.add_argument("wall_s", type=float)
    scr = sub.add_parser("scripted-samples")
    scr.add_argument("out", type=Path)
    scr.add_argument("data_dir", type=Path)
    jf = sub.add_parser("json-figures")
    jf.add_argument("figures", type=Path)
    jf.add_argument("prefix")
    jf.add_argument("file", type=Path)
    jf.add_argument("keys", nargs="+")
    rec = sub.add_parser("record")
    rec.add_argument("figures", type=Path)
    rec.add_argument("key")
    rec.add_argument("value")
    lines = sub.add_parser("lines")
    lines.add_argument("figures", type=Path)
    lines.add_argument("key")
    lines.add_argument("log", type=Path)
    lines.add_argument("pattern")
    args = ap.parse_args(argv)
    if args.cmd == "env":
        env_facts(args.figures)
    elif args.cmd == "lm":
        print(build_lm(args.dir, args.shape))
    elif args.cmd == "rm":
        print(build_rm(args.dir))
    elif args.cmd == "run-figures":
        run_figures(args.figures, args.prefix, args.dir, args.wall_s)
    elif args.cmd == "train-figures":
        train_figures(args.figures, args.prefix, args.dir, args.wall_s)
    elif args.cmd == "scripted-samples":
        print(f"{scripted_samples(args.out, args.data_dir)} scripted samples in {args.out}")
    elif args.cmd == "json-figures":
        json_figures(args.figures, args.prefix, args.file, args.keys)
    elif args.cmd == "record":
        record(args.figures, args.key, _number(args.value))
    else:
        matching_lines(args.figures, args.key, args.log, args.pattern)
    return 0


if __name__ == "__main__":
    sys.exit(main())
