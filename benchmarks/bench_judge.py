"""``judge:openai:`` scoring against a local ``vllm serve`` vs the same requests sent by a bare client.

Both sides send, for each of ``--samples`` (problem, solution) pairs, the judge's verdict prompt with
``max_tokens=1``, ``temperature=1`` and the top 20 log-probabilities to one ``vllm serve`` of the
embedded Gemma 3 270M, with the same number of requests in flight (``--concurrency``). The bare
client is ``openai.AsyncOpenAI`` and an ``asyncio.Semaphore``, reading P(Yes) from the answers with
no retries, deadlines, failover, usage counting or checks; bonbench's side is ``JudgeVerifier.score``
(prompt filling, the served-model client, P(Yes), Score rows). The figure is samples scored per
second of wall time. Printed, in one run:

* judge verifier / bare client      (goal >= 0.9x: the price of bonbench's client and bookkeeping)

Variants alternate within each round (the order rotates: bench_sampler.compare). Usage:

    python benchmarks/bench_judge.py [--samples 64 --concurrency 8 --rounds 3]

This script measures; it asserts nothing (the goal is printed next to the ratio).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sampler import CPU, QUESTIONS, compare, ratio_line

from bonbench.core.models import resolve_model
from bonbench.core.records import Problem, Sample, Score
from bonbench.plugins.samplers.local_server import vllm_serve
from bonbench.plugins.verifiers.judge import JudgeVerifier
from bonbench.plugins.verifiers.judge_prompt import p_yes

SERVED = "gemma-3-270m"
ANSWERS = ["156", "123", "74", "12", "81", "43"]


def pairs(count: int) -> tuple[dict[str, Problem], list[Sample]]:
    """``count`` solutions, right and wrong in turn, over the arithmetic questions."""
    problems = {f"q{i}": Problem(f"q{i}", q, a) for i, (q, a) in enumerate(zip(QUESTIONS, ANSWERS, strict=True))}
    samples = []
    for j in range(count):
        i = j % len(QUESTIONS)
        answer = ANSWERS[i] if j % 2 == 0 else str(int(ANSWERS[i]) + 1 + j)
        samples.append(Sample(f"q{i}", j, f"{QUESTIONS[i][8:-1]} = {answer}. The answer is $\\boxed{{{answer}}}$.",
                              16, "stop"))
    return problems, samples


def bare(url: str, prompts: list[str], concurrency: int) -> Callable[[], int]:
    """The same requests from ``openai.AsyncOpenAI``, ``concurrency`` in flight, P(Yes) read; nothing else."""
    import openai

    async def all_of() -> list[float]:
        api = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="EMPTY")
        gate = asyncio.Semaphore(concurrency)

        async def one(text: str) -> float:
            async with gate:
                out = await api.completions.create(model=SERVED, prompt=text, max_tokens=1, temperature=1.0,
                                                   logprobs=20, seed=0)
            top = out.choices[0].logprobs.top_logprobs[0]  # type: ignore[union-attr,index] logprobs asked for, so present
            return p_yes(list(top.items()), 0.0)[0]

        try:
            return await asyncio.gather(*(one(t) for t in prompts))
        finally:
            await api.close()

    def run() -> int:
        values = asyncio.run(all_of())
        assert all(0.0 <= v <= 1.0 and math.isfinite(v) for v in values)
        return len(values)
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    model = resolve_model(None)
    problems, samples = pairs(args.samples)
    logs = Path(tempfile.mkdtemp(prefix="bench-judge-"))
    print(f"model {model.name} ({model.path}); {args.samples} samples, concurrency {args.concurrency}, "
          f"cpus={len(os.sched_getaffinity(0))}; logs in {logs}", flush=True)
    with vllm_serve(model.path, served_name=SERVED, log=logs / "serve.log") as url:
        judge = JudgeVerifier(f"openai:{url}?model={SERVED}&concurrency={args.concurrency}")
        prompts = [judge.prompt.verdict(problems[s.problem_id].input, s.completion) for s in samples]

        def ours() -> int:
            return len(judge.score(problems, samples, {}))

        variants = {"judge verifier (JudgeVerifier.score)": ours,
                    "bare AsyncOpenAI client, same requests": bare(url, prompts, args.concurrency)}
        for fn in variants.values():  # warm-up: the first requests pay one-time set-up on both sides
            fn()
        t0 = time.perf_counter()
        scores = judge.score(problems, samples, {})
        print(f"  one scoring pass: {time.perf_counter() - t0:.1f} s; mean P(Yes) right {_mean(scores, 0):.3f}, "
              f"wrong {_mean(scores, 1):.3f}", flush=True)
        best, per_round = compare(variants, args.rounds)
        names = list(variants)
        # the server's CPU time is not this process's: per-CPU-second rates mean nothing here
        wall = {k: v for k, v in best.items() if not k.endswith(CPU)}
        print("  (rates are samples per second: 'tok' above counts samples)")
        print(ratio_line("judge / bare client", names[0], names[1], wall,
                         [{k: v for k, v in r.items() if not k.endswith(CPU)} for r in per_round], "(goal >= 0.9x)"),
              flush=True)
    print(json.dumps({"judge_over_bare": best[names[0]] / best[names[1]]}), flush=True)


def _mean(scores: list[Score], parity: int) -> float:
    picked = [s.score for s in scores if s.sample_idx % 2 == parity]
    return sum(picked) / max(len(picked), 1)


if __name__ == "__main__":
    main()
