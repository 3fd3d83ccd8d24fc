"""A real search end to end through the Python API: the embedded model, a trained verifier, MATH-500.

The embedded Gemma 3 270M (base few-shot prompts) on vLLM with prefix caching (``VLLMStepSampler``,
delimiter ``"\\n\\n"``) searches the first ``--problems`` MATH-500 problems with best-of-N and beam
search at ``--n``, ranked by the repository's trained verifier
``learned:results/verifiers/math-gemma-3-270m-head`` read step by step
(``bench_search.PrefixesAsSolutions``: each prefix of steps scored as a whole solution; no trained
PRM can be downloaded here). Each final candidate is graded by the task's own grader (its text cut
where the base model starts a new "Problem:"). Prints, per strategy: problems with a correct
candidate among the N (pass@N), problems whose highest-valued candidate is correct (the last-step
verifier's pick), and the ledger (generated, prompt, cached prompt and verifier tokens; wall time).

Usage: ``python benchmarks/search_math.py [--problems 5 --n 16 --width 4 --iterations 5]``. It
measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict

from bench_search import LEARNED, PrefixesAsSolutions

from bonbench.api.sampler import SamplingParams
from bonbench.api.search.contract import make_strategy
from bonbench.api.search.records import SearchProblem, SearchResult
from bonbench.api.task import Task, get_task
from bonbench.api.verifier import get_verifier
from bonbench.core.models import resolve_model
from bonbench.core.records import Sample
from bonbench.plugins.samplers.vllm import VLLMSampler
from bonbench.plugins.samplers.vllm_steps import VLLMStepSampler, step_engine_args

DELIMITER = "\n\n"


def solution(steps: tuple[str, ...]) -> str:
    """A candidate's text as graded: its steps, up to a step where the base model starts a new problem."""
    kept = []
    for step in steps:
        if step.lstrip().startswith("Problem:"):
            break
        kept.append(step.split("\nProblem:")[0])
    return DELIMITER.join(kept)


def graded(task: Task, problem_id: str, result: SearchResult) -> list[bool]:
    """Whether each candidate's solution is correct, by the task's grader."""
    problems = {p.id: p for p in task.problems if p.id == problem_id}
    samples = [Sample(problem_id, i, solution(c.steps), 0, "stop") for i, c in enumerate(result.candidates)]
    return [bool(g.correct) for g in task.grader.grade(problems, samples)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=5)
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--width", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--step-tokens", type=int, default=96)
    parser.add_argument("--data-dir", default=os.environ.get("BONBENCH_DATA_DIR"))
    args = parser.parse_args()
    task = get_task("math500", data_dir=args.data_dir)
    engine = VLLMSampler(resolve_model(None), seed=0, max_model_len=4096, **step_engine_args())
    step = VLLMStepSampler(engine, SamplingParams(temperature=0.8, max_tokens=args.step_tokens), DELIMITER)
    whole = VLLMStepSampler(engine, SamplingParams(temperature=0.8, max_tokens=args.step_tokens * (args.iterations + 1)),
                            DELIMITER)  # best-of-N's one continuation per solution gets beam's whole budget
    scorer = PrefixesAsSolutions(get_verifier(LEARNED), DELIMITER)
    runs = {"best_of_n": (make_strategy("best_of_n", agg="last"), whole),
            "beam": (make_strategy("beam", width=args.width, max_iterations=args.iterations, agg="last"), step)}
    total: dict[str, dict[str, float]] = {name: defaultdict(float) for name in runs}
    began = time.perf_counter()
    for problem in task.problems[:args.problems]:
        search = SearchProblem(problem.id, task.render(problem, "base").text, problem.input)
        for name, (strategy, sampler) in runs.items():
            result = strategy.search(search, sampler, scorer, n=args.n, seed=0)
            correct = graded(task, problem.id, result)
            best = max(range(len(result.candidates)), key=lambda i: result.candidates[i].value)
            row, cost = total[name], result.cost
            row["pass"] += any(correct)
            row["picked"] += correct[best]
            row["right"] += sum(correct)
            for key in ("generated_tokens", "prompt_tokens", "cached_prompt_tokens", "verifier_tokens", "wall_s"):
                row[key] += getattr(cost, key)
            print(f"{problem.id} {name}: {sum(correct)}/{len(correct)} correct, pick {'right' if correct[best] else 'wrong'}"
                  f" (value {result.candidates[best].value:.3f}), {cost.generated_tokens} tokens, {cost.wall_s:.0f} s",
                  flush=True)
    print(f"\n{args.problems} MATH-500 problems, n={args.n}, beam width {args.width}, {args.iterations} iterations, "
          f"{args.step_tokens} tokens per step; {time.perf_counter() - began:.0f} s; load {os.getloadavg()[0]:.1f}")
    print(f"{'strategy':<11}{'pass@N':>7}{'picked':>7}{'correct':>8}{'gen tok':>9}{'prompt tok':>11}{'cached':>9}"
          f"{'verifier tok':>13}{'wall s':>8}")
    for name, row in total.items():
        print(f"{name:<11}{row['pass']:>7.0f}{row['picked']:>7.0f}{row['right']:>8.0f}{row['generated_tokens']:>9.0f}"
              f"{row['prompt_tokens']:>11.0f}{row['cached_prompt_tokens']:>9.0f}{row['verifier_tokens']:>13.0f}"
              f"{row['wall_s']:>8.0f}")
    engine.close()


if __name__ == "__main__":  # vLLM may spawn processes: the guard keeps them from rerunning this
    main()
