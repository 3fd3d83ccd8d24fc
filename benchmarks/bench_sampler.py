"""Sampler throughput: bonbench's backends against the plain library calls they wrap.

Same few-shot prompts and settings everywhere (temperature 1, top-p 1, no stop strings); the
figure is generated tokens per second of wall time (finished rows stop early on EOS in every
variant, so tokens are counted, not assumed). Comparisons and goals:

* vllm backend vs raw ``LLM.generate`` with ``SamplingParams(n)``            (goal >= 0.95x)
* vllm backend vs raw ``LLM.generate`` on duplicated prompts with n=1        (goal >= 1.5x)
* hf backend vs transformers ``generate(num_return_sequences=n)``            (goal >= 2.5x)

The vLLM variants share one engine (loaded once, warmed up once), built by bonbench's backend, so
all of them run with ``logprobs_mode="processed_logprobs"``; a fourth variant asks raw vLLM for the
same sampled-token logprobs bonbench records, which isolates the wrapper's own cost. Usage:

    python benchmarks/bench_sampler.py [--only vllm|hf] [--compile] [--rounds 2] [--problems 4 --n 32 --max-tokens 96]

This script measures; it asserts nothing (goals are printed next to the ratios).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

from bonbench.models import ResolvedModel, resolve_model
from bonbench.records import Prompt
from bonbench.sampler.base import SampleRequest, SamplingParams

QUESTIONS = ["What is 12*13?", "What is 45+78?", "What is 9*9-7?", "What is 144/12?", "What is 3^4?", "What is 17+26?"]


def few_shot(question: str) -> str:
    return (
        "Problem: What is 2+3?\nSolution: 2+3=5. The answer is $\\boxed{5}$.\n\n"
        "Problem: What is 7*6?\nSolution: 7*6=42. The answer is $\\boxed{42}$.\n\n"
        f"Problem: {question}\nSolution:"
    )


def timed(fn: Callable[[], int]) -> tuple[int, float]:
    t0 = time.perf_counter()
    tokens = fn()
    return tokens, time.perf_counter() - t0


def compare(variants: dict[str, Callable[[], int]], rounds: int) -> tuple[dict[str, float], list[dict[str, float]]]:
    """Run the variants in turn (A B C, B C A, ...); return each one's best rate and every round's rates.

    On a machine shared with other jobs the speed drifts (measured here: the same engine went from
    240 to 146 tok/s within one 15-minute run), so best-of can compare a fast minute with a slow
    one; the callers also print the median of within-round ratios, whose two sides ran minutes apart.
    """
    best: dict[str, float] = {}
    per_round: list[dict[str, float]] = []
    names = list(variants)
    for r in range(rounds):
        rates: dict[str, float] = {}
        # rotate the order every round so no variant always runs first (right after a pause)
        for name in names[r % len(names):] + names[: r % len(names)]:
            tokens, secs = timed(variants[name])
            rates[name] = tokens / secs
            print(f"  round {r + 1}: {name:<46} {tokens:>7} tok {secs:>8.1f} s {tokens / secs:>8.1f} tok/s", flush=True)
            best[name] = max(best.get(name, 0.0), rates[name])
        per_round.append(rates)
    print(f"  best of {rounds}:")
    for name in names:
        print(f"    {name:<46} {best[name]:>8.1f} tok/s", flush=True)
    return best, per_round


def ratio_line(label: str, a: str, b: str, best: dict[str, float], per_round: list[dict[str, float]], goal: str) -> str:
    """``label = best-of ratio (within rounds: r1, r2, ...; median m) goal``."""
    within = [r[a] / r[b] for r in per_round]
    return (f"  ratio {label:<28} = {best[a] / best[b]:.2f}x best-of (within rounds: "
            f"{', '.join(f'{x:.2f}' for x in within)}; median {statistics.median(within):.2f}x) {goal}")


def bench_vllm(model: ResolvedModel, requests: list[SampleRequest], params: SamplingParams, compile_: bool, rounds: int) -> None:
    from bonbench.sampler.vllm import VLLMSampler

    t0 = time.perf_counter()
    sampler = VLLMSampler(model, seed=params.seed, max_model_len=1024, enforce_eager=not compile_)
    print(f"vllm engine init: {time.perf_counter() - t0:.1f} s (enforce_eager={not compile_})", flush=True)
    vllm = sampler._vllm
    llm = sampler.llm
    prompts = [r.prompt.text for r in requests]
    n = len(requests[0].sample_indices)
    raw = vllm.SamplingParams(n=n, temperature=params.temperature, top_p=params.top_p, max_tokens=params.max_tokens)
    raw_lp = vllm.SamplingParams(n=n, temperature=params.temperature, top_p=params.top_p, max_tokens=params.max_tokens,
                                 logprobs=0, flat_logprobs=True)
    one = vllm.SamplingParams(n=1, temperature=params.temperature, top_p=params.top_p, max_tokens=params.max_tokens)
    llm.generate(prompts[:1], vllm.SamplingParams(n=4, max_tokens=8), use_tqdm=False)  # warm-up

    def ours() -> int:
        return sum(s.n_tokens for group in sampler.generate(requests, params) for s in group)

    def raw_n() -> int:
        return sum(len(c.token_ids) for o in llm.generate(prompts, raw, use_tqdm=False) for c in o.outputs)

    def raw_n_logprobs() -> int:
        return sum(len(c.token_ids) for o in llm.generate(prompts, raw_lp, use_tqdm=False) for c in o.outputs)

    def raw_dup() -> int:
        dup = [p for p in prompts for _ in range(n)]
        return sum(len(c.token_ids) for o in llm.generate(dup, one, use_tqdm=False) for c in o.outputs)

    names = ["bonbench vllm backend", "raw LLM.generate, SamplingParams(n)",
             "raw LLM.generate, SamplingParams(n, logprobs=0)", "raw LLM.generate, duplicated prompts, n=1"]
    best, per_round = compare(dict(zip(names, (ours, raw_n, raw_n_logprobs, raw_dup))), rounds)
    print(ratio_line("bonbench / raw n", names[0], names[1], best, per_round, "(goal >= 0.95x)"))
    print(ratio_line("bonbench / raw n + logprobs", names[0], names[2], best, per_round, "(same work as bonbench)"))
    print(ratio_line("bonbench / duplicated", names[0], names[3], best, per_round, "(goal >= 1.5x)"), flush=True)
    sampler.close()


def bench_hf(model: ResolvedModel, requests: list[SampleRequest], params: SamplingParams, rounds: int) -> None:
    import torch

    from bonbench.sampler.hf import HFSampler

    t0 = time.perf_counter()
    sampler = HFSampler(model, seed=params.seed, batch_size=64)
    print(f"hf model load: {time.perf_counter() - t0:.1f} s", flush=True)
    tok, lm = sampler.tokenizer, sampler.lm
    n = len(requests[0].sample_indices)
    list(sampler.generate([SampleRequest(requests[0].prompt, (0, 1))], SamplingParams(max_tokens=4, seed=params.seed)))

    def ours() -> int:
        return sum(s.n_tokens for group in sampler.generate(requests, params) for s in group)

    def hf_generate() -> int:
        total = 0
        torch.manual_seed(params.seed)
        for r in requests:
            ids = tok(r.prompt.text, return_tensors="pt")
            with torch.inference_mode():
                out = lm.generate(**ids, do_sample=True, temperature=params.temperature, top_p=params.top_p, top_k=0,
                                  max_new_tokens=params.max_tokens, num_return_sequences=n, pad_token_id=sampler.pad_id)
            new = out[:, ids["input_ids"].shape[1]:]
            # rows that hit EOS are padded afterwards: count up to and including the first EOS
            for row in new.tolist():
                ends = [i for i, t in enumerate(row) if t in sampler.eos_ids]
                total += ends[0] + 1 if ends else len(row)
        return total

    names = ["bonbench hf backend", "transformers generate(num_return_sequences=n)"]
    best, per_round = compare(dict(zip(names, (ours, hf_generate))), rounds)
    print(ratio_line("bonbench hf / generate", names[0], names[1], best, per_round, "(goal >= 2.5x)"), flush=True)
    sampler.close()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="default: the embedded Gemma 3 270M")
    ap.add_argument("--only", choices=("vllm", "hf"))
    ap.add_argument("--problems", type=int, default=4)
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--hf-problems", type=int, default=2, help="HF generate is slow: fewer problems for the hf pair")
    ap.add_argument("--hf-max-tokens", type=int, default=64)
    ap.add_argument("--compile", action="store_true", help="let vLLM compile (slower start, faster decode)")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved repetitions (best-of and within-round ratios are printed)")
    args = ap.parse_args(argv)

    model = resolve_model(args.model)
    print(f"model {model.name} ({model.path}); {args.problems} problems x n={args.n}, max_tokens={args.max_tokens}, T=1", flush=True)

    def reqs(k: int) -> list[SampleRequest]:
        return [SampleRequest(Prompt(f"q{i}", text=few_shot(QUESTIONS[i % len(QUESTIONS)])), tuple(range(args.n)))
                for i in range(k)]

    if args.only in (None, "vllm"):
        bench_vllm(model, reqs(args.problems), SamplingParams(temperature=1.0, max_tokens=args.max_tokens), args.compile, args.rounds)
    if args.only in (None, "hf"):
        print(f"hf pair: {args.hf_problems} problems x n={args.n}, max_tokens={args.hf_max_tokens}", flush=True)
        bench_hf(model, reqs(args.hf_problems), SamplingParams(temperature=1.0, max_tokens=args.hf_max_tokens), args.rounds)


if __name__ == "__main__":
    main()
