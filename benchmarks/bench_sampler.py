"""Sampler throughput: bonbench's backends against the plain library calls they wrap.

Same few-shot prompts and settings everywhere (temperature 1, top-p 1, no stop strings); the
figure is generated tokens per second of wall time (finished rows stop early on EOS in every
variant, so tokens are counted, not assumed). Comparisons and goals:

* vllm backend vs raw ``LLM.generate`` with ``SamplingParams(n)``            (goal >= 0.95x)
* vllm backend vs raw ``LLM.generate`` on duplicated prompts with n=1        (goal >= 1.5x)
* hf backend vs transformers ``generate(num_return_sequences=n)``            (goal >= 2.5x)

The vLLM variants share one engine (loaded once, warmed up once), built by bonbench's backend, so
all of them run with ``logprobs_mode="processed_logprobs"``; a fourth variant asks raw vLLM for the
same sampled-token logprobs bonbench records, which isolates the wrapper's own cost. The bonbench
variant does what ``pipeline.sample`` does with each yielded group: append it to a ``samples.jsonl``
(``JsonlTable.append``, fsync included) and call a progress callback.

The vLLM pair runs twice, each in its own subprocess (``LD_PRELOAD`` only takes effect when a
process starts): with the preload off (``BONBENCH_NO_PRELOAD=1``, no tcmalloc) and on (the
``LD_PRELOAD`` that ``bonbench.plugins.samplers.cpu_preload`` plans, i.e. what ``bonbench run`` uses); each
child reports whether tcmalloc is really mapped into it, and a combined summary comes last. Usage:

    python benchmarks/bench_sampler.py [--only vllm|hf] [--preload both|off|on] [--compile] [--rounds 2]
                                       [--problems 4 --n 32 --max-tokens 96]

This script measures; it asserts nothing (goals are printed next to the ratios).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bonbench.api.sampler import SampleRequest, SamplingParams
from bonbench.core.models import ResolvedModel, resolve_model
from bonbench.core.records import Prompt, Sample
from bonbench.core.store import JsonlTable
from bonbench.plugins.samplers import cpu_preload

QUESTIONS = ["What is 12*13?", "What is 45+78?", "What is 9*9-7?", "What is 144/12?", "What is 3^4?", "What is 17+26?"]


def few_shot(question: str) -> str:
    return (
        "Problem: What is 2+3?\nSolution: 2+3=5. The answer is $\\boxed{5}$.\n\n"
        "Problem: What is 7*6?\nSolution: 7*6=42. The answer is $\\boxed{42}$.\n\n"
        f"Problem: {question}\nSolution:"
    )


CPU = " [per CPU-s]"  # suffix of the keys holding tokens per CPU-second of this process


def timed(fn: Callable[[], int]) -> tuple[int, float, float]:
    """Tokens, wall seconds and CPU seconds (all threads of this process) of one call."""
    t0, c0 = time.perf_counter(), time.process_time()
    tokens = fn()
    return tokens, time.perf_counter() - t0, time.process_time() - c0


def compare(variants: dict[str, Callable[[], int]], rounds: int) -> tuple[dict[str, float], list[dict[str, float]]]:
    """Run the variants in turn (A B C, B C A, ...); return each one's best rate and every round's rates.

    On a machine shared with other jobs the speed drifts (measured here: the same engine went from
    240 to 146 tok/s within one 15-minute run, and from 279 to 79 tok/s within one 10-minute run),
    so best-of can compare a fast minute with a slow one; the callers also print the median of
    within-round ratios, whose two sides ran minutes apart. Each rate is also given per CPU-second
    this process used (key ``name + CPU``): time other jobs take the cores away does not count
    there, so it drifts less, though not at all (contention also costs caches and OpenMP waits).
    """
    best: dict[str, float] = {}
    per_round: list[dict[str, float]] = []
    names = list(variants)
    for r in range(rounds):
        rates: dict[str, float] = {}
        # rotate the order every round so no variant always runs first (right after a pause)
        for name in names[r % len(names):] + names[: r % len(names)]:
            tokens, secs, cpu = timed(variants[name])
            rates[name], rates[name + CPU] = tokens / secs, tokens / cpu
            print(f"  round {r + 1}: {name:<48} {tokens:>7} tok {secs:>7.1f} s {tokens / secs:>7.1f} tok/s "
                  f"{tokens / cpu:>6.1f} tok/CPU-s  load {_loadavg().split()[0]}", flush=True)
            for key in (name, name + CPU):
                best[key] = max(best.get(key, 0.0), rates[key])
        per_round.append(rates)
    print(f"  best of {rounds}:")
    for name in names:
        print(f"    {name:<48} {best[name]:>8.1f} tok/s {best[name + CPU]:>7.1f} tok/CPU-s", flush=True)
    return best, per_round


def ratio_line(label: str, a: str, b: str, best: dict[str, float], per_round: list[dict[str, float]], goal: str) -> str:
    """``label = best-of ratio (within rounds: r1, r2, ...; median m) goal``, in wall time and, when
    the rates have them, per CPU-second."""
    def one(x: str, y: str) -> str:
        within = [r[x] / r[y] for r in per_round]
        return (f"{best[x] / best[y]:.2f}x best-of (within rounds: {', '.join(f'{v:.2f}' for v in within)}; "
                f"median {statistics.median(within):.2f}x)")

    line = f"  ratio {label:<28} = {one(a, b)} {goal}"
    if a + CPU in best and b + CPU in best:
        line += f"\n  {'':<6}{'':<28}   per CPU-s: {one(a + CPU, b + CPU)}"
    return line


VLLM_NAMES = ["bonbench vllm backend (+ store, progress)", "raw LLM.generate, SamplingParams(n)",
              "raw LLM.generate, SamplingParams(n, logprobs=0)", "raw LLM.generate, duplicated prompts, n=1"]
VLLM_RATIOS = [("bonbench / raw n", 0, 1, "(goal >= 0.95x)"), ("bonbench / raw n + logprobs", 0, 2, "(same work as bonbench)"),
               ("bonbench / duplicated", 0, 3, "(goal >= 1.5x)")]


def bench_vllm(model: ResolvedModel, requests: list[SampleRequest], params: SamplingParams, compile_: bool,
               rounds: int) -> tuple[dict[str, float], list[dict[str, float]]]:
    from bonbench.plugins.samplers.vllm import VLLMSampler

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
    # warm-up with the full workload, untimed: with a short warm-up the first variant of round 1
    # (always bonbench's) measured 0.89-0.90x its own later rounds (2026-11-22, preload on),
    # presumably one-time set-up for batch shapes the short warm-up never reached
    t0 = time.perf_counter()
    llm.generate(prompts, raw_lp, use_tqdm=False)
    print(f"warm-up (one untimed pass of the raw n + logprobs variant): {time.perf_counter() - t0:.1f} s", flush=True)
    total = sum(len(r.sample_indices) for r in requests)
    store_dir = tempfile.mkdtemp(prefix="bench-sampler-")

    def progress(stage: str, advance: int, total: int) -> None:
        return None

    def ours() -> int:
        # what pipeline.sample does with each group: persist it, then report progress
        table = JsonlTable(Path(store_dir) / f"samples-{time.monotonic_ns()}.jsonl", Sample)
        tokens = 0
        for group in sampler.generate(requests, params):
            table.append(group)
            progress("sample", len(group), total)
            tokens += sum(s.n_tokens for s in group)
        table.path.unlink()
        return tokens

    def raw_n() -> int:
        return sum(len(c.token_ids) for o in llm.generate(prompts, raw, use_tqdm=False) for c in o.outputs)

    def raw_n_logprobs() -> int:
        return sum(len(c.token_ids) for o in llm.generate(prompts, raw_lp, use_tqdm=False) for c in o.outputs)

    def raw_dup() -> int:
        dup = [p for p in prompts for _ in range(n)]
        return sum(len(c.token_ids) for o in llm.generate(dup, one, use_tqdm=False) for c in o.outputs)

    best, per_round = compare(dict(zip(VLLM_NAMES, (ours, raw_n, raw_n_logprobs, raw_dup), strict=True)), rounds)
    for label, a, b, goal in VLLM_RATIOS:
        print(ratio_line(label, VLLM_NAMES[a], VLLM_NAMES[b], best, per_round, goal), flush=True)
    sampler.close()
    os.rmdir(store_dir)
    return best, per_round


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def _child_env(config: str) -> tuple[dict[str, str] | None, str]:
    """The environment of the subprocess for one configuration, or None (and why) if it cannot run."""
    env = {k: v for k, v in os.environ.items() if k != cpu_preload.GUARD_ENV}
    kept = [p for p in env.get("LD_PRELOAD", "").split(":") if p and "libtcmalloc" not in p and "libiomp" not in p]
    if config == "off":
        env["LD_PRELOAD"] = ":".join(kept)
        env[cpu_preload.OPT_OUT_ENV] = "1"
        return env, "no preload"
    env.pop(cpu_preload.OPT_OUT_ENV, None)
    env["LD_PRELOAD"] = ":".join(kept)
    plan = cpu_preload.preload_plan(env)
    if not plan.reexec:
        return None, plan.reason
    env["LD_PRELOAD"] = plan.ld_preload
    return env, f"LD_PRELOAD={plan.ld_preload}"


def run_vllm_configs(args: argparse.Namespace, configs: list[str]) -> None:
    """Run the vLLM variants once per preload configuration, each in a fresh subprocess; summarise."""
    results: dict[str, dict[str, Any]] = {}
    for config in configs:
        env, what = _child_env(config)
        print(f"\n=== vLLM, preload {config}: {what}", flush=True)
        if env is None:
            print(f"    skipped: {what}", flush=True)
            continue
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
            summary = fh.name
        cmd = [sys.executable, str(Path(__file__).resolve()), "--only", "vllm", "--problems", str(args.problems),
               "--n", str(args.n), "--max-tokens", str(args.max_tokens), "--rounds", str(args.rounds),
               "--child-summary", summary, "--child-config", config]
        cmd += (["--compile"] if args.compile else []) + (["--model", args.model] if args.model else [])
        proc = subprocess.run(cmd, env=env)
        if proc.returncode == 0 and os.path.getsize(summary):
            results[config] = json.loads(Path(summary).read_text())
        else:
            print(f"    the preload-{config} run failed (exit {proc.returncode})", flush=True)
        os.unlink(summary)
    print("\n=== summary: vLLM, preload off vs on (each configuration in its own process)", flush=True)
    for config, res in results.items():
        best, per_round = res["best"], res["per_round"]
        print(f"preload {config}: tcmalloc mapped {res['tcmalloc_mapped']}, load average {res['load_before']} -> "
              f"{res['load_after']}", flush=True)
        for name in VLLM_NAMES:
            print(f"    {name:<48} {best[name]:>8.1f} tok/s {best[name + CPU]:>7.1f} tok/CPU-s (best of {len(per_round)})",
                  flush=True)
        for label, a, b, goal in VLLM_RATIOS:
            print(ratio_line(label, VLLM_NAMES[a], VLLM_NAMES[b], best, per_round, goal), flush=True)
    if len(results) == 2:
        print("preload on / off, best of each (different processes, minutes apart):", flush=True)
        for name in VLLM_NAMES:
            on, off = results["on"]["best"], results["off"]["best"]
            print(f"    {name:<48} {on[name] / off[name]:.2f}x tok/s, {on[name + CPU] / off[name + CPU]:.2f}x tok/CPU-s",
                  flush=True)


def bench_hf(model: ResolvedModel, requests: list[SampleRequest], params: SamplingParams, rounds: int) -> None:
    import torch

    from bonbench.plugins.samplers.hf import HFSampler

    t0 = time.perf_counter()
    sampler = HFSampler(model, seed=params.seed, batch_size=64)
    print(f"hf model load: {time.perf_counter() - t0:.1f} s", flush=True)
    tok, lm = sampler.tokenizer, sampler.lm
    n = len(requests[0].sample_indices)
    list(sampler.generate([SampleRequest(requests[0].prompt, (0, 1))], SamplingParams(max_tokens=4, seed=params.seed)))

    def synced(fn: Callable[[], int]) -> Callable[[], int]:
        def run() -> int:  # CUDA kernels are asynchronous: a timing must end after they have run
            tokens = fn()
            if sampler.device.type == "cuda":
                torch.cuda.synchronize()
            return tokens
        return run

    def ours() -> int:
        return sum(s.n_tokens for group in sampler.generate(requests, params) for s in group)

    def hf_generate() -> int:
        total = 0
        torch.manual_seed(params.seed)
        for r in requests:
            ids = tok(r.prompt.text, return_tensors="pt").to(sampler.device)  # the model's device (CUDA when present)
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
    card = torch.cuda.get_device_name(sampler.device) if sampler.device.type == "cuda" else "CPU"
    print(f"hf pair on {sampler.device} ({card}), "
          f"dtype {next(lm.parameters()).dtype}", flush=True)
    best, per_round = compare(dict(zip(names, (synced(ours), synced(hf_generate)), strict=True)), rounds)
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
    ap.add_argument("--preload", choices=("both", "off", "on"), default="both",
                    help="vLLM: run without and/or with the tcmalloc LD_PRELOAD, each in a subprocess")
    ap.add_argument("--child-config", choices=("off", "on"), help=argparse.SUPPRESS)  # set by the parent for its subprocess
    ap.add_argument("--child-summary", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    def reqs(k: int) -> list[SampleRequest]:
        return [SampleRequest(Prompt(f"q{i}", text=few_shot(QUESTIONS[i % len(QUESTIONS)])), tuple(range(args.n)))
                for i in range(k)]

    if args.child_summary:  # one vLLM configuration, in the process whose LD_PRELOAD the parent chose
        load_before = _loadavg()
        model = resolve_model(args.model)
        print(f"model {model.name}; {args.problems} problems x n={args.n}, max_tokens={args.max_tokens}, T=1; "
              f"LD_PRELOAD={os.environ.get('LD_PRELOAD', '')!r}, tcmalloc mapped: {cpu_preload.tcmalloc_mapped()}; "
              f"load average {load_before}", flush=True)
        best, per_round = bench_vllm(model, reqs(args.problems), SamplingParams(temperature=1.0, max_tokens=args.max_tokens),
                                     args.compile, args.rounds)
        Path(args.child_summary).write_text(json.dumps({
            "config": args.child_config, "best": best, "per_round": per_round, "tcmalloc_mapped": cpu_preload.tcmalloc_mapped(),
            "load_before": load_before, "load_after": _loadavg()}))
        return

    print(f"load average {_loadavg()} at start", flush=True)
    if args.only in (None, "vllm"):
        print(f"vLLM: {args.problems} problems x n={args.n}, max_tokens={args.max_tokens}, T=1", flush=True)
        run_vllm_configs(args, ["off", "on"] if args.preload == "both" else [args.preload])
    if args.only in (None, "hf"):
        model = resolve_model(args.model)
        print(f"\nhf pair ({model.name}, this process, no preload involved): {args.hf_problems} problems x n={args.n}, "
              f"max_tokens={args.hf_max_tokens}", flush=True)
        bench_hf(model, reqs(args.hf_problems), SamplingParams(temperature=1.0, max_tokens=args.hf_max_tokens), args.rounds)
    print(f"load average {_loadavg()} at end", flush=True)


if __name__ == "__main__":
    main()
