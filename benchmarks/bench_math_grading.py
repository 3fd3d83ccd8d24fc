"""Benchmark: MathGrader (canonical-answer dedupe + worker processes) vs per-sample is_equiv.

Synthesises 32 sampled completions for each MATH test problem (the real gold answers from the
data mirror): the gold, textual rewritings of it (spacing, \\dfrac, "x = ", units, decimals),
common wrong values (off by one, a digit changed), and unparseable junk (no answer, a truncated
\\boxed), drawn with heavy duplication as real samples have. Then

* MathGrader grades all problems x 32 samples;
* the baseline calls ``is_equiv(extract_answer(completion), gold)`` per sample, sequentially, on
  a random subsample of problems (all 32 samples each) when ``--baseline-problems`` is smaller than
  the problem count; its time is scaled by (all samples / subsample samples), and the output says so.
  Its one-time cost (the sympy / math-verify import at the first symbolic comparison) is timed
  before the loop and added once, unscaled (MathGrader's workers pay theirs inside its time).

* a second baseline, math-verify per sample (``parse`` + ``verify``, its own extraction of the
  completion, the gold in a box), runs the same way on a subsample of ``--mv-problems`` problems
  (math-verify is ~20x slower per sample than ``is_equiv``).

Prints the times, the ratios (goal >= 5x against ``is_equiv``), whether every ``is_equiv`` verdict
equals MathGrader's on the same samples (it must), and how many of math-verify's equal MathGrader's
(they may differ where the graders' conventions do). Usage::

    python benchmarks/bench_math_grading.py [--data-dir ../shared/data] [--problems 5000]
        [--samples 32] [--baseline-problems 250] [--mv-problems 100] [--workers N]

It does not test grading accuracy (tests/test_math_grader.py does).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from pathlib import Path

from bonbench.core.records import Problem, Sample
from bonbench.plugins.graders.math import MathGrader
from bonbench.plugins.graders.math_equiv import is_equiv
from bonbench.plugins.graders.math_extract import extract_answer

REPO = Path(__file__).resolve().parents[1]


def rewrites(gold: str) -> list[str]:
    """Equivalent ways a model writes the gold answer (textual, as sampled outputs vary)."""
    out = [gold, gold.replace(" ", ""), " ".join(gold.split()) + " "]
    if "\\frac" in gold:
        out.append(gold.replace("\\frac", "\\dfrac"))
    if "=" not in gold and "," not in gold:
        out.append(f"x = {gold}")
    if re.fullmatch(r"-?\d+", gold):
        out += [f"{gold}.0", f"{gold} \\text{{ units}}"]
    m = re.fullmatch(r"\\frac\{(\d+)\}\{(\d+)\}", gold)
    if m:
        out.append(f"{m.group(1)}/{m.group(2)}")
    return out


def wrong_answers(gold: str, rng: random.Random) -> list[str]:
    """Plausible wrong answers: off by one / doubled for integers, a changed digit otherwise."""
    if re.fullmatch(r"-?\d+", gold):
        n = int(gold)
        return [str(n + 1), str(n - 1), str(2 * n + 1), str(rng.randint(0, 100))]
    digits = [i for i, ch in enumerate(gold) if ch.isdigit()]
    out = ["0", "1", str(rng.randint(2, 50))]
    if digits:
        i = rng.choice(digits)
        out.append(gold[:i] + str((int(gold[i]) + 1) % 10) + gold[i + 1 :])
    return out


JUNK = ["I am not sure how to finish this.", "The answer is $\\boxed{\\frac{1", "So we get", ""]


def completion(answer: str, rng: random.Random) -> str:
    style = rng.randrange(3)
    if style == 0:
        return f"We simplify step by step. The answer is $\\boxed{{{answer}}}$."
    if style == 1:
        return f"Working it out gives the result.\nFinal Answer: The final answer is ${answer}$. I hope it is correct."
    return f"Therefore, the answer is $\\boxed{{{answer}}}$"


def synthesise(rows: list[dict], n_samples: int, seed: int = 0) -> tuple[dict[str, Problem], list[Sample]]:
    problems: dict[str, Problem] = {}
    samples: list[Sample] = []
    for row in rows:
        rng = random.Random(f"{seed}:{row['unique_id']}")
        gold = row["answer"]
        problems[row["unique_id"]] = Problem(id=row["unique_id"], input=row["problem"], target=gold)
        level = int(row["level"].split()[-1]) if row["level"][-1].isdigit() else 3
        right = rewrites(gold)
        wrong = wrong_answers(gold, rng)
        p_right = max(0.1, 0.9 - 0.17 * level)  # harder problems: fewer correct samples
        # real samples concentrate on a few answers: Zipf-like weights over each pool
        right_w = [1 / (k + 1) ** 2 for k in range(len(right))]
        wrong_w = [1 / (k + 1) ** 1.5 for k in range(len(wrong))]
        for idx in range(n_samples):
            u = rng.random()
            if u < p_right:
                text = completion(rng.choices(right, right_w)[0], rng)
            elif u < 0.93:
                text = completion(rng.choices(wrong, wrong_w)[0], rng)
            else:
                text = rng.choice(JUNK)
            samples.append(Sample(row["unique_id"], idx, text, len(text.split()), "stop"))
    return problems, samples


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--problems", type=int, default=5000)
    ap.add_argument("--samples", type=int, default=32)
    ap.add_argument("--baseline-problems", type=int, default=250)
    ap.add_argument("--mv-problems", type=int, default=100, help="problems of math-verify's subsample (0: skip it)")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    path = Path(args.data_dir) / "math" / "test.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()][: args.problems]
    problems, samples = synthesise(rows, args.samples, args.seed)
    n_distinct = len({(s.problem_id, s.completion) for s in samples})
    print(f"{len(problems)} problems x {args.samples} samples = {len(samples)} samples "
          f"({n_distinct} distinct completions)")

    grader = MathGrader(workers=args.workers)
    t0 = time.perf_counter()
    grades = grader.grade(problems, samples)
    t_grader = time.perf_counter() - t0
    n_errors = sum(g.error is not None for g in grades)
    print(f"MathGrader ({grader.workers} workers, dedupe): {t_grader:.1f} s for {len(samples)} samples; "
          f"{sum(bool(g.correct) for g in grades)} correct, {n_errors} errors")

    rng = random.Random(args.seed)
    chosen = set(rng.sample(sorted(problems), min(args.baseline_problems, len(problems))))
    base_idx = [i for i, s in enumerate(samples) if s.problem_id in chosen]
    # the baseline's one-time cost (importing sympy/math-verify at its first symbolic comparison,
    # ~1 s) is timed on its own and added once: inside the subsample it would be scaled up with it
    t0 = time.perf_counter()
    is_equiv("x^2+2x+1", "(x+1)^2")
    t_warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    base = []
    for i in base_idx:
        s = samples[i]
        pred = extract_answer(s.completion)
        base.append(pred is not None and is_equiv(pred, problems[s.problem_id].target))
    t_base_sub = time.perf_counter() - t0
    scale = len(samples) / max(1, len(base_idx))
    t_base = t_warm + t_base_sub * scale
    if len(base_idx) < len(samples):
        print(f"baseline (is_equiv per sample, sequential): {t_base_sub:.1f} s on a random subsample of "
              f"{len(chosen)} problems ({len(base_idx)} samples), scaled x{scale:.1f}, plus {t_warm:.1f} s "
              f"of one-time sympy import: {t_base:.1f} s")
    else:
        print(f"baseline (is_equiv per sample, sequential): {t_base:.1f} s ({t_warm:.1f} s of it one-time sympy import)")
    mismatches = [(samples[i].key, grades[i].correct, b) for i, b in zip(base_idx, base, strict=True)
                  if bool(grades[i].correct) != b]
    print(f"speedup: {t_base / t_grader:.1f}x (goal >= 5x)")
    print(f"verdicts identical on the {len(base_idx)} baseline samples: {not mismatches}")
    for m in mismatches[:20]:
        print("  mismatch:", m)
    if args.mv_problems > 0:
        math_verify_baseline(problems, samples, grades, t_grader, args)
    return 0 if not mismatches else 1


def math_verify_baseline(problems: dict[str, Problem], samples: list[Sample], grades: list, t_grader: float,
                         args: argparse.Namespace) -> None:
    """math-verify per sample (its own extraction of the completion, the gold in a box), sequential,
    on a random subsample of problems scaled to all samples; prints the ratio and how many verdicts
    equal MathGrader's (those that differ are listed: the graders' conventions differ, see
    docs/math-grading.md, "Against math-verify")."""
    from math_verify import parse, verify

    rng = random.Random(args.seed + 1)
    chosen = set(rng.sample(sorted(problems), min(args.mv_problems, len(problems))))
    idx = [i for i, s in enumerate(samples) if s.problem_id in chosen]
    t0 = time.perf_counter()
    verify(parse("$x+1$"), parse("$1+x$"))  # the import and first-call cost, timed once like the baseline's
    t_warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    verdicts = []
    for i in idx:
        s = samples[i]
        gold = parse("\\boxed{" + problems[s.problem_id].target + "}")
        verdicts.append(bool(verify(gold, parse(s.completion))))
    t_sub = time.perf_counter() - t0
    scale = len(samples) / max(1, len(idx))
    t_mv = t_warm + t_sub * scale
    print(f"math-verify per sample (its own extraction, sequential): {t_sub:.1f} s on a random subsample of "
          f"{len(chosen)} problems ({len(idx)} samples), scaled x{scale:.1f}, plus {t_warm:.1f} s one-time: {t_mv:.1f} s")
    print(f"speedup against math-verify: {t_mv / t_grader:.1f}x")
    differ = [(samples[i].key, bool(grades[i].correct), v) for i, v in zip(idx, verdicts, strict=True)
              if bool(grades[i].correct) != v]
    print(f"verdicts equal to math-verify's on {len(idx) - len(differ)} of {len(idx)} samples")
    for d in differ[:10]:
        print("  differs (MathGrader, math-verify):", d)


if __name__ == "__main__":
    sys.exit(main())
