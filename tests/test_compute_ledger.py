"""Verifier cost is data: every verifier's rows carry tokens and calls, the compute ledger adds up the
policy's and the verifiers' tokens per problem from the stored rows alone, and ``bonbench report``
prints it under the unchanged metrics table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bonbench.api.task import Task
from bonbench.api.verifier import get_verifier
from bonbench.core.config import RunConfig
from bonbench.core.records import Grade, Problem, Prompt, Sample, Score
from bonbench.pipeline.ledger import add_known, compute_ledger
from bonbench.pipeline.prepared import open_run, prepare
from bonbench.pipeline.report import print_metrics
from bonbench.plugins.rewards.base import RewardVerifier
from bonbench.plugins.rewards.imdb import ImdbSentimentReward

PROBLEMS = {"q/0": Problem("q/0", "What is 2 + 2?", "4"), "q/1": Problem("q/1", "What is 3 + 4?", "7")}


class _NoGrader:
    name, version = "none", 1

    def grade(self, problems: object, samples: list[Sample]) -> list[Grade]:
        return [Grade(s.problem_id, s.sample_idx, self.name, self.version, correct=None) for s in samples]


def _run(tmp_path: Path):
    task = Task(name="ctoy", version=1, problems=tuple(PROBLEMS.values()), render=lambda p, style: Prompt(p.id, text=p.input),
                grader=_NoGrader(), prompt_id="ctoy-v1", default_metrics=("pass@1",))
    run = prepare(task, RunConfig(task="ctoy", model="scripted", backend="scripted", n=2, metrics=("pass@1",)), tmp_path)
    open_run(run)
    return run


def test_builtin_verifiers_read_no_model_and_record_zero_cost() -> None:
    samples = [Sample("q/0", 0, "4", 1, "stop", -0.5), Sample("q/0", 1, "5", 1, "stop", -2.0)]
    grades = {s.key: Grade(s.problem_id, s.sample_idx, "g", 1, correct=s.completion == "4") for s in samples}
    for name in ("oracle", "logprob"):
        rows = get_verifier(name).score(PROBLEMS, samples, grades)
        assert [(r.tokens, r.calls) for r in rows] == [(0, 0), (0, 0)], name


def test_offline_reward_models_cost_nothing_and_an_uncounting_model_is_unknown() -> None:
    class Predicts:
        def predict(self, texts: list[str]) -> np.ndarray:
            return np.array([0.25 * len(t) % 1 for t in texts])

    imdb = RewardVerifier(ImdbSentimentReward(Predicts(), "fp", {}))
    samples = [Sample("q/0", 0, "good", 1, "stop"), Sample("q/1", 0, "bad", 1, "stop")]
    rows = imdb.score(PROBLEMS, samples, {})
    assert [(r.tokens, r.calls) for r in rows] == [(0, 0), (0, 0)]
    tldr = get_verifier("rm:tldr-proxy-train")
    assert [(r.tokens, r.calls) for r in tldr.score(PROBLEMS, samples, {})] == [(0, 0), (0, 0)]

    class Uncounted:  # a third party's reward model without score_counted
        name, version, fingerprint = "plain", 1, "x"

        def score(self, prompts: list[str], completions: list[str]) -> list[float]:
            return [float(len(c)) for c in completions]

    plain = RewardVerifier(Uncounted()).score(PROBLEMS, samples, {})
    assert [(r.score, r.tokens, r.calls) for r in plain] == [(4.0, None, None), (3.0, None, None)]


def test_the_ledger_adds_up_stored_rows_per_problem(tmp_path: Path) -> None:
    run = _run(tmp_path)
    run.store.samples.append([Sample("q/0", 0, "a", 5, "stop", None, 10), Sample("q/0", 1, "b", 7, "stop", None, 10),
                              Sample("q/1", 0, "c", 3, "stop", None, 12), Sample("q/1", 1, "d", 4, "stop", None, 12)])
    prm = run.store.scores("prm-x")
    prm.append([Score("q/0", 0, "prm-x", 0.1, tokens=20, calls=1), Score("q/0", 1, "prm-x", 0.2, tokens=25, calls=1),
                Score("q/1", 0, "prm-x", 0.3, tokens=30, calls=1), Score("q/1", 1, "prm-x", 0.4, tokens=31, calls=1)])
    # a later scoring of one sample (a retrained model): its row is the one that counts
    prm.append([Score("q/1", 1, "prm-x", 0.5, tokens=40, calls=2)])
    # an old verifier's rows without counts, for one problem only
    run.store.scores("old").append([Score("q/0", 0, "old", 1.0), Score("q/0", 1, "old", 1.0)])
    ledger = compute_ledger(run.store.root)
    assert ledger.verifiers == ("old", "prm-x")
    q0, q1 = ledger.problems
    assert (q0.problem_id, q0.samples, q0.prompt_tokens, q0.generated_tokens, q0.policy_tokens) == ("q/0", 2, 20, 12, 32)
    assert (q1.prompt_tokens, q1.generated_tokens, q1.policy_tokens) == (24, 7, 31)
    assert q0.verifier("prm-x") is not None and (q0.verifier("prm-x").tokens, q0.verifier("prm-x").calls) == (45, 2)
    assert (q1.verifier("prm-x").tokens, q1.verifier("prm-x").calls) == (70, 3)
    assert (q0.verifier("old").samples, q0.verifier("old").tokens) == (2, None) and q1.verifier("old") is None
    total = ledger.total()
    assert (total.samples, total.prompt_tokens, total.generated_tokens) == (4, 44, 19)
    assert [(c.verifier, c.samples, c.tokens, c.calls) for c in total.verifiers] == [("old", 2, None, None),
                                                                                      ("prm-x", 4, 115, 5)]
    assert json.loads(json.dumps(ledger.to_json()))["total"]["generated_tokens"] == 19
    # one sample whose prompt was not counted (imported) makes its problem's and the run's prompt unknown
    run.store.samples.append([Sample("q/1", 2, "e", 1, "stop")])
    again = compute_ledger(run.store.root)
    assert again.problems[1].prompt_tokens is None and again.problems[0].prompt_tokens == 20
    assert again.total().prompt_tokens is None and again.total().generated_tokens == 20
    assert add_known([1, 2]) == 3 and add_known([1, None]) is None and add_known([]) == 0


def test_reasoning_and_answer_tokens_are_counted_apart(tmp_path: Path) -> None:
    run = _run(tmp_path)
    run.store.samples.append([Sample("q/0", 0, "<think>x</think> 4", 9, "stop", None, 10, reasoning_tokens=6),
                              Sample("q/0", 1, "<think>y</think> 5", 7, "stop", None, 10, reasoning_tokens=5),
                              Sample("q/1", 0, "4", 2, "stop", None, 12, reasoning_tokens=0)])
    ledger = compute_ledger(run.store.root)
    assert [p.reasoning_tokens for p in ledger.problems] == [11, 0] and ledger.total().reasoning_tokens == 11
    run.store.samples.append([Sample("q/1", 1, "5", 1, "stop", None, 12)])  # not counted: unknown, not 0
    again = compute_ledger(run.store.root)
    assert again.problems[1].reasoning_tokens is None and again.total().reasoning_tokens is None
    from rich.console import Console

    from bonbench.pipeline.report import compute_table

    console = Console(record=True, width=200)
    console.print(compute_table(ledger))
    text = console.export_text()
    assert "of which reasoning" in text and "of which answer" in text and " 7 " in text  # 18 generated - 11


@pytest.fixture(scope="module")
def math_run(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    """3 real MATH-500 problems x 2 imported samples, scored with the oracle."""
    from bonbench.apps.cli import main

    base = tmp_path_factory.mktemp("ledger")
    rows = [json.loads(line) for line in (data_dir / "math500" / "test.jsonl").read_text().splitlines()[:3]]
    samples = base / "samples.jsonl"
    samples.write_text("".join(json.dumps({"problem_id": r["unique_id"], "sample_idx": j,
                                           "completion": f"The answer is \\boxed{{{r['answer'] if j else 0}}}"}) + "\n"
                               for r in rows for j in range(2)))
    assert main(["score", "--task", "math500", "--samples", str(samples), "--data-dir", str(data_dir),
                 "--out", str(base / "results"), "--n-boot", "10", "--metric", "pass@1,bon@2", "--verifier", "oracle"]) == 0
    return next((base / "results" / "runs" / "math500").glob("*/*"))


def test_report_prints_the_compute_table_under_the_unchanged_metrics(math_run: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from rich.console import Console

    from bonbench.apps.cli import main

    capsys.readouterr()
    print_metrics(json.loads((math_run / "metrics.json").read_text()), Console(soft_wrap=True))
    metrics_only = capsys.readouterr().out
    assert main(["report", str(math_run)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(metrics_only)  # the metrics table as before, then the compute table
    compute = out[len(metrics_only):].splitlines()
    assert compute[-1] == str(math_run) and compute[0] == "compute · 3 problems · 6 samples"
    ledger = compute_ledger(math_run)
    generated = next(line for line in compute if "policy: generated" in line).split("│")
    assert generated[3].strip() == f"{ledger.total().generated_tokens:,}"
    prompt = next(line for line in compute if "policy: prompt" in line)
    assert "unknown" in prompt  # imported samples: the prompt the policy read was not counted
    oracle = [c.strip() for c in next(line for line in compute if "verifier: oracle" in line).split("│")]
    assert oracle[2:7] == ["6", "0", "0.0", "0", "0.0"]
    assert main(["report", str(math_run), "--per-problem"]) == 0
    lines = capsys.readouterr().out.splitlines()
    by_problem = [line for line in lines if line.startswith("│ test/")]
    assert len(by_problem) == 3 and any(line.startswith("│ total") for line in lines)


def test_report_of_a_run_without_sample_rows_prints_no_compute_table(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from bonbench.apps.analysis.synthetic import write_synthetic_run
    from bonbench.apps.cli import main

    run = write_synthetic_run(tmp_path, np.array([0.2, 0.7]), n=4, task="t", model="m", seed=1, metrics=("pass@1",),
                              n_boot=10)
    (run / "samples.jsonl").unlink()  # metrics written elsewhere, no rows here
    assert compute_ledger(run).problems == ()
    assert main(["report", str(run)]) == 0
    out = capsys.readouterr().out
    assert "pass@1" in out and "compute" not in out and out.splitlines()[-1] == str(run)
