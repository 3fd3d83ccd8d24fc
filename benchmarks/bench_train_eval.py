"""The trainer's held-out evaluation through the vLLM rollout engine against a plain vLLM run.

Issue 33's target: with ``--rollout-backend vllm`` an evaluation of 64 problems x 8 samples runs at
>= 0.9x the tokens/s of a plain ``bonbench run --backend vllm`` of the same size (same model, task,
max tokens). Both variants go through the runner (``execute(plan(req, sampler=...))``: grading and
the run directory included) on the embedded Gemma 3 270M, each into a fresh output folder:

* plain: a ``VLLMSampler`` as ``bonbench run --backend vllm`` builds it (no LoRA, vLLM's default
  chunked prefill, one request of n samples per problem drawn from the engine's stream);
* evaluation: the trainer's rollout engine (``VLLMRollouts``: LoRA enabled, chunked prefill off)
  and its ``evaluation_sampler``, what ``Evaluation.evaluate`` hands the runner: the live adapter
  (a fresh LoRA r16 adapter on every linear layer, exported as a new version each round), every key
  its own request with its own seed.

Each engine is built once (the start-up is not timed), in bfloat16, eager by default
(``--compile`` for vLLM's compiled mode: minutes of start-up on a 2-core machine), with
``--max-model-len`` (default 2048) and ``VLLM_CPU_KVCACHE_SPACE`` as set (default here 1 GiB). The
plain rounds run first, then that engine is closed and the rollout engine runs the evaluation
rounds: both engines and the policy at once were killed for memory on the shared 2-core machine,
so a change of load between the two halves shows in the ratio. The prefix cache is emptied before
every timed run (a later round would otherwise read an earlier one's prompts).
The figure is completion tokens (``n_tokens`` summed over the run's samples) per second of wall time
of the whole run; the ratio is of the medians over rounds. Usage:

    python benchmarks/bench_train_eval.py [--problems 64 --n 8 --max-tokens 128 --rounds 2 --task math500]

This script measures; it asserts nothing (the goal is printed next to the ratio).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

GOAL = 0.9


def _run(req: Any, sampler: Any) -> tuple[int, float]:
    """Completion tokens and wall seconds of one run through the runner."""
    from bonbench.run.execute import execute
    from bonbench.run.plan import plan

    t0 = time.perf_counter()
    result = execute(plan(req, sampler=sampler))
    seconds = time.perf_counter() - t0
    store = result.runs[0].store
    return sum(s.n_tokens for s in store.samples.read().values()), seconds


def _report(figures: dict[str, list[float]], variant: str, r: int, tokens: int, seconds: float) -> None:
    figures[variant].append(tokens / seconds)
    print(f"round {r} {variant}: {tokens} tokens in {seconds:.1f} s = {tokens / seconds:.1f} tok/s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="math500")
    ap.add_argument("--problems", type=int, default=64)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-model-len", type=int, default=2048)
    ap.add_argument("--compile", action="store_true", help="vLLM's compiled mode (default: eager)")
    args = ap.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

    import torch

    from bonbench.apps.trainer.config import TrainConfig
    from bonbench.apps.trainer.evaluate import policy_fingerprint
    from bonbench.apps.trainer.policy import Policy
    from bonbench.apps.trainer.setup import eval_request
    from bonbench.apps.trainer.vllm_rollout import VLLMRollouts
    from bonbench.core.models import resolve_model
    from bonbench.plugins.samplers.vllm import VLLMSampler
    from bonbench.run.request import RunRequest

    torch.set_num_threads(max(1, len(os.sched_getaffinity(0))))
    model = resolve_model(None)
    eager = None if args.compile else True
    work = Path(tempfile.mkdtemp(prefix="bench_train_eval_"))
    cfg = TrainConfig(task=args.task, objective="sft", name="bench", eval_task=args.task, eval_n=args.n,
                      eval_limit=args.problems, eval_metrics=(f"pass@1,{args.n}",), lora_rank=16, dtype="bfloat16",
                      out=str(work), data_dir=os.environ.get("BONBENCH_DATA_DIR"))
    figures: dict[str, list[float]] = {"plain": [], "evaluation": []}
    # one engine at a time: two engines and the policy at once were killed for memory on the shared machine
    plain_engine = VLLMSampler(model, seed=cfg.seed, dtype="bfloat16", enforce_eager=eager, max_model_len=args.max_model_len)
    try:
        for r in range(args.rounds):
            plain_engine.llm.reset_prefix_cache()
            req = RunRequest(task=args.task, metrics=cfg.eval_metrics, n=args.n, limit=args.problems, backend="vllm",
                             seed=cfg.seed, dtype="bfloat16", max_tokens=args.max_tokens, data_dir=cfg.data_dir,
                             out=work / f"plain{r}", engine_args={"max_model_len": args.max_model_len,
                                                                  **({} if eager is None else {"enforce_eager": True})})
            _report(figures, "plain", r, *_run(req, plain_engine))
    finally:
        plain_engine.close()
    rollouts = VLLMRollouts(Policy(model, cfg, device="cpu"), cfg, work, enforce_eager=eager,
                            max_model_len=args.max_model_len)
    try:
        for r in range(args.rounds):
            rollouts.engine.llm.reset_prefix_cache()
            sampler = rollouts.evaluation_sampler(f"bench-step{r}", policy_fingerprint(model.fingerprint, "bench", r),
                                                  model.is_chat)
            req = dataclasses.replace(eval_request(cfg, work / f"eval{r}"), max_tokens=args.max_tokens)
            _report(figures, "evaluation", r, *_run(req, sampler))
    finally:
        rollouts.close()
    plain, evaluation = (statistics.median(figures[k]) for k in ("plain", "evaluation"))
    print(f"{args.task}, {args.problems} problems x {args.n} samples, {args.max_tokens} max tokens, "
          f"{'compiled' if args.compile else 'eager'}, median of {args.rounds} rounds: plain {plain:.1f} tok/s, "
          f"evaluation {evaluation:.1f} tok/s, ratio {evaluation / plain:.2f}x (goal >= {GOAL}x)")


if __name__ == "__main__":
    main()
