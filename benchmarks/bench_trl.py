"""Rollout + update throughput and peak memory: ``bonbench train`` against TRL's RLOOTrainer.

Both train the same thing, step for step: the embedded Gemma 3 270M (``resolve_model(None)``) with
LoRA adapters (same rank, alpha, targets ``all-linear``, no dropout), float32 master weights with
bf16 autocast, on the CPU; the same IMDB train prompts in the same order (bonbench's
``prompt_batch`` for each step, handed to TRL as an unshuffled dataset), G samples each at T = 1
with ``max_new_tokens`` new tokens; the same reward (bonbench's ``imdb-sentiment`` model on prompt
+ completion); the same objective, the mean-reward policy gradient with the leave-one-out (RLOO)
baseline: bonbench ``--objective mean`` (w_i = (r_i - mean_{j!=i} r_j) / G, loss -(1/P) sum w_i
log pi(y_i)), TRL ``RLOOTrainer`` with ``beta=0`` (no KL), ``num_iterations=1``, no advantage
normalisation (loss -mean_i A_i log pi(y_i), A_i = r_i - mean_{j!=i} r_j: the same gradient);
AdamW at the same lr, linear warm-up then constant, gradient clipping 1.0; micro-batches of
``--micro-batch`` sequences accumulated into one optimiser step per rollout batch. RLOOTrainer
rather than GRPOTrainer because its advantage is the leave-one-out one by construction (GRPO's is
r - mean including the sample itself, a rescaled RLOO only after ``scale_rewards="none"``).

What differs (inherent to the two trainers, not settings):
* TRL's RLOO always runs one extra no-grad forward over the rollout batch for the "old"
  log-probabilities of its (here inactive) ratio clip; bonbench takes them from the gradient pass.
* Generation: TRL calls ``model.generate`` on the left-padded batch of all P*G prompts; bonbench's
  hf sampler (``bonbench.plugins.samplers.hf``) on the live weights, with per-(step, problem, sample) seeds.
* bonbench re-tokenises each completion's text after the rendered prompt (the KL-scoring
  convention); TRL trains on the generated ids. Tokens are counted here the same way for both:
  the completion text re-tokenised without special tokens.
* bonbench computes the per-token entropy for its log (no gradient); TRL computes it too.
* bonbench's per-step KL-to-base log is switched off (``log_kl=False``): TRL with beta = 0 has none.

Each trainer runs in its own subprocess (peak RSS = ``ru_maxrss`` of that process, model load
included), in alternating order over ``--rounds`` rounds, so machine drift does not favour one.
Throughput = completion tokens of the measured steps / their wall time, after ``--warmup`` steps.
bonbench's step splits into sampling and update (its log's ``sample_s``); TRL's into generation +
scoring (``_generate_and_score_completions``) and the rest.

    python benchmarks/bench_trl.py [--trl-path /work/trl-site] [--steps 3] [--rounds 2]
        [--group 8] [--prompts-per-step 4] [--max-new-tokens 24] [--micro-batch 2]

TRL is needed only here: ``pip install trl`` (or ``pip install --no-deps --target DIR trl`` and
``--trl-path DIR``; TRL 1.16.0 was used with transformers 5.19).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Setup:
    """What both trainers share."""

    group: int = 8
    prompts_per_step: int = 4
    max_new_tokens: int = 24
    micro_batch: int = 2
    lr: float = 5e-4
    warmup_steps: int = 3
    lora_rank: int = 16
    lora_alpha: int = 32
    seed: int = 0
    steps: int = 3  # measured steps
    warmup: int = 1  # unmeasured steps first
    data_dir: str | None = None


def peak_rss_gb() -> float:
    """High-water resident set of this process (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _prompts(setup: Setup) -> tuple[Any, list[Any]]:
    """bonbench's IMDB train task and the prompts of every step, in bonbench's order."""
    from bonbench.apps.trainer.config import TrainConfig
    from bonbench.apps.trainer.setup import load_train_task
    from bonbench.apps.trainer.step import prompt_batch

    cfg = TrainConfig(task="imdb", objective="mean", name="bench-trl", data_dir=setup.data_dir)
    task = load_train_task(cfg)
    steps = setup.warmup + setup.steps
    return task, [p for s in range(steps) for p in prompt_batch(task.problems, s, setup.prompts_per_step, setup.seed)]


def _count_tokens(tokenizer: Any, completions: list[str]) -> int:
    return sum(len(tokenizer(c, add_special_tokens=False)["input_ids"]) for c in completions)


def run_bonbench(setup: Setup) -> dict[str, Any]:
    """``bonbench train --objective mean`` driven step by step (the CLI's loop without saving)."""
    from bonbench.apps.trainer.config import TrainConfig
    from bonbench.apps.trainer.loop import Trainer
    from bonbench.apps.trainer.setup import prepare_training

    out = tempfile.mkdtemp(prefix="bench-trl-bonbench-")
    cfg = TrainConfig(task="imdb", objective="mean", name="bench", steps=setup.warmup + setup.steps,
                      prompts_per_step=setup.prompts_per_step, group=setup.group, max_new_tokens=setup.max_new_tokens,
                      lr=setup.lr, warmup=setup.warmup_steps, lora_rank=setup.lora_rank, lora_alpha=setup.lora_alpha,
                      lora_targets="all-linear", micro_batch=setup.micro_batch, dtype="bfloat16", log_kl=False,
                      seed=setup.seed, data_dir=setup.data_dir, out=out)
    trainer = Trainer(prepare_training(cfg))
    trainer.p.ckpt.check_or_write_config(cfg)
    rss_loaded = peak_rss_gb()
    tok = trainer.policy.tokenizer
    rows, times, sample_s, tokens = [], [], [], []
    for step in range(cfg.steps):
        t0 = time.perf_counter()
        row = trainer.step(step)
        times.append(time.perf_counter() - t0)
        done = [r["completion"] for r in trainer.p.ckpt.read_rows(trainer.p.ckpt.rollouts_path) if r["step"] == step]
        tokens.append(_count_tokens(tok, done))
        sample_s.append(float(row["sample_s"]))
        rows.append({"reward": row["reward"], "grad_norm": row["grad_norm"]})
    return _summary("bonbench", setup, times, tokens, sample_s, rss_loaded, rows)


def run_trl(setup: Setup) -> dict[str, Any]:
    """TRL's RLOOTrainer on the same model, prompts, reward and objective (module docstring)."""
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

    from bonbench.core.models import resolve_model
    from bonbench.plugins.rewards.imdb import build as build_reward

    try:
        from trl import RLOOConfig, RLOOTrainer
    except ImportError as exc:
        raise SystemExit(f"error: TRL is not importable ({exc}); pip install trl, or give --trl-path DIR") from exc

    torch.manual_seed(setup.seed)
    task, problems = _prompts(setup)
    model_path = resolve_model(None).path
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    rm = build_reward(setup.data_dir)
    rss_loaded = peak_rss_gb()

    def sentiment(prompts: list[str], completions: list[str], **_: Any) -> list[float]:
        return [float(x) for x in rm.score(prompts, completions)]

    dataset = Dataset.from_dict({"prompt": [task.render(p, "base").text for p in problems]})
    n_rollouts = setup.group * setup.prompts_per_step
    accum = n_rollouts // setup.micro_batch
    args = RLOOConfig(
        output_dir=tempfile.mkdtemp(prefix="bench-trl-trl-"), use_cpu=True, bf16=True, seed=setup.seed,
        per_device_train_batch_size=setup.micro_batch, gradient_accumulation_steps=accum,
        num_generations=setup.group, max_completion_length=setup.max_new_tokens, temperature=1.0, top_p=1.0, top_k=0,
        beta=0.0, num_iterations=1, normalize_advantages=False, shuffle_dataset=False,
        learning_rate=setup.lr, lr_scheduler_type="constant_with_warmup", warmup_steps=setup.warmup_steps,
        weight_decay=0.0, max_grad_norm=1.0, optim="adamw_torch", gradient_checkpointing=False, disable_dropout=True,
        max_steps=setup.warmup + setup.steps, logging_steps=1, report_to="none", save_strategy="no",
        dataloader_num_workers=0, log_completions=False)
    lora = LoraConfig(r=setup.lora_rank, lora_alpha=setup.lora_alpha, lora_dropout=0.0, target_modules="all-linear",
                      task_type="CAUSAL_LM")
    times: list[float] = []
    gen_s: list[float] = []
    tokens: list[int] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, *a: Any, **k: Any) -> None:
            self.t0 = time.perf_counter()
            gen_s.append(0.0)

        def on_step_end(self, *a: Any, **k: Any) -> None:
            times.append(time.perf_counter() - self.t0)

    trainer = RLOOTrainer(model=model, reward_funcs=sentiment, args=args, train_dataset=dataset,
                          processing_class=tokenizer, peft_config=lora, callbacks=[Clock()])
    generate = trainer._generate_and_score_completions

    def timed(*a: Any, **k: Any) -> Any:  # one call per optimiser step (steps_per_generation = accumulation)
        t0 = time.perf_counter()
        out = generate(*a, **k)
        gen_s[-1] += time.perf_counter() - t0
        mask = out["completion_mask"]
        ids = out["completion_ids"]
        texts = tokenizer.batch_decode([i[m.bool()] for i, m in zip(ids, mask, strict=True)], skip_special_tokens=True)
        tokens.append(_count_tokens(tokenizer, texts))
        return out

    trainer._generate_and_score_completions = timed
    trainer.train()
    rewards = [{"reward": h.get("reward"), "grad_norm": h.get("grad_norm")} for h in trainer.state.log_history if "reward" in h]
    return _summary("trl", setup, times, tokens, gen_s, rss_loaded, rewards)


def _summary(name: str, setup: Setup, times: list[float], tokens: list[int], sample_s: list[float], rss_loaded: float,
             rows: list[dict[str, Any]]) -> dict[str, Any]:
    w = setup.warmup
    if len(times) != setup.warmup + setup.steps or len(tokens) != len(times):
        raise SystemExit(f"error: {name} ran {len(times)} steps with {len(tokens)} token counts, expected "
                         f"{setup.warmup + setup.steps}; the trainer's step accounting changed")
    secs, toks, samp = sum(times[w:]), sum(tokens[w:]), sum(sample_s[w:])
    return {"trainer": name, "tokens": toks, "seconds": secs, "tokens_per_s": toks / secs,
            "sample_s": samp, "update_s": secs - samp, "step_s": times, "step_tokens": tokens,
            "peak_rss_gb": peak_rss_gb(), "rss_after_load_gb": rss_loaded, "log": rows}


RUNNERS: dict[str, Callable[[Setup], dict[str, Any]]] = {"bonbench": run_bonbench, "trl": run_trl}


def _child(name: str, setup: Setup, trl_path: str | None) -> dict[str, Any]:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--setup", json.dumps(asdict(setup))]
    if trl_path:
        cmd += ["--trl-path", trl_path]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stderr[-4000:])
        raise SystemExit(f"error: the {name} run failed (exit {out.returncode}); its stderr is above")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trl-path", help="a folder holding trl (pip install --no-deps --target DIR trl); default: import trl")
    ap.add_argument("--steps", type=int, default=3, help="measured steps per run")
    ap.add_argument("--warmup", type=int, default=1, help="unmeasured steps first")
    ap.add_argument("--rounds", type=int, default=2, help="runs per trainer, order alternating")
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--prompts-per-step", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=24)
    ap.add_argument("--micro-batch", type=int, default=2)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--json", help="write every run's numbers here")
    ap.add_argument("--child", choices=sorted(RUNNERS), help=argparse.SUPPRESS)
    ap.add_argument("--setup", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.trl_path:
        if not os.path.isdir(args.trl_path):
            print(f"error: --trl-path {args.trl_path} is not a folder; pip install --no-deps --target {args.trl_path} trl",
                  file=sys.stderr)
            return 1
        sys.path.insert(0, args.trl_path)
    if args.child:
        print(json.dumps(RUNNERS[args.child](Setup(**json.loads(args.setup)))))
        return 0
    if (args.group * args.prompts_per_step) % args.micro_batch:
        print("error: --micro-batch must divide group x prompts-per-step (TRL accumulates whole micro-batches)", file=sys.stderr)
        return 1
    try:
        import importlib.util

        if importlib.util.find_spec("trl") is None:
            raise ImportError
    except ImportError:
        print("error: trl is not installed; pip install trl (or --trl-path DIR)", file=sys.stderr)
        return 1
    setup = Setup(group=args.group, prompts_per_step=args.prompts_per_step, max_new_tokens=args.max_new_tokens,
                  micro_batch=args.micro_batch, lr=args.lr, steps=args.steps, warmup=args.warmup, data_dir=args.data_dir)
    runs: list[dict[str, Any]] = []
    for r in range(args.rounds):
        for name in (["bonbench", "trl"] if r % 2 == 0 else ["trl", "bonbench"]):
            res = _child(name, setup, args.trl_path)
            res["round"] = r
            runs.append(res)
            print(f"round {r} {name:8s} {res['tokens_per_s']:7.2f} tok/s  ({res['tokens']} tokens in {res['seconds']:.1f} s; "
                  f"sampling {res['sample_s']:.1f} s, update {res['update_s']:.1f} s)  peak RSS {res['peak_rss_gb']:.2f} GB",
                  flush=True)
    by = {n: [x for x in runs if x["trainer"] == n] for n in RUNNERS}
    tps = {n: sum(x["tokens"] for x in v) / sum(x["seconds"] for x in v) for n, v in by.items()}
    peak = {n: max(x["peak_rss_gb"] for x in v) for n, v in by.items()}
    print(f"\nGemma 3 270M, LoRA r={setup.lora_rank}, IMDB, mean PG (RLOO), P={setup.prompts_per_step} x G={setup.group} x "
          f"{setup.max_new_tokens} tokens, micro-batch {setup.micro_batch}, {args.rounds} rounds x {setup.steps} steps "
          f"after {setup.warmup} warm-up")
    print(f"{'trainer':10s} {'tok/s':>8s} {'sampling s':>11s} {'update s':>9s} {'peak RSS GB':>12s}")
    for n, v in by.items():
        print(f"{n:10s} {tps[n]:8.2f} {sum(x['sample_s'] for x in v):11.1f} {sum(x['update_s'] for x in v):9.1f} "
              f"{peak[n]:12.2f}")
    ratios = [a["tokens_per_s"] / b["tokens_per_s"] for a, b in zip(by["bonbench"], by["trl"], strict=True)]
    print(f"ratio bonbench/TRL tokens/s: {tps['bonbench'] / tps['trl']:.2f} (per round: "
          f"{', '.join(f'{x:.2f}' for x in ratios)}; median {statistics.median(ratios):.2f})")
    print(f"ratio bonbench/TRL peak RSS: {peak['bonbench'] / peak['trl']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"setup": asdict(setup), "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
