"""``--backend openai`` against a local ``vllm serve`` vs ``--backend vllm`` in-process; 1 vs 2 endpoints.

Same model (the embedded Gemma 3 270M), prompts (few-shot arithmetic, as in bench_sampler.py) and
settings (temperature 1, top-p 1, max tokens, bf16, eager, max-num-batched-tokens 8192, 1 GiB KV
cache) on both sides; the figure is generated tokens per second of wall time. Printed, in one run:

* openai backend (one server) / vllm backend in-process         (goal >= 0.9x: the price of HTTP)
* time to first sample of a second ``bonbench run`` against the already-started server: a CLI
  process started cold, with a seed no earlier run used, until its first row is in samples.jsonl
  (goal <= 5 s: the server's engine start, printed too, is paid once across runs)
* two servers (each bound to half the CPUs) / one server (all CPUs), both through the openai
  backend (``--endpoints both``; on a 2-core machine two engines share the same cores, so expect
  about 1x or less; on a multi-GPU machine this is the data-parallel case)

Variants alternate within each round (the order rotates) because the speed of a shared machine
drifts over minutes. Usage:

    python benchmarks/bench_openai.py [--problems 4 --n 16 --max-tokens 64 --rounds 2] [--endpoints one|both]

This script measures; it asserts nothing (goals are printed next to the ratios).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sampler import CPU, QUESTIONS, compare, few_shot, ratio_line

from bonbench.api.sampler import SampleRequest, SamplingParams
from bonbench.core.models import resolve_model
from bonbench.core.records import Prompt
from bonbench.core.served import OpenAIOptions, served_model
from bonbench.plugins.samplers.local_server import vllm_serve
from bonbench.plugins.samplers.openai_backend import OpenAISampler

REPO = Path(__file__).resolve().parents[1]
SERVED = "gemma-3-270m"


def _tokens(sampler: object, requests: list[SampleRequest], params: SamplingParams) -> Callable[[], int]:
    def run() -> int:
        return sum(s.n_tokens for group in sampler.generate(requests, params) for s in group)
    return run


def wall_only(best: dict[str, float], per_round: list[dict[str, float]]) -> tuple[dict[str, float], list[dict[str, float]]]:
    """Drop the per-CPU-second rates: the server's CPU time is not this process's, so they mean nothing here."""
    keep = lambda d: {k: v for k, v in d.items() if not k.endswith(CPU)}  # noqa: E731  (a one-line filter used twice just below)
    return keep(best), [keep(r) for r in per_round]


def first_sample_seconds(url: str, out: Path, seed: int, data_dir: str | None) -> float:
    """Seconds from starting ``bonbench run --backend openai`` (a fresh process) to its first stored sample."""
    cmd = [sys.executable, "-m", "bonbench.apps.cli", "run", "--task", "math", "--limit", "2", "--n", "4",
           "--metric", "pass@1,4", "--max-tokens", "32", "--seed", str(seed), "--backend", "openai",
           "--endpoint", url, "--model", SERVED, "--out", str(out)]
    if data_dir:
        cmd += ["--data-dir", data_dir]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = None
    while proc.poll() is None and seen is None:
        for path in out.glob("runs/math/*/*/samples.jsonl"):
            if path.stat().st_size > 0:
                seen = time.perf_counter() - t0
        time.sleep(0.02)
    err = proc.communicate(timeout=600)[1]
    if proc.returncode != 0:
        raise SystemExit(f"the second run failed: {err[-2000:]}")
    return seen if seen is not None else time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=4)
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--endpoints", choices=["one", "both"], default="one",
                    help="both: also measure two servers (half the CPUs each) against one")
    ap.add_argument("--data-dir", default=os.environ.get("BONBENCH_DATA_DIR"))
    args = ap.parse_args()

    model = resolve_model(None)
    params = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=args.max_tokens, seed=0)
    requests = [SampleRequest(Prompt(f"q{i}", text=few_shot(QUESTIONS[i % len(QUESTIONS)])), tuple(range(args.n)))
                for i in range(args.problems)]
    total = args.problems * args.n
    logs = Path(tempfile.mkdtemp(prefix="bench-openai-"))
    print(f"model {model.name} ({model.path}); {args.problems} prompts x n={args.n}, max_tokens={args.max_tokens}, "
          f"cpus={len(os.sched_getaffinity(0))}; logs in {logs}", flush=True)

    with ExitStack() as stack:
        t0 = time.perf_counter()
        url = stack.enter_context(vllm_serve(model.path, served_name=SERVED, log=logs / "serve-all.log"))
        print(f"vllm serve start (engine load, once): {time.perf_counter() - t0:.1f} s", flush=True)
        # concurrency = every sample at once, as the in-process backend enqueues them all
        one = OpenAIOptions(endpoints=(url,), concurrency=total)
        api = OpenAISampler(served_model(SERVED, one), seed=0, options=one)

        from bonbench.plugins.samplers.vllm import VLLMSampler

        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # the server's KV cache size
        t0 = time.perf_counter()
        local = VLLMSampler(model, seed=0, max_model_len=2048, enforce_eager=True, max_num_batched_tokens=8192)
        print(f"in-process vllm engine start: {time.perf_counter() - t0:.1f} s", flush=True)
        variants = {"openai backend, 1 vllm serve": _tokens(api, requests, params),
                    "vllm backend, in-process": _tokens(local, requests, params)}
        for fn in variants.values():  # warm-up: first batches pay one-time set-up on both sides
            fn()
        best, per_round = wall_only(*compare(variants, args.rounds))
        names = list(variants)
        print(ratio_line("openai / in-process", names[0], names[1], best, per_round, "(goal >= 0.9x)"), flush=True)
        local.close()

        ttfs = [first_sample_seconds(url, logs / f"cli-{i}", seed=1000 + i, data_dir=args.data_dir) for i in range(2)]
        print(f"  time to first sample of a new `bonbench run` against the running server: "
              f"{', '.join(f'{t:.1f} s' for t in ttfs)} (goal <= 5 s)", flush=True)
        summary = {"openai_over_inprocess": best[names[0]] / best[names[1]], "time_to_first_sample_s": ttfs}

        if args.endpoints == "both":
            cpus = sorted(os.sched_getaffinity(0))
            half = max(1, len(cpus) // 2)
            a = stack.enter_context(vllm_serve(model.path, served_name=SERVED, log=logs / "serve-a.log", cpus=cpus[:half]))
            b = stack.enter_context(vllm_serve(model.path, served_name=SERVED, log=logs / "serve-b.log",
                                               cpus=cpus[half:] or cpus))
            two = OpenAIOptions(endpoints=(a, b), concurrency=total)
            api2 = OpenAISampler(served_model(SERVED, two), seed=0, options=two)
            variants2 = {"openai backend, 2 servers (half the CPUs each)": _tokens(api2, requests, params),
                         "openai backend, 1 server (all CPUs)": _tokens(api, requests, params)}
            _tokens(api2, requests, params)()
            best2, rounds2 = wall_only(*compare(variants2, args.rounds))
            n2 = list(variants2)
            print(ratio_line("2 endpoints / 1 endpoint", n2[0], n2[1], best2, rounds2, "(report)"), flush=True)
            print(f"  requests per endpoint (last call): {api2.requests_per_endpoint}", flush=True)
            summary["two_over_one_endpoint"] = best2[n2[0]] / best2[n2[1]]
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
