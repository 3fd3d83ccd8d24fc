"""The search strategies' own overhead: everything but the model and verifier calls, on scripted trees.

Each strategy runs at ``--n`` on the scripted tree sampler and scorer of the tests
(``tests/search_scripts.py``), whose calls cost nothing but ``--model-ms`` of sleep each, a stand-in for
a model call. The search records the seconds spent inside the sampler and the scorer
(``SearchCost.model_s``); the rest of its wall time is the strategy's overhead (``overhead_s``): the
tree, the score cache, the ranking and resampling. Prints, per strategy: nodes, calls, overhead per
node in microseconds, and overhead as a share of the search's time at the given model cost (the
issue's limit: < 5 %). With ``--model-ms 0`` the share is meaningless (there is no model); the
microseconds per node are the figure to compare.

Usage: ``python benchmarks/bench_search.py [--n 16 --depth 8 --model-ms 5 --repeat 5]``. It measures;
it asserts nothing.

``--engine vllm`` runs the real thing instead: the embedded Gemma 3 270M on vLLM with prefix caching
(``VLLMStepSampler``), best-of-N and beam search (``--width``) at ``--n`` on the first ``--problems``
MATH-500 problems (base few-shot prompts, delimiter ``"\n\n"``), scored by ``--scorer`` (a verifier that scores
partial solutions, e.g. ``prm:SOURCE``; by default, since no trained PRM can be downloaded here, the
repository's trained verifier ``learned:results/verifiers/math-gemma-3-270m-head``, an outcome
verifier on the Gemma backbone, reading each prefix of steps as a whole solution:
``PrefixesAsSolutions``). It prints, per strategy, the seconds in the sampler, in the scorer and in
the strategy itself, the generated tokens, the prompt tokens read and how many of them the prefix
cache served, and then the two ratios of issue 34: beam's wall time per generated token over
best-of-N's, and the strategies' overhead share. It also grades every final candidate with the task's
grader (its text cut where the base model starts a new "Problem:") and prints, per strategy, the
problems with a right candidate among the N and those where the verifier's pick (the highest
value) is right: a real search end to end through the Python API.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from search_scripts import SeededSampler, TableScorer, hashed_score

from bonbench.api.search.contract import make_strategy, partial_scorer
from bonbench.api.search.records import Continuation, Prefix, SearchProblem, StepScores

LEARNED = "learned:" + str(Path(__file__).resolve().parent.parent / "results/verifiers/math-gemma-3-270m-head")
STRATEGIES = {"best_of_n": {}, "beam": {"width": 4}, "dvts": {"width": 4}, "particle_filtering": {}}


class Timed:
    """A step sampler or scorer with the seconds spent in its calls added up (``seconds``)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.seconds = inner, 0.0
        self.delimiter = getattr(inner, "delimiter", "")

    def continue_prefixes(self, prefixes: Sequence[Prefix]) -> list[Continuation]:
        began = time.perf_counter()
        try:
            return list(self.inner.continue_prefixes(prefixes))
        finally:
            self.seconds += time.perf_counter() - began

    def score_steps(self, questions: Sequence[str], steps: Sequence[Sequence[str]]) -> list[StepScores]:
        began = time.perf_counter()
        try:
            return list(self.inner.score_steps(questions, steps))
        finally:
            self.seconds += time.perf_counter() - began


class PrefixesAsSolutions:
    """A verifier of whole solutions read as a scorer of partial ones: step k's score is the verifier's
    score of the first k steps joined by the delimiter, as if they were a whole solution (an outcome
    verifier's value of a partial solution). Each (question, prefix) is scored once."""

    def __init__(self, verifier: Any, delimiter: str = "\n\n") -> None:
        self.verifier, self.delimiter = verifier, delimiter
        self.memo: dict[tuple[str, tuple[str, ...]], float] = {}

    def score_steps(self, questions: Sequence[str], steps: Sequence[Sequence[str]]) -> list[StepScores]:
        from bonbench.core.records import Problem, Sample

        wanted = {(q, tuple(ss[:k + 1])) for q, ss in zip(questions, steps, strict=True) for k in range(len(ss))}
        new = sorted(wanted - set(self.memo))
        ids = {q: f"q{i}" for i, q in enumerate(dict.fromkeys(q for q, _ in new))}
        problems = {pid: Problem(pid, q, "") for q, pid in ids.items()}
        samples = [Sample(ids[q], i, self.delimiter.join(prefix), 0, "stop") for i, (q, prefix) in enumerate(new)]
        got = self.verifier.score(problems, samples, {}) if samples else []
        for key, score in zip(new, got, strict=True):
            self.memo[key] = score.score
        tokens, out = sum(score.tokens or 0 for score in got), []
        for q, ss in zip(questions, steps, strict=True):
            out.append(StepScores(tuple(self.memo[(q, tuple(ss[:k + 1]))] for k in range(len(ss))), tokens, len(got)))
            tokens, got = 0, []  # the new prefixes' cost is counted once, on the first list
        return out


def solution(steps: Sequence[str], delimiter: str = "\n\n") -> str:
    """A candidate's text as graded: its steps, up to where the base model starts a new problem."""
    kept = []
    for step in steps:
        if step.lstrip().startswith("Problem:"):
            break
        kept.append(step.split("\nProblem:")[0])
    return delimiter.join(kept)


def graded(task: Any, problem: Any, candidates: Sequence[Any]) -> list[bool]:
    """Whether each candidate's solution is right, by the task's own grader."""
    from bonbench.core.records import Sample

    samples = [Sample(problem.id, i, solution(c.steps), 0, "stop") for i, c in enumerate(candidates)]
    return [bool(g.correct) for g in task.grader.grade({problem.id: problem}, samples)]


def real(args: argparse.Namespace) -> None:
    """The ``--engine vllm`` measurement (module docstring)."""
    from bonbench.api.sampler import SamplingParams
    from bonbench.api.task import get_task
    from bonbench.api.verifier import get_verifier
    from bonbench.core.models import resolve_model
    from bonbench.plugins.samplers.vllm import VLLMSampler
    from bonbench.plugins.samplers.vllm_steps import VLLMStepSampler, step_engine_args

    task = get_task("math500", data_dir=args.data_dir, level=args.level)
    model = resolve_model(None)
    scorer = (partial_scorer(get_verifier(args.scorer), args.scorer) if args.scorer
              else PrefixesAsSolutions(get_verifier(LEARNED)))
    began = time.perf_counter()
    engine = VLLMSampler(model, seed=0, max_model_len=4096, **step_engine_args())
    print(f"engine start {time.perf_counter() - began:.0f} s; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    step = VLLMStepSampler(engine, SamplingParams(temperature=0.8, max_tokens=args.step_tokens), "\n\n")
    step.continue_prefixes([Prefix(task.render(task.problems[0], "base").text, (), seed=0)])  # warm up
    runs = {"best_of_n": make_strategy("best_of_n", agg="last"),
            "beam": make_strategy("beam", width=args.width, max_iterations=args.iterations, agg="last")}
    total: dict[str, dict[str, float]] = {name: defaultdict(float) for name in runs}
    for problem in task.problems[:args.problems]:
        search = SearchProblem(problem.id, task.render(problem, "base").text, problem.input)
        for name, strategy in runs.items():
            sampler, timed_scorer = Timed(step), Timed(scorer)
            if name == "best_of_n":  # one whole solution per continuation: as many tokens as beam's steps allow
                sampler.inner = VLLMStepSampler(engine, SamplingParams(
                    temperature=0.8, max_tokens=args.step_tokens * (args.iterations + 1)), "\n\n")
            got = strategy.search(search, sampler, timed_scorer, n=args.n, seed=0)
            row = total[name]
            for key in ("wall_s", "generated_tokens", "prompt_tokens", "cached_prompt_tokens", "sampler_calls"):
                row[key] += getattr(got.cost, key)
            row["sampler_s"] += sampler.seconds
            row["scorer_s"] += timed_scorer.seconds
            row["overhead_s"] += got.cost.overhead_s
            right = graded(task, problem, got.candidates)
            best = max(range(len(right)), key=lambda i: got.candidates[i].value)  # last-step verifier's pick
            row["pass"] += any(right)
            row["picked"] += right[best]
            row["right"] += sum(right)
            print(f"  {problem.id} {name}: {got.cost.wall_s:.1f} s, {got.cost.generated_tokens} tokens, "
                  f"{sum(right)}/{len(right)} right, the pick {'right' if right[best] else 'wrong'}", flush=True)
    print(f"n={args.n} width={args.width} iterations={args.iterations} step tokens={args.step_tokens} "
          f"problems={args.problems} level={args.level}; load {os.getloadavg()[0]:.1f}")
    print(f"{'strategy':<11}{'wall s':>8}{'sampler s':>10}{'scorer s':>9}{'own s':>7}{'gen tok':>8}{'s/1k gen':>9}"
          f"{'prompt tok':>11}{'cached':>8}{'recomputed':>11}")
    for name, row in total.items():
        per_k = row["wall_s"] / max(row["generated_tokens"], 1) * 1000
        print(f"{name:<11}{row['wall_s']:>8.1f}{row['sampler_s']:>10.1f}{row['scorer_s']:>9.1f}{row['overhead_s']:>7.2f}"
              f"{row['generated_tokens']:>8.0f}{per_k:>9.2f}{row['prompt_tokens']:>11.0f}{row['cached_prompt_tokens']:>8.0f}"
              f"{row['prompt_tokens'] - row['cached_prompt_tokens']:>11.0f}")
    bon, beam = total["best_of_n"], total["beam"]
    for label, key in (("wall", "wall_s"), ("sampler", "sampler_s")):
        ratio = (beam[key] / beam["generated_tokens"]) / (bon[key] / bon["generated_tokens"])
        print(f"beam / best-of-N, {label} seconds per generated token: {ratio:.2f} (issue 34: <= 1.5)")
    for name, row in total.items():
        print(f"{name} overhead share: {row['overhead_s'] / row['wall_s']:.2%} (issue 34: < 5%)")
    for name, row in total.items():
        print(f"{name}: a right candidate on {row['pass']:.0f} of {args.problems} problems, the verifier's pick right on "
              f"{row['picked']:.0f}; {row['right']:.0f} of {args.problems * args.n} candidates right")
    engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--model-ms", type=float, default=5.0)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--engine", choices=("scripted", "vllm"), default="scripted")
    parser.add_argument("--problems", type=int, default=2)
    parser.add_argument("--level", type=int, default=None, help="only MATH-500 problems of this level (1-5)")
    parser.add_argument("--width", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--step-tokens", type=int, default=48)
    parser.add_argument("--scorer", default=None, help="a verifier that scores partial solutions (default: module docstring)")
    parser.add_argument("--data-dir", default=os.environ.get("BONBENCH_DATA_DIR"))
    args = parser.parse_args()
    if args.engine == "vllm":
        real(args)
        return
    problem = SearchProblem("bench", "Solve it.", "Solve it.")
    delay = args.model_ms / 1000
    print(f"n={args.n} depth={args.depth} model call={args.model_ms} ms (sampler and scorer each)")
    print(f"{'strategy':<20}{'nodes':>7}{'calls':>7}{'overhead/node us':>18}{'overhead share':>16}")
    for name, options in STRATEGIES.items():
        per_node, shares, nodes, calls = [], [], 0, 0
        for seed in range(args.repeat):
            sampler = SeededSampler([args.n] + [4] * (args.depth - 1), delay_s=delay)
            scorer = TableScorer(lambda p: hashed_score(p, "bench"), delay_s=delay)
            got = make_strategy(name, **options).search(problem, sampler, scorer, n=args.n, seed=seed)
            nodes, calls = len(got.tree), sampler.calls + scorer.calls
            per_node.append(got.cost.overhead_s / nodes * 1e6)
            shares.append(got.cost.overhead_s / got.cost.wall_s)
        print(f"{name:<20}{nodes:>7}{calls:>7}{statistics.median(per_node):>18.1f}{statistics.median(shares):>15.2%}")


if __name__ == "__main__":  # vLLM may spawn processes: the guard keeps them from rerunning this
    main()
