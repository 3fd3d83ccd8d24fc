"""Learned-verifier throughput: scoring samples/s against a plain transformers forward loop, and training speed.

Scoring compares, on the same model, dtype, texts and batch size:

* ``bonbench``  ``VerifierModel.score_texts``: the backbone without its LM head, texts batched by length;
* ``plain``     a plain loop: ``AutoModel`` (the same backbone) over the texts in arrival order, batches
                padded by the tokenizer, the same feature and head;
* ``plain-lm``  the loop most code writes: ``AutoModelForCausalLM`` with ``output_hidden_states=True``
                (the LM head's logits are computed and thrown away).

The ratio that counts is bonbench / plain (same forward, so the difference is batching). Rounds
alternate between the methods (the machine is shared) and the median round is reported.
Training throughput is the head method's cost: feature extraction samples/s (one forward per
sample, the same code as scoring without the head) and the logistic fit time on those features;
with ``--lora-steps`` also LoRA fine-tuning samples/s (forward + backward).

Texts are real: MATH-500 problems with completions from a run directory (``--run``), or with
their reference solutions when no run is given. Not a test; run by hand, e.g.
    python benchmarks/bench_verifier.py --n 256 --batch-size 16 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from bonbench.core.models import resolve_model
from bonbench.core.store import RunStore
from bonbench.plugins.verifiers.manifest import verifier_text
from bonbench.plugins.verifiers.model import VerifierModel
from bonbench.run.resolve import load_task


def texts_for(run: Path | None, n: int, data_dir: str | None) -> list[str]:
    if run is not None:
        store = RunStore(run)
        cfg = store.read_config()["config"]
        task = load_task(cfg["task"], cfg.get("task_args", {}), data_dir=data_dir, out=store.results_root)
        problems = {p.id: p for p in task.problems}
        samples = store.samples.read()
        keys = sorted(samples)[:n]
        return [verifier_text(problems[k[0]], samples[k].completion) for k in keys]
    task = load_task("math500", {}, data_dir=data_dir, out=Path("results"))
    return [verifier_text(p, str(p.meta.get("solution") or p.target)) for p in task.problems[:n]]


def plain_loop(model_cls: type, path: str, texts: list[str], batch_size: int, max_length: int, dtype: torch.dtype,
               head: torch.nn.Module, device: torch.device) -> list[float]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    tok.truncation_side, tok.padding_side = "left", "right"
    model = model_cls.from_pretrained(path, dtype=dtype).to(device).eval()  # the device bonbench's side runs on
    out: list[float] = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            enc = tok(texts[start:start + batch_size], padding=True, truncation=True, max_length=max_length,
                      return_tensors="pt").to(device)
            res = model(**enc, output_hidden_states=True)
            hidden = res.hidden_states[-1].float() if hasattr(res, "logits") else res.last_hidden_state.float()
            m = enc["attention_mask"].unsqueeze(-1).float()
            last = hidden[torch.arange(hidden.shape[0], device=device), enc["attention_mask"].sum(1) - 1]
            feats = torch.cat([last, (hidden * m).sum(1) / m.sum(1)], -1)
            out += torch.sigmoid(head(feats)).double().cpu().tolist()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="backbone (default: the embedded Gemma 3 270M)")
    ap.add_argument("--run", type=Path, help="a run directory whose samples to score (default: MATH-500 solutions)")
    ap.add_argument("--n", type=int, default=256, help="texts per round")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-length", type=int, default=512)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-plain-lm", action="store_true", help="skip the AutoModelForCausalLM loop (slowest)")
    ap.add_argument("--lora-steps", type=int, default=0, help="also time this many LoRA training steps")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--json", type=Path, help="write the figures here too")
    args = ap.parse_args()

    from transformers import AutoModel, AutoModelForCausalLM

    resolved = resolve_model(args.model)
    texts = texts_for(args.run, args.n, args.data_dir)
    vm = VerifierModel(resolved, dtype=args.dtype, max_length=args.max_length)
    torch.manual_seed(0)
    torch.nn.init.normal_(vm.head.linear.weight, std=0.02)  # any head: only its cost matters here
    dtype = getattr(torch, args.dtype)
    n_tokens = sum(len(x) for x in vm.encode(texts))
    times: dict[str, list[float]] = {"bonbench": [], "plain": [], "plain-lm": []}
    ref: list[float] | None = None
    for _ in range(args.rounds):
        t = time.perf_counter()
        ours = vm.score_texts(texts, args.batch_size)
        times["bonbench"].append(time.perf_counter() - t)
        t = time.perf_counter()
        plain = plain_loop(AutoModel, resolved.path, texts, args.batch_size, args.max_length, dtype, vm.head, vm.device)
        times["plain"].append(time.perf_counter() - t)
        ref = plain
        if not args.no_plain_lm:
            t = time.perf_counter()
            plain_loop(AutoModelForCausalLM, resolved.path, texts, args.batch_size, args.max_length, dtype, vm.head, vm.device)
            times["plain-lm"].append(time.perf_counter() - t)
    assert ref is not None
    agree = float(np.max(np.abs(np.array(ours) - np.array(ref))))
    rate = {k: len(texts) / statistics.median(v) for k, v in times.items() if v}
    where = torch.cuda.get_device_name(vm.device) if vm.device.type == "cuda" else f"{torch.get_num_threads()} threads"
    print(f"{len(texts)} texts, {n_tokens / len(texts):.0f} tokens each on average, batch {args.batch_size}, {args.dtype}, "
          f"{where}, {args.rounds} rounds (median)")
    for k, r in rate.items():
        print(f"scoring {k:<9} {r:8.2f} samples/s")
    print(f"ratio bonbench / plain    {rate['bonbench'] / rate['plain']:.2f}x")
    if "plain-lm" in rate:
        print(f"ratio bonbench / plain-lm {rate['bonbench'] / rate['plain-lm']:.2f}x")
    print(f"max |score difference| bonbench vs plain: {agree:.2e} (padding and batch composition differ in bf16)")

    # training: the head method costs one forward per sample (features) plus a logistic fit
    from bonbench.apps.verifier_training.fit import fit_head

    t = time.perf_counter()
    feats = vm.features(texts, args.batch_size)
    feat_s = time.perf_counter() - t
    rng = np.random.default_rng(0)
    labels = (rng.random(len(texts)) < 0.3).astype(int)
    groups = [str(i // 4) for i in range(len(texts))]
    t = time.perf_counter()
    fit_head(vm.head, feats, labels, groups, folds=5, seed=0)
    fit_s = time.perf_counter() - t
    result = {"n": len(texts), "batch_size": args.batch_size, "dtype": args.dtype, "mean_tokens": n_tokens / len(texts),
              "scoring_samples_per_s": rate, "ratio_vs_plain": rate["bonbench"] / rate["plain"],
              "train_feature_samples_per_s": len(texts) / feat_s, "train_head_fit_s": fit_s}
    print(f"training (head): features {len(texts) / feat_s:.2f} samples/s, logistic fit {fit_s:.2f} s")
    if args.lora_steps:
        lora = VerifierModel(resolved, method="lora", dtype=args.dtype, max_length=args.max_length)
        params = [p for p in lora.backbone.parameters() if p.requires_grad] + list(lora.head.parameters())
        opt = torch.optim.AdamW(params, lr=1e-4)
        ids = lora.encode(texts)
        mb = 8
        lora.backbone.train()
        t = time.perf_counter()
        for step in range(args.lora_steps):
            rows = [(step * mb + i) % len(ids) for i in range(mb)]
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                lora.head(lora.features_of_batch([ids[r] for r in rows])),
                torch.tensor(labels[rows], dtype=torch.float32, device=lora.device))
            opt.zero_grad()
            loss.backward()
            opt.step()
        if lora.device.type == "cuda":
            torch.cuda.synchronize()  # the last step's kernels are asynchronous
        lora_rate = args.lora_steps * mb / (time.perf_counter() - t)
        result["train_lora_samples_per_s"] = lora_rate
        print(f"training (lora): {lora_rate:.2f} samples/s (micro-batch {mb}, forward + backward)")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
