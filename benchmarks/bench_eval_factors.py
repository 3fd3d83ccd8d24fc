"""Where the trainer's vLLM evaluation loses time against a plain vLLM run: each factor on its own.

``bench_train_eval.py`` compares the two end to end; this script separates what differs between
them, every arm through the runner (``execute(plan(req, sampler=...))``, grading and the run
directory included) on the embedded Gemma 3 270M (bf16, eager), the same task, problems, n and max
tokens, the arms interleaved round by round (so a change of the machine's load hits every arm):

* ``plain``: a ``VLLMSampler`` built as ``bonbench run --backend vllm`` builds it (vLLM's defaults:
  chunked prefill on, no LoRA), one request of n per problem from the engine's stream;
* ``nochunk``: the same on an engine built with chunked prefill off and prefix caching on (a third
  engine: left out by default, memory);
* ``base``: the trainer's rollout engine (``VLLMRollouts``: LoRA enabled, chunked prefill off), one
  request of n per problem, no adapter;
* ``lora`` / ``lora-vllm``: the same engine, one request of n per problem through the live adapter
  (a fresh r16 adapter on every linear layer, a new version each round), computed by
  ``vllm_cpu_lora``'s kernels / by vLLM's own CPU kernels;
* ``eval`` / ``eval-vllm``: the evaluation's sampler (``VLLMRollouts.evaluation_sampler``, the
  adapter and seeded requests), with either kernels;
* ``seeded``: seeded requests on the rollout engine without an adapter.

Each arm's figure is completion tokens per second of wall time of the whole run; the script prints
each arm's median and its ratio to ``plain``. The prefix cache of every engine is emptied before
every timed run. Usage:

    python benchmarks/bench_eval_factors.py [--problems 4 --n 8 --max-tokens 32 --rounds 2 --arms plain,base,...]

This script measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="math500")
    ap.add_argument("--problems", type=int, default=4)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-model-len", type=int, default=2048)
    ap.add_argument("--arms", default="plain,base,lora-vllm,lora,eval-vllm,eval")
    args = ap.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

    import torch

    from bonbench.apps.trainer.config import TrainConfig
    from bonbench.apps.trainer.evaluate import policy_fingerprint
    from bonbench.apps.trainer.policy import Policy
    from bonbench.apps.trainer.setup import eval_request
    from bonbench.apps.trainer.vllm_rollout import EngineSampler, VLLMRollouts
    from bonbench.core.models import resolve_model
    from bonbench.plugins.samplers import vllm_cpu_lora
    from bonbench.plugins.samplers.vllm import VLLMSampler
    from bonbench.run.execute import execute
    from bonbench.run.plan import plan

    torch.set_num_threads(max(1, len(os.sched_getaffinity(0))))
    model = resolve_model(None)
    work = Path(tempfile.mkdtemp(prefix="bench_eval_factors_"))
    arms = args.arms.split(",")
    cfg = TrainConfig(task=args.task, objective="sft", name="bench", eval_task=args.task, eval_n=args.n,
                      eval_limit=args.problems, eval_metrics=(f"pass@1,{args.n}",), lora_rank=16, dtype="bfloat16",
                      out=str(work), data_dir=os.environ.get("BONBENCH_DATA_DIR"))
    base = {"enforce_eager": True, "max_model_len": args.max_model_len}
    # the rollout engine first, every round's sampler (adapter exports) built before the policy is
    # dropped: the policy and three engines at once were killed for memory on the shared machine
    rollouts = VLLMRollouts(Policy(model, cfg, device="cpu"), cfg, work, **base)
    from vllm.lora.ops import torch_ops  # imported by the engine above, after the CPU settings
    from vllm.lora.punica_wrapper import punica_cpu

    vllm_kernels = {name: getattr(torch_ops, name) for name in vllm_cpu_lora.KERNELS}
    samplers: dict[tuple[str, int], Any] = {}
    for r in range(args.rounds):
        for arm in arms:
            name, fingerprint = f"bench-{arm}-{r}", policy_fingerprint(model.fingerprint, arm, r)
            if arm in ("plain", "nochunk"):
                samplers[arm, r] = (name, fingerprint)  # the engine is built below
            elif arm.startswith("eval"):
                samplers[arm, r] = rollouts.evaluation_sampler(name, fingerprint, model.is_chat)
            else:
                samplers[arm, r] = EngineSampler(rollouts.engine, None if arm in ("base", "seeded") else rollouts.export(),
                                                  seed_each_sample=arm == "seeded", model=name, fingerprint=fingerprint)
    rollouts.policy = None
    gc.collect()
    engines: dict[str, Any] = {}
    if "plain" in arms:
        engines["plain"] = VLLMSampler(model, seed=cfg.seed, dtype="bfloat16", **base)
    if "nochunk" in arms:
        engines["nochunk"] = VLLMSampler(model, seed=cfg.seed, dtype="bfloat16", enable_chunked_prefill=False,
                                         enable_prefix_caching=True, **base)
    for name, e in [*engines.items(), ("rollout", rollouts.engine)]:
        sc = e.llm.llm_engine.vllm_config.scheduler_config
        print(f"engine {name}: max_num_seqs {sc.max_num_seqs}, max_num_batched_tokens {sc.max_num_batched_tokens}, "
              f"chunked {sc.enable_chunked_prefill}", flush=True)
    figures: dict[str, list[float]] = {a: [] for a in arms}
    for r in range(args.rounds):
        for arm in arms:
            sampler = samplers[arm, r]
            if arm in engines:
                sampler = EngineSampler(engines[arm], None, model=sampler[0], fingerprint=sampler[1])
            for kernel, fn in (vllm_kernels if arm.endswith("-vllm") else vllm_cpu_lora.KERNELS).items():
                setattr(punica_cpu, kernel, fn)
            (engines.get(arm) or rollouts.engine).llm.reset_prefix_cache()
            req = dataclasses.replace(eval_request(cfg, work / f"{arm}{r}"), max_tokens=args.max_tokens)
            t0 = time.perf_counter()
            result = execute(plan(req, sampler=sampler))
            seconds = time.perf_counter() - t0
            tokens = sum(s.n_tokens for s in result.runs[0].store.samples.read().values())
            figures[arm].append(tokens / seconds)
            print(f"round {r} {arm}: {tokens} tokens in {seconds:.1f} s = {tokens / seconds:.1f} tok/s "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)
    ref = statistics.median(figures["plain"]) if "plain" in figures else None
    print(f"{args.task}, {args.problems} problems x {args.n} samples, {args.max_tokens} max tokens, eager, "
          f"median of {args.rounds} interleaved rounds:")
    for arm in arms:
        m = statistics.median(figures[arm])
        print(f"  {arm:12s} {m:7.1f} tok/s" + (f"  {m / ref:.2f}x plain" if ref else ""))


if __name__ == "__main__":
    main()
