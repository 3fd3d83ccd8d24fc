"""Reasoning models: what a verifier reads of a completion (``think=strip|require|keep``, ``think_tag``) and the
reasoning / answer token split of the sample rows."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from orm_models import build_qwen_rm
from prm_models import build_math_shepherd, byte_level

from bonbench.api.reward import get_reward_model
from bonbench.api.task import Task
from bonbench.api.think import AnswerView, ThinkOptions, answer_view, split_think
from bonbench.apps.cli import main
from bonbench.core.config import RunConfig
from bonbench.core.errors import BonbenchError
from bonbench.core.reasoning import final_answer, reasoning_piece_count, reasoning_token_count
from bonbench.core.records import Grade, Problem, Prompt, Sample, Score, from_row, to_row
from bonbench.pipeline import stages as pipeline
from bonbench.pipeline.prepared import open_run, prepare
from bonbench.plugins.rewards.prm import verifier as prm
from bonbench.plugins.samplers.openai_backend import piece_reasoning, served_reasoning
from bonbench.plugins.samplers.scripted import ScriptedSampler
from bonbench.run.resolve import build_verifier, check_verifier

TRACE = "<think>\nLet me add 3 and 4. That is 7.\n</think>\n\nThe answer is 7."


@pytest.mark.parametrize(("text", "strip", "require"), [
    (TRACE, "The answer is 7.", "The answer is 7."),
    ("a</think>b</think>\n final", "final", "final"),  # the *last* closing tag ends the trace
    ("<think>\nstill thinking when the tokens ran out", "", ""),  # opened, never closed: no answer
    ("Plain answer: 7.", "Plain answer: 7.", ""),  # no tag: a plain answer, unless the tag is required
    ("reasoning opened by the prompt's template</think>\n7", "7", "7"),
])
def test_final_answer_under_each_mode(text: str, strip: str, require: str) -> None:
    assert final_answer(text) == final_answer(text, "strip") == strip
    assert final_answer(text, "require") == require
    assert final_answer(text, "keep") == text
    assert final_answer(text.replace("think>", "reasoning>"), "strip", "</reasoning>") == strip


def test_split_think_takes_its_options_out_of_any_spec() -> None:
    assert split_think("prm:Qwen/Qwen2.5-Math-PRM-7B?agg=min&think=keep") == (
        "prm:Qwen/Qwen2.5-Math-PRM-7B?agg=min", ThinkOptions("keep"))
    assert split_think("learned:results/verifiers/x?think_tag=</reasoning>") == (
        "learned:results/verifiers/x", ThinkOptions("strip", "</reasoning>"))
    assert split_think("judge:openai:http://h:8000?model=M&think=require&k=2") == (
        "judge:openai:http://h:8000?model=M&k=2", ThinkOptions("require"))
    assert split_think("rm:hf:org/rm?label=1") == ("rm:hf:org/rm?label=1", None)
    assert split_think("logprob") == ("logprob", None)
    for spec, says in [("rm:x?think=drop", "think='drop' .* is not one of strip, require, keep"),
                       ("rm:x?think_tag=", "think_tag .* is empty")]:
        with pytest.raises(BonbenchError, match=says):
            split_think(spec)


class Echo:
    """Scores the length of the text it is handed, and keeps what it saw."""

    name, version, fingerprint, uses_grades = "echo", 3, "sha256:echo", False

    def __init__(self) -> None:
        self.seen: list[str] = []

    def score(self, problems: Mapping[str, Problem], samples: Sequence[Sample],
              grades: Mapping[tuple[str, int], Grade]) -> list[Score]:
        self.seen += [s.completion for s in samples]
        return [Score(s.problem_id, s.sample_idx, self.name, float(len(s.completion))) for s in samples]


def test_the_view_hands_the_verifier_the_answer_and_records_the_reading() -> None:
    samples = [Sample("p", 0, TRACE, 20, "stop"), Sample("p", 1, "<think>out of tokens", 4, "length"),
               Sample("p", 2, "7", 1, "stop")]
    inner = Echo()
    view = answer_view(inner, None)  # the default: strip after </think>
    rows = view.score({"p": Problem("p", "What is 3 + 4?", "7")}, samples, {})
    assert inner.seen == ["The answer is 7.", "", "7"] and [r.score for r in rows] == [16.0, 0.0, 1.0]
    assert view.name == "echo" and view.version == 3 and view.fingerprint == "sha256:echo|think=strip:</think>"
    prints = {answer_view(Echo(), t).fingerprint for t in (None, ThinkOptions("require"), ThinkOptions("strip", "</r>"))}
    assert len(prints) == 3
    keep = answer_view(inner, ThinkOptions("keep"))
    assert keep is inner  # the whole trace: what verifiers read before, under the rows' old fingerprint


def test_verifiers_that_read_no_text_are_left_alone() -> None:
    assert build_verifier("logprob", None).fingerprint == ""
    assert build_verifier("oracle", None).fingerprint == ""
    with pytest.raises(BonbenchError, match="verifier 'logprob' reads no completion text, so think= does not apply"):
        build_verifier("logprob?think=keep", None)


@pytest.fixture(scope="module")
def shepherd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_math_shepherd(tmp_path_factory.mktemp("think") / "math-shepherd")


def test_a_prm_through_the_run_reads_answers_and_reaggregates_without_its_model(
        shepherd: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    problems = (Problem("q/0", "What is 3 + 4 minus 2?", ""),)
    task = Task(name="ttoy", version=1, problems=problems, render=lambda p, style: Prompt(p.id, text=p.input),
                grader=_NoGrader(), prompt_id="ttoy-v1", default_metrics=("pass@1",))
    run = prepare(task, RunConfig(task="ttoy", model="scripted", backend="scripted", n=2, metrics=("bon@2",)), tmp_path)
    open_run(run)
    answer = "Step 1: we add 3 + 4 = 7\n\nStep 2: then 7 - 2 = 5"
    samples = {("q/0", 0): Sample("q/0", 0, "<think>\nhmm\n\nhmm\n\nhmm\n</think>\n\n" + answer, 30, "stop"),
               ("q/0", 1): Sample("q/0", 1, answer, 12, "stop")}
    verifier = check_verifier(f"prm:{shepherd}?agg=min", None)
    assert isinstance(verifier, AnswerView)
    rows = pipeline.verify(run, verifier, samples, {})
    assert rows["q/0", 0].steps == pytest.approx(rows["q/0", 1].steps, abs=1e-5)  # the trace is not read
    assert len(rows["q/0", 0].steps or ()) == 2
    assert rows["q/0", 0].verifier_fingerprint.endswith("|agg=min|think=strip:</think>")
    whole = pipeline.verify(run, build_verifier(f"prm:{shepherd}?agg=min&think=keep", None), samples, {})
    assert len(whole["q/0", 0].steps or ()) == 5 and whole["q/0", 1].score == pytest.approx(rows["q/0", 1].score, abs=1e-5)

    def no_model(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was loaded")

    monkeypatch.setitem(prm.BACKENDS, "hf", no_model)
    mean = pipeline.verify(run, build_verifier(f"prm:{shepherd}?agg=mean", None), samples, {})
    assert mean["q/0", 0].steps == rows["q/0", 0].steps and mean["q/0", 0].aggregation == "mean"
    assert mean["q/0", 0].verifier_fingerprint.endswith("|agg=mean|think=strip:</think>")


def test_a_scored_run_reads_answers_with_a_chat_reward_model_and_records_how(
        tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`bonbench score` of reasoning samples with `rm:hf:` (a ChatML reward model): the scores are those of the
    final answers, the rows and metrics.json carry the reading, and think=keep scores the traces as a second reading."""
    rm = build_qwen_rm(tmp_path / "qwen-rm")
    rows = [json.loads(line) for line in (data_dir / "math500" / "test.jsonl").read_text().splitlines()[:2]]
    answers = {(r["unique_id"], j): f"The answer is $\\boxed{{{r['answer'] if j else 0}}}$." for r in rows for j in range(2)}
    samples = tmp_path / "s.jsonl"
    samples.write_text("".join(json.dumps({"problem_id": pid, "sample_idx": j, "n_tokens": 9,
                                           "reasoning_tokens": 6 if j else None, "prompt_tokens": 40 if j else "x",
                                           "completion": f"<think>\nLet me see, {j} or more.\n</think>\n\n{text}"}) + "\n"
                               for (pid, j), text in answers.items()))
    args = ["score", "--task", "math500", "--samples", str(samples), "--metric", "bon@2", "--data-dir", str(data_dir),
            "--out", str(tmp_path / "results")]
    assert main([*args, "--verifier", f"rm:hf:{rm}"]) == 0
    run_dir = Path(capsys.readouterr().out.strip().splitlines()[-1])
    (table,) = (run_dir / "scores").glob("rm-*.jsonl")
    stored = [json.loads(line) for line in table.read_text().splitlines()]
    model = get_reward_model(f"hf:{rm}")
    problems = {r["unique_id"]: r["problem"] for r in rows}
    want = dict(zip(answers, model.score([problems[pid] for pid, _ in answers], list(answers.values())), strict=True))
    assert {(r["problem_id"], r["sample_idx"]): r["score"] for r in stored} == pytest.approx(want, abs=1e-5)
    assert {r["verifier_fingerprint"] for r in stored} == {model.fingerprint + "|think=strip:</think>"}
    metrics = json.loads((run_dir / "metrics.json").read_text())["metrics"]["bon@2"]
    assert metrics["verifier_fingerprint"].endswith("|think=strip:</think>")
    assert main([*args, "--verifier", f"rm:hf:{rm}?think=keep"]) == 0
    imported = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    # a bonbench row's count is kept; a row without one reads null, not a guess
    assert {(r["sample_idx"], r["reasoning_tokens"]) for r in imported} == {(0, None), (1, 6)}
    assert {(r["sample_idx"], r["prompt_tokens"]) for r in imported} == {(0, None), (1, 40)}  # a count, or null
    again = [json.loads(line) for line in table.read_text().splitlines()]
    assert len(again) == 8 and {r["verifier_fingerprint"] for r in again[4:]} == {model.fingerprint}
    traces = {(r["problem_id"], r["sample_idx"]): r["score"] for r in again[4:]}
    assert all(abs(traces[k] - want[k]) > 1e-3 for k in want)  # the trace, read whole, scores otherwise


class _NoGrader:
    name, version = "none", 1

    def grade(self, problems: object, samples: list[Sample]) -> list[Grade]:
        return [Grade(s.problem_id, s.sample_idx, self.name, self.version, correct=None) for s in samples]


# ---------------------------------------------------------------- reasoning and answer tokens in the sample rows


def test_reasoning_tokens_from_the_sampled_ids() -> None:
    one = byte_level(["<|endoftext|>", "<think>", "</think>"], eos_token="<|endoftext|>")  # Qwen3: one token each
    ids = one("<think>\nWe add 3 + 4 = 7.\n</think>\n\nThe answer is 7.")["input_ids"]
    text = one.decode(ids)
    closing = one.convert_tokens_to_ids("</think>")
    assert reasoning_token_count(ids, text, one) == ids.index(closing) + 1
    assert reasoning_token_count(ids[:5], one.decode(ids[:5]), one) == 5  # opened, never closed: all reasoning
    plain = one("The answer is 7.")["input_ids"]
    assert reasoning_token_count(plain, one.decode(plain), one) == 0
    several = byte_level(["<|endoftext|>"], eos_token="<|endoftext|>")  # the tag spelled in several tokens
    ids = several("We add 3 + 4 = 7.</think> 7")["input_ids"]
    head = several("We add 3 + 4 = 7.</think>")["input_ids"]
    assert reasoning_token_count(ids, several.decode(ids), several) == len(head)
    assert reasoning_piece_count(["a", "b</th", "ink>", " 7", "."], "ab</think> 7.") == 3


def test_sample_rows_count_reasoning_apart_and_old_rows_still_load() -> None:
    from bonbench.api.sampler import SampleRequest, SamplingParams

    sampler = ScriptedSampler({"p": ["<think> add 3 and 4 </think> 7 it is", "seven"]})
    got = next(iter(sampler.generate([SampleRequest(Prompt("p", text="q"), (0, 1))], SamplingParams(max_tokens=8))))
    assert [(s.n_tokens, s.reasoning_tokens, s.answer_tokens) for s in got] == [(9, 6, 3), (1, 0, 1)]
    row = to_row(got[0])
    assert row["reasoning_tokens"] == 6 and from_row(Sample, row) == got[0]
    old = {k: v for k, v in row.items() if k != "reasoning_tokens"}
    assert from_row(Sample, old) == replace(got[0], reasoning_tokens=None) and from_row(Sample, old).answer_tokens is None


def test_served_samples_take_the_servers_count_or_the_returned_tokens() -> None:
    usage = {"completion_tokens": 120, "completion_tokens_details": {"reasoning_tokens": 100}}
    assert served_reasoning(usage) == 100
    assert served_reasoning({"completion_tokens": 5}) is None
    assert served_reasoning({"completion_tokens_details": {"reasoning_tokens": 0}}) is None
    assert piece_reasoning(["<think>", "x", "</think>", "\n", "7"], "<think>x</think>\n7") == 3
    assert piece_reasoning(None, "x") is None
    assert piece_reasoning(["a", "b"], "a") is None  # tokens that are not the text (a stop string cut it)
