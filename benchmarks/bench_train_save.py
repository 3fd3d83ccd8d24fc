"""What saving the resumable training state costs next to a training step (``bonbench train``'s default
saves after every step unless a save takes over a tenth of the time since the last one).

Trains ``--steps`` steps in-process on the tests' tiny task (tests/trainer_plugin.py: short prompts,
a sample is right when it starts with "a") and after each times ``save_state`` (weights, AdamW,
scheduler, RNG: temp folder, fsync, rename) exactly as the loop calls it. Prints the median step
seconds (steps after the first), the median save seconds, their ratio, and the state's size.

    python benchmarks/bench_train_save.py --tiny                       # the tests' 2-layer random Gemma
    python benchmarks/bench_train_save.py --lora-rank 16               # embedded Gemma 3 270M, LoRA all-linear
    python benchmarks/bench_train_save.py --full-finetune --lr 1e-5    # every weight (a far larger state)

This measures wall-clock on whatever machine runs it; say which when quoting it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", action="store_true", help="the tests' tiny random Gemma instead of Gemma 3 270M")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--prompts-per-step", type=int, default=2)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--lora-rank", type=int, default=16)
    ap.add_argument("--full-finetune", action="store_true")
    ap.add_argument("--lr", type=float, default=1e-4)
    args = ap.parse_args()

    import trainer_plugin  # noqa: F401  (registers tiny_train)

    from bonbench.apps.trainer.config import TrainConfig
    from bonbench.apps.trainer.loop import Trainer
    from bonbench.apps.trainer.setup import prepare_training

    with tempfile.TemporaryDirectory() as tmp:
        model = None
        if args.tiny:
            from test_sampler_hf import build_tiny_model

            model = build_tiny_model(Path(tmp) / "model").path
        cfg = TrainConfig(task="tiny_train", objective="mean", name="bench", model=model, steps=args.steps,
                          prompts_per_step=args.prompts_per_step, group=args.group, max_new_tokens=args.max_new_tokens,
                          lora_rank=args.lora_rank, full_finetune=args.full_finetune, lr=args.lr, warmup=0,
                          out=str(Path(tmp) / "out"))
        trainer = Trainer(prepare_training(cfg))
        trainer.p.ckpt.root.mkdir(parents=True)
        step_s, save_s = [], []
        for step in range(args.steps):
            t = time.perf_counter()
            trainer.step(step)
            step_s.append(time.perf_counter() - t)
            t = time.perf_counter()
            trainer._save(step + 1)
            save_s.append(time.perf_counter() - t)
        size = sum(f.stat().st_size for f in trainer.p.ckpt.state_dir.iterdir())
    later = step_s[1:] or step_s
    out = {"model": "tiny random Gemma" if args.tiny else "gemma-3-270m",
           "trainable": "full" if args.full_finetune else f"LoRA r{args.lora_rank} all-linear",
           "batch": f"P={args.prompts_per_step} G={args.group} {args.max_new_tokens} tokens",
           "step_s_median": round(statistics.median(later), 3), "save_s_median": round(statistics.median(save_s), 4),
           "save_over_step": round(statistics.median(save_s) / statistics.median(later), 4),
           "state_mb": round(size / 2**20, 1), "step_s": [round(x, 3) for x in step_s], "save_s": [round(x, 4) for x in save_s]}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
