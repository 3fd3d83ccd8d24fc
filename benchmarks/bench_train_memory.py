"""Peak memory of one LoRA training step on Gemma 3 270M with G = 8 and 128-token completions.

Each configuration runs in a fresh subprocess (peak RSS is per process): load the embedded model
with LoRA adapters, then one optimiser step on a rollout batch of one IMDB prompt with G = 8
completions of exactly 128 tokens (random token ids: the step's memory does not depend on which
tokens they are), with the KL term to the base on or off. Prints the peak resident set size
(``ru_maxrss``) and the goal (<= 6 GB); on a GPU also the peak of torch's CUDA allocator
(``torch.cuda.max_memory_allocated``) over the step, which is what limits the batch there. Sampling is not part
of the step measured here: the hf sampler keeps one KV cache per row and is far below the training peak at this size.

    python benchmarks/bench_train_memory.py [--micro-batch 2 4] [--group 8] [--tokens 128] [--model DIR]

``--model`` trains another base (default: the embedded Gemma 3 270M), e.g. a random-weight model of the
same architecture where the embedded one cannot be installed (``scripts/gpu_check.sh``).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

GOAL_GB = 6.0


def _one(group: int, tokens: int, micro_batch: int, kl: float, data_dir: str | None, model: str | None) -> dict:
    import numpy as np
    import torch

    from bonbench.apps.trainer.config import TrainConfig
    from bonbench.apps.trainer.loop import Trainer
    from bonbench.apps.trainer.setup import prepare_training

    cfg = TrainConfig(task="imdb", objective="passk", name="bench-mem", objective_options={"k": 4}, group=group,
                      prompts_per_step=1, micro_batch=micro_batch, kl_coef=kl, data_dir=data_dir, out="/tmp/bench-mem",
                      **({"model": model} if model else {}))
    trainer = Trainer(prepare_training(cfg))
    problem = trainer.task.problems[0]
    prompt, _ = trainer.policy.encode(trainer.task.render(problem, "base"), "")
    g = torch.Generator().manual_seed(0)
    vocab = trainer.policy.lm.config.vocab_size if hasattr(trainer.policy.lm.config, "vocab_size") else 262144
    pairs = [(prompt, torch.randint(10, vocab - 10, (tokens,), generator=g).tolist()) for _ in range(group)]
    weights = np.linspace(-1, 1, group)
    cuda = trainer.policy.device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    trainer._optimise(pairs, weights, [list(range(group))], cfg.kl_at(0))
    if cuda:
        torch.cuda.synchronize()  # the step's kernels are asynchronous: time them, not their launch
    row = {"group": group, "tokens": tokens, "micro_batch": micro_batch, "kl_coef": kl,
           "step_s": round(time.perf_counter() - t0, 2),
           "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3)}
    if cuda:
        row["cuda_peak_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
        row["device"] = torch.cuda.get_device_name(trainer.policy.device)
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--micro-batch", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--model", default=None, help="base model (default: the embedded Gemma 3 270M)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        mb, kl = args.child.split(",")
        print(json.dumps(_one(args.group, args.tokens, int(mb), float(kl), args.data_dir, args.model)))
        return 0
    rows = []
    for mb in args.micro_batch:
        for kl in (0.0, 0.05):
            cmd = [sys.executable, __file__, "--group", str(args.group), "--tokens", str(args.tokens), "--child", f"{mb},{kl}"]
            if args.data_dir:
                cmd += ["--data-dir", args.data_dir]
            if args.model:
                cmd += ["--model", args.model]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                print(out.stderr[-2000:], file=sys.stderr)
                return 1
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"LoRA training step, {args.model or 'Gemma 3 270M'}, G={args.group}, {args.tokens}-token completions "
          f"(goal: peak RSS <= {GOAL_GB} GB){', on ' + rows[0]['device'] if 'device' in rows[0] else ''}")
    print(f"{'micro-batch':>11} {'KL term':>8} {'peak RSS GB':>12} {'CUDA peak GB':>13} {'step s':>8}  goal")
    for r in rows:
        ok = "met" if r["peak_rss_gb"] <= GOAL_GB else "NOT met"
        cuda_peak = f"{r['cuda_peak_gb']:>13.3f}" if "cuda_peak_gb" in r else f"{'-':>13}"
        print(f"{r['micro_batch']:>11} {r['kl_coef']:>8} {r['peak_rss_gb']:>12.3f} {cuda_peak} {r['step_s']:>8.2f}  {ok}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
