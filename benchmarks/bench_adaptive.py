"""Two-stage adaptive sampling against fixed n, simulated with known per-problem success probabilities.

Each simulated dataset draws every problem's samples anew from its known probability p_i (the
problems stay fixed, as in a rerun of one benchmark). Two ways to spend samples are compared:

* fixed: ``--fixed`` samples per problem (16), the usual unbiased estimators;
* adaptive: a pilot of ``--pilot`` samples per problem, then ``allocate``'s second stage (at least k
  samples), and ``TwoStage.estimate``: the pilot's and the second stage's fixed-n estimates, weighted
  by the design's weight (``bonbench.metrics.adaptive``).

For each metric it prints, over ``--datasets`` simulated datasets:

* the bias of each estimate (mean estimate minus the dataset's true value) with its Monte Carlo
  standard error: unbiased means |bias| within about 2 standard errors;
* the mean 95% CI half-width (percentile bootstrap over problems, as ``bonbench report``) of
  adaptive at several total budgets, as a ratio to fixed n's; and the budget at which adaptive
  first reaches fixed n's width, as a share of fixed n's samples (goal <= 50% on pass@1);
* beside each, the half-width of a fixed-n run that spends the same (n = the spend per problem);
* how much of fixed n's CI is the spread between problems, which no number of samples per problem
  can narrow: the half-width with infinitely many samples per problem, as a share of fixed n's.

Profiles: ``gemma-math500`` (default): the embedded model's MATH-500 run ``d02504c4ad29``
(vllm, T = 0.7, n = 4: 475 problems with 0 correct, 20 with 1, 5 with 2), each problem's p drawn
once from its posterior under a beta-binomial prior fitted to those counts; ``--profile RUN_DIR``:
any stored run's grades, the same way; ``uniform``: p ~ U(0, 1), where problems are mixed and
adaptive sampling has most to gain. Verifier scores for bon@k: N(1, 1) for correct samples, N(0, 1)
for wrong ones; wrong answers fall into classes with geometric sizes (maj@k). Usage:

    python benchmarks/bench_adaptive.py [--profile gemma-math500|uniform|RUN_DIR] [--datasets 200]

With ``--targets 1.0,1.25,...`` it measures the half-width target instead (``--adaptive
pilot=P,halfwidth=H[,confidence=Q]``: ``allocate_halfwidth``, or ``allocate_halfwidth_votes`` on
maj@k and bon@k), on ``--target-metric`` (pass@1 by default) at each ``--confidence`` (0.5 by
default): H is each multiple of fixed n's expected 95% CI half-width (on pass@1 from the known p's:
Z95 * sqrt((Var(p) + mean p (1 - p) / n) / problems); on another metric the root of the mean
variance over the problems of 20 fixed-n datasets), the same H for every dataset as a user would
ask for it. For each H and Q it prints how often the pilots put H out of reach (the run stops there
under ``fallback=stop``) and how often every run, finished as ``fallback=cap`` does, meets H; over
the datasets that go on: how often the achieved half-width meets H, the mean achieved, predicted
and expected half-widths, the bias (of the runs that go on, and of every run), and the samples spent
beside fixed n = 16's (on pass@1 also beside the smallest fixed n whose expected half-width reaches H).

This script measures; it asserts nothing (the goals are printed next to the figures).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bonbench.metrics.adaptive import Z95, HalfWidth, TwoStage, allocate, allocate_halfwidth
from bonbench.metrics.adaptive_votes import Pilot, allocate_halfwidth_votes
from bonbench.metrics.bootstrap import bootstrap_ci
from bonbench.metrics.maj import maj_curve
from bonbench.metrics.pass_bon import bon_curve, pass_curve

GEMMA_MATH500 = {0: 475, 1: 20, 2: 5}  # correct of 4 per problem, run d02504c4ad29 (module docstring)
SHARES = (0.25, 0.375, 0.5, 0.625, 0.75, 1.0)


def _beta_binomial_fit(counts: dict[int, int], n: int) -> tuple[float, float]:
    """Maximum-likelihood Beta(a, b) of a beta-binomial from a histogram of correct counts (grid search)."""
    best, arg = -math.inf, (0.5, 0.5)
    for a in np.geomspace(0.01, 20, 120):
        for b in np.geomspace(0.1, 400, 160):
            ll = sum(c * (math.lgamma(n + 1) - math.lgamma(s + 1) - math.lgamma(n - s + 1) + math.lgamma(s + a)
                          + math.lgamma(n - s + b) - math.lgamma(n + a + b) + math.lgamma(a + b) - math.lgamma(a)
                          - math.lgamma(b)) for s, c in counts.items())
            if ll > best:
                best, arg = ll, (float(a), float(b))
    return arg


def _run_counts(run: Path) -> tuple[dict[int, int], int]:
    """Histogram of correct counts per problem, and n, from a stored run's grades."""
    got: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    for path in sorted((run / "grades").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            seen[row["problem_id"]] += 1
            got[row["problem_id"]] += int(bool(row.get("correct")))
    ns = set(seen.values())
    if len(ns) != 1:
        sys.exit(f"error: {run} has problems with different n ({sorted(ns)[:5]}); pick a run with one n")
    return dict(Counter(got[p] for p in seen)), ns.pop()


def profile(name: str, rng: np.random.Generator) -> tuple[np.ndarray, str]:
    """Per-problem success probabilities, and a line saying where they came from."""
    if name == "uniform":
        return rng.uniform(0, 1, 500), "uniform: p ~ U(0, 1), 500 problems"
    counts, n = (GEMMA_MATH500, 4) if name == "gemma-math500" else _run_counts(Path(name))
    a, b = _beta_binomial_fit(counts, n)
    ps = np.concatenate([rng.beta(a + s, b + n - s, c) for s, c in sorted(counts.items())])
    return ps, (f"{name}: {sum(counts.values())} problems, n = {n}, correct counts {dict(sorted(counts.items()))}; "
                f"prior Beta({a:.3f}, {b:.2f}), mean p {ps.mean():.4f}")


Part = tuple[list[np.ndarray], list[np.ndarray], list[list[int]]]  # per problem: correct, scores, answers


def draw(ps: np.ndarray, sizes: Sequence[int], rng: np.random.Generator) -> Part:
    """``sizes[i]`` samples of problem i: correct, verifier score, answer class (0 is the right one)."""
    z = [(rng.random(m) < p).astype(float) for p, m in zip(ps, sizes, strict=True)]
    scores = [rng.normal(x, 1.0) for x in z]
    answers = [[0 if c else int(w) for c, w in zip(x, rng.geometric(0.35, x.size), strict=True)] for x in z]
    return z, scores, answers


def values(part: Part, metric: str, k: int) -> np.ndarray:
    """Each problem's fixed-n estimate of ``metric`` from its samples in ``part``."""
    z, scores, answers = part
    if metric == "pass@1":
        return pass_curve(z, [1])[:, 0]
    if metric.startswith("pass@"):
        return pass_curve(z, [k])[:, 0]
    if metric.startswith("bon@"):
        out = np.empty(len(z))
        for m in {x.size for x in z}:  # bon_curve takes one n at a time as a matrix
            idx = [i for i, x in enumerate(z) if x.size == m]
            out[idx] = bon_curve([scores[i] for i in idx], [z[i] for i in idx], [k])[:, 0]
        return out
    return maj_curve(answers, z, [k])[:, 0]


def truth(ps: np.ndarray, k: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Each metric's value per problem: exact for pass, from 2,000 samples for bon and maj."""
    big = draw(ps, [2000] * ps.size, rng)
    return {"pass@1": ps, f"pass@{k}": 1 - (1 - ps) ** k, f"bon@{k}": values(big, f"bon@{k}", k),
            f"maj@{k}": values(big, f"maj@{k}", k)}


def half_width(v: np.ndarray) -> float:
    lo, hi = bootstrap_ci(v, n_boot=500, seed=0)
    return float(hi - lo) / 2


def simulate(ps: np.ndarray, args: argparse.Namespace) -> None:
    rng = np.random.default_rng(args.seed)
    k, P = args.pilot, ps.size
    metrics = ["pass@1", f"pass@{k}", f"bon@{k}", f"maj@{k}"]
    true = truth(ps, k, rng)
    fixed_total = args.fixed * P
    rows: dict[str, dict[str, list[float]]] = {m: {} for m in metrics}
    for d in range(args.datasets):
        fixed = draw(ps, [args.fixed] * P, rng)
        pilot = draw(ps, [args.pilot] * P, rng)
        s1 = [int(x.sum()) for x in pilot[0]]
        for m in metrics:
            v = values(fixed, m, k)
            rows[m].setdefault("fixed", []).append(float(v.mean()))
            rows[m].setdefault("fixed hw", []).append(half_width(v))
            at_pilot = values(pilot, m, k)
            for share in SHARES:
                budget = max(int(share * fixed_total) - args.pilot * P, 0)
                designs = allocate(s1, args.pilot, budget, floor=1 if m == "pass@1" else k, cap=args.cap)
                second = draw(ps, [dz.second[c] for dz, c in zip(designs, s1, strict=True)], rng)
                at_second = values(second, m, k)
                est = np.array([dz.estimate(a, b) for dz, a, b in zip(designs, at_pilot, at_second, strict=True)])
                spent = sum(dz.size(c) for dz, c in zip(designs, s1, strict=True))
                rows[m].setdefault(f"{share}", []).append(float(est.mean()))
                rows[m].setdefault(f"{share} hw", []).append(half_width(est))
                rows[m].setdefault(f"{share} spent", []).append(spent / fixed_total)
                same = max(round(spent / P), 1 if m == "pass@1" else k)  # fixed n at the same spend
                rows[m].setdefault(f"{share} same", []).append(half_width(values(draw(ps, [same] * P, rng), m, k)))
        print(f"  dataset {d + 1}/{args.datasets}", file=sys.stderr, flush=True)
    report(rows, true, P, args)


def report(rows: dict[str, dict[str, list[float]]], true: dict[str, np.ndarray], P: int,
           args: argparse.Namespace) -> None:
    R = args.datasets
    true_mean = {m: float(v.mean()) for m, v in true.items()}
    for m, r in rows.items():
        hw_fixed = float(np.mean(r["fixed hw"]))
        between = float(np.std(true[m], ddof=1))
        floor = 1.959963984540054 * between / math.sqrt(P)
        print(f"\n{m}: true {true_mean[m]:.4f}; fixed n = {args.fixed}: bias {np.mean(r['fixed']) - true_mean[m]:+.5f} "
              f"(MC s.e. {np.std(r['fixed']) / math.sqrt(R):.5f}), CI half-width {hw_fixed:.4f}")
        print(f"  spread between problems alone: half-width {floor:.4f} = {floor / hw_fixed:.0%} of fixed n's "
              f"(its variance share {floor ** 2 / hw_fixed ** 2:.0%})")
        reached = None
        for share in SHARES:
            got = r[f"{share}"]
            hw, spent = float(np.mean(r[f"{share} hw"])), float(np.mean(r[f"{share} spent"]))
            if reached is None and hw <= hw_fixed:
                reached = spent
            same = float(np.mean(r[f"{share} same"]))
            print(f"  adaptive, {spent:5.1%} of fixed n's samples: bias {np.mean(got) - true_mean[m]:+.5f} "
                  f"(MC s.e. {np.std(got) / math.sqrt(R):.5f}), half-width / fixed n's {hw / hw_fixed:.3f}x "
                  f"(fixed n at this spend: {same / hw_fixed:.3f}x)")
        print(f"  -> adaptive reaches fixed n's CI width with "
              f"{'more than all' if reached is None else f'{reached:.0%}'} of its samples (goal <= 50% on pass@1)")


def expected_halfwidth(ps: np.ndarray, n: float) -> float:
    """Fixed n's expected 95% CI half-width on pass@1 from the known p's (between + within variance)."""
    return Z95 * math.sqrt((float(np.var(ps, ddof=1)) + float(np.mean(ps * (1 - ps))) / n) / ps.size)


def reference_halfwidth(ps: np.ndarray, metric: str, k: int, n: int, rng: np.random.Generator,
                        draws: int = 20) -> float:
    """Fixed n's expected 95% CI half-width on ``metric``: exact on pass@1, else Z95 times the root of
    the mean (over ``draws`` fixed-n datasets) of the problems' sample variance over the problems."""
    if metric == "pass@1":
        return expected_halfwidth(ps, n)
    spread = [float(np.var(values(draw(ps, [n] * ps.size, rng), metric, k), ddof=1)) for _ in range(draws)]
    return Z95 * math.sqrt(float(np.mean(spread)) / ps.size)


def _allocate(part: Part, metric: str, k: int, h: float, confidence: float,
              args: argparse.Namespace) -> tuple[list[TwoStage], HalfWidth]:
    """A half-width target's designs from the pilots in ``part``, as ``bonbench run`` decides them."""
    if metric.startswith("pass@"):
        return allocate_halfwidth([int(x.sum()) for x in part[0]], args.pilot, h, k=k, floor=k, cap=args.cap,
                                  confidence=confidence)
    pilots = [Pilot(tuple(float(c) for c in z), tuple(a), tuple(float(x) for x in s)) for z, s, a in zip(*part, strict=True)]
    return allocate_halfwidth_votes(pilots, metric.split("@")[0], h, k=k, floor=k, cap=args.cap, confidence=confidence)


def simulate_targets(ps: np.ndarray, args: argparse.Namespace) -> None:
    """The half-width target on ``--target-metric`` at each ``--confidence`` (module docstring)."""
    rng = np.random.default_rng(args.seed)
    P, metric = ps.size, args.target_metric
    k = int(metric.split("@")[1])
    true = ps if metric == "pass@1" else 1 - (1 - ps) ** k if metric.startswith("pass@") else values(
        draw(ps, [2000] * ps.size, rng), metric, k)  # the target's truth alone (``truth`` computes every metric)
    reference = reference_halfwidth(ps, metric, k, args.fixed, rng)
    print(f"{metric}: true {true.mean():.4f}; fixed n = {args.fixed}: expected half-width {reference:.5f}; with n = "
          f"{args.pilot + args.cap} (pilot + cap): {reference_halfwidth(ps, metric, k, args.pilot + args.cap, rng):.5f}; "
          f"spread between problems alone: {Z95 * math.sqrt(float(np.var(true, ddof=1)) / P):.5f}")
    rows: dict[tuple[float, float], dict[str, list[float]]] = {}
    for d in range(args.datasets):
        pilot = draw(ps, [args.pilot] * P, rng)
        s1 = [int(x.sum()) for x in pilot[0]]
        at_pilot = values(pilot, metric, k)
        for multiple, confidence in itertools.product(args.targets, args.confidence):
            h = multiple * reference
            designs, hw = _allocate(pilot, metric, k, h, confidence, args)
            r = rows.setdefault((multiple, confidence), {})
            # the second stage is drawn either way: with fallback=cap an out-of-reach run goes on too
            second = draw(ps, [dz.second[c] for dz, c in zip(designs, s1, strict=True)], rng)
            est = np.array([dz.estimate(a, b) for dz, a, b in zip(designs, at_pilot, values(second, metric, k),
                                                                   strict=True)])
            got = half_width(est)
            for key, value in (("reached", float(hw.reaches(h))), ("estimate with fallback", float(est.mean())),
                               ("met with fallback", float(got <= h))):
                r.setdefault(key, []).append(value)
            if not hw.reaches(h):
                continue
            for key, value in (("estimate", float(est.mean())), ("achieved", got), ("met", float(got <= h)),
                               ("predicted", hw.predicted), ("expected", hw.expected or hw.predicted),
                               ("spent", sum(dz.size(c) for dz, c in zip(designs, s1, strict=True)) / P)):
                r.setdefault(key, []).append(value)
        print(f"  dataset {d + 1}/{args.datasets}", file=sys.stderr, flush=True)
    for (multiple, confidence), r in rows.items():
        _report_target(r, multiple, confidence, reference, ps, true, args)


def _report_target(r: dict[str, list[float]], multiple: float, confidence: float, reference: float, ps: np.ndarray,
                   true: np.ndarray, args: argparse.Namespace) -> None:
    h = multiple * reference
    print(f"\nH = {multiple:g} x fixed n's = {h:.5f}, confidence {confidence:g}: out of reach in "
          f"{1 - np.mean(r['reached']):.0%} of {len(r['reached'])} datasets (the run stops after the pilot with "
          f"fallback=stop); achieved <= H in {np.mean(r['met with fallback']):.0%} of all (fallback=cap)")
    every = r["estimate with fallback"]
    print(f"  bias with fallback=cap (every dataset): {np.mean(every) - true.mean():+.6f} "
          f"(MC s.e. {np.std(every) / math.sqrt(len(every)):.6f})")
    if "achieved" not in r:
        return
    R = len(r["achieved"])
    print(f"  of the {R} that go on: achieved <= H in {np.mean(r['met']):.0%}; achieved half-width "
          f"{np.mean(r['achieved']):.5f} (sd {np.std(r['achieved']):.5f}), predicted {np.mean(r['predicted']):.5f} "
          f"(expected {np.mean(r['expected']):.5f}); bias of these {np.mean(r['estimate']) - true.mean():+.6f} "
          f"(MC s.e. {np.std(r['estimate']) / math.sqrt(R):.6f})")
    spent = float(np.mean(r["spent"]))
    beside = ""
    if args.target_metric == "pass@1":  # the smallest fixed n whose expected half-width reaches h (None: no n does)
        fixed_n = next((n for n in range(1, 4097) if expected_halfwidth(ps, n) <= h), None)
        beside = ("; no fixed n reaches it" if fixed_n is None
                  else f"; {spent / fixed_n:.0%} of fixed n = {fixed_n}'s, the least reaching H (expected)")
    print(f"  samples per problem {spent:.2f}: {spent / args.fixed:.0%} of fixed n = {args.fixed}'s{beside}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="gemma-math500", help="gemma-math500, uniform, or a run directory")
    ap.add_argument("--datasets", type=int, default=200, help="simulated datasets")
    ap.add_argument("--fixed", type=int, default=16, help="samples per problem of the fixed-n baseline")
    ap.add_argument("--pilot", type=int, default=4, help="pilot samples per problem (also the k of pass@k/bon@k/maj@k)")
    ap.add_argument("--cap", type=int, default=64, help="most second-stage samples one problem gets")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--targets", type=lambda t: [float(x) for x in t.split(",")], default=None,
                    help="half-width targets, as multiples of fixed n's expected half-width (1.0,1.25,...)")
    ap.add_argument("--target-metric", default="pass@1", help="the metric of --targets: pass@1, pass@k, maj@k or bon@k")
    ap.add_argument("--confidence", type=lambda t: [float(x) for x in t.split(",")], default=[0.5],
                    help="with --targets: the probabilities of meeting H asked for (0.5,0.9)")
    args = ap.parse_args()
    ps, where = profile(args.profile, np.random.default_rng(args.seed))
    print(f"profile {where}; {args.datasets} datasets; fixed n = {args.fixed}; pilot {args.pilot}")
    if args.targets:
        simulate_targets(ps, args)
    else:
        simulate(ps, args)


if __name__ == "__main__":
    main()
