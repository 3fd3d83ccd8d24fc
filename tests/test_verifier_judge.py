"""The ``judge:`` verifier: P(Yes) renormalised by hand, a fault-injecting judge server on 127.0.0.1,
a tiny local transformers judge against a reference written from the definition, and bad input (a
real ``vllm serve``: tests/test_vllm_serve.py). The server and the tiny judge are in tests/judge_models.py.

``JudgeServer`` answers ``/v1/models`` and ``/v1/completions``: a prompt containing ``GOOD`` gets the
verdict distribution ``GOOD_TOP``, any other ``BAD_TOP`` (no Yes variant: the floor); a request
without ``logprobs`` (a rationale) gets the text ``RATIONALE``. ``faults`` are consumed one per POST:
``429`` (with ``Retry-After: 0.1``), ``500``, ``malformed`` (a JSON body cut short), ``slow`` (longer
than the test's deadline); ``nologprobs`` makes every answer drop its log-probabilities.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from judge_models import RATIONALE, JudgeServer, build_tiny_judge, reference_p_yes

from bonbench.api.verifier import get_verifier
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Problem, Sample, to_row
from bonbench.core.served import EndpointDown
from bonbench.plugins.samplers.local_server import free_port
from bonbench.plugins.verifiers.judge import JudgeVerifier
from bonbench.plugins.verifiers.judge_prompt import DIRECT_V1, load_prompt, p_yes, verdict_of

REPO = Path(__file__).resolve().parents[1]
@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with JudgeServer() as s:
        yield s


PROBLEMS = {"p": Problem("p", "What is 2 + 2?", "4")}
SAMPLES = [Sample("p", 0, "GOOD: 2 + 2 = 4", 5, "stop"), Sample("p", 1, "2 + 2 = 5", 5, "stop")]
FAST = "request_timeout=1&max_attempts=5"


def expected_good() -> float:
    return (0.5 + 0.1) / (0.5 + 0.1 + 0.2)  # Yes variants over Yes and No variants; " Maybe" is neither


def test_p_yes_is_the_renormalised_yes_mass_by_hand() -> None:
    top = [(" Yes", math.log(0.5)), ("yes", math.log(0.1)), ("\u2581YES", math.log(0.05)), (" No", math.log(0.2)),
           ("no.", math.log(0.04)), (" Maybe", math.log(0.1)), ("Yesterday", math.log(0.01))]
    value, floored = p_yes(top, floor=0.0)
    assert not floored and value == pytest.approx(0.65 / 0.89, abs=1e-12)
    assert p_yes([(" No", -0.1), (" Maybe", -3.0)], floor=0.02) == (0.02, True)
    assert p_yes([(" Yes", -0.1)], floor=0.0) == (1.0, False)
    # tiny probabilities stay exact (log space)
    assert p_yes([(" Yes", -800.0), (" No", -800.0 + math.log(3))], 0.0)[0] == pytest.approx(0.25, abs=1e-12)
    assert [verdict_of(t) for t in ("\u0120Yes", " no", "Yes!", "Nope", "")] == ["yes", "no", "yes", None, None]


def test_served_judge_scores_are_p_yes_with_tokens_and_calls(server: JudgeServer, capfd: pytest.CaptureFixture[str]) -> None:
    judge = get_verifier(f"judge:openai:{server.url}?model=judge-model&{FAST}")
    server.bodies.clear()  # the construction's probe
    good, bad = judge.score(PROBLEMS, SAMPLES, {})
    assert good.score == pytest.approx(expected_good(), abs=1e-12) and (good.calls, good.steps) == (1, None)
    assert good.rationales is None and "rationales" not in to_row(good)  # no rationale: the row is as before
    assert bad.score == 0.0  # no Yes variant: the floor
    prompt = DIRECT_V1.replace("{problem}", "What is 2 + 2?").replace("{solution}", "GOOD: 2 + 2 = 4")
    assert good.tokens == len(prompt.split()) + 1  # the server's usage: prompt + the one completion token
    assert {b["logprobs"] for b in server.bodies} == {20} and {b["max_tokens"] for b in server.bodies} == {1}
    assert "1 of 2 reads had no Yes variant among the top 20 log-probabilities; they scored the floor 0" in capfd.readouterr().err


def test_served_judge_rides_out_429_500_malformed_and_a_timeout(server: JudgeServer) -> None:
    judge = get_verifier(f"judge:openai:{server.url}?model=judge-model&{FAST}&concurrency=1")
    server.bodies.clear()
    server.faults.extend(["429", "500", "malformed", "slow"])
    t0 = time.monotonic()
    good, bad = judge.score(PROBLEMS, SAMPLES, {})
    assert time.monotonic() - t0 < 10
    assert good.score == pytest.approx(expected_good(), abs=1e-12) and bad.score == 0.0
    assert [b["fault"] for b in server.bodies][:5] == ["429", "500", "malformed", "slow", "ok"]
    assert good.calls == bad.calls == 1  # calls count the judge's requests, not the client's retries


def test_a_second_endpoint_takes_over_when_the_first_is_down(server: JudgeServer) -> None:
    with JudgeServer() as other:
        judge = get_verifier(f"judge:openai:{server.url},{other.url}?model=judge-model&{FAST}&concurrency=1")
        server.faults.extend(["500"] * 10)  # the first endpoint fails every try from now on
        good, bad = judge.score(PROBLEMS, SAMPLES, {})
    assert good.score == pytest.approx(expected_good(), abs=1e-12) and bad.score == 0.0


def test_cot_samples_k_rationales_and_averages_their_reads(server: JudgeServer) -> None:
    judge = get_verifier(f"judge:openai:{server.url}?model=judge-model&k=2&max_tokens=8&{FAST}")
    server.bodies.clear()
    good, bad = judge.score(PROBLEMS, SAMPLES, {})
    assert good.steps == pytest.approx((expected_good(),) * 2, abs=1e-12) and good.aggregation == "mean"
    assert good.score == pytest.approx(expected_good(), abs=1e-12) and bad.steps == (0.0, 0.0)
    assert good.calls == 4  # 2 rationales + 2 reads
    # each rationale as the verdict read it (the server's text: it stops short of the stop string)
    assert good.rationales == (f"{RATIONALE}\nIs the proposed solution correct? Answer",) * 2
    assert "rationales" in to_row(good) and "rationales" not in to_row(replace(good, rationales=None))
    rationale_asks = [b for b in server.bodies if b.get("logprobs") is None]
    assert len(rationale_asks) == 4 and len({b["seed"] for b in rationale_asks}) == 4  # a seed per rationale
    assert rationale_asks[0]["stop"] == ["Is the proposed solution correct? Answer Yes or No."]
    reads = [b["prompt"] for b in server.bodies if b.get("logprobs") is not None]
    assert all(f"step by step.\n{RATIONALE}\nIs the proposed" in p for p in reads)  # the rationale, stop cut off


def test_fingerprint_follows_the_prompt_and_the_options(server: JudgeServer, tmp_path: Path) -> None:
    base = get_verifier(f"judge:openai:{server.url}?model=judge-model")
    prompt = tmp_path / "p.txt"
    prompt.write_text("Q: {problem}\nA: {solution}\nRight?")
    custom = get_verifier(f"judge:openai:{server.url}?model=judge-model&prompt={prompt}")
    floor = get_verifier(f"judge:openai:{server.url}?model=judge-model&floor=0.01")
    assert len({base.fingerprint, custom.fingerprint, floor.fingerprint}) == 3
    assert isinstance(custom, JudgeVerifier) and isinstance(base, JudgeVerifier)
    assert custom.prompt.version.startswith("file-") and base.prompt.version == "judge-v1"
    assert base.fingerprint == get_verifier(f"judge:openai:{server.url}?model=judge-model").fingerprint


@pytest.mark.parametrize(("spec", "says"), [
    ("judge:openai:{url}?model=judge-model&topp=3", "judge 'openai:{url}' has no option 'topp'; its options are: model, k,"),
    ("judge:openai:{url}?model=judge-model&top=50", "top must be 1..20"),
    ("judge:openai:{url}", "needs the served model id: add ?model=ID"),
    ("judge:openai:{url}?model=judge-model&k=2&prompt={file}", "has no {{rationale}} but k=2"),
])
def test_bad_options_are_one_line(server: JudgeServer, tmp_path: Path, spec: str, says: str) -> None:
    file = tmp_path / "p.txt"
    file.write_text("{problem} {solution}")
    with pytest.raises(BonbenchError) as info:
        get_verifier(spec.format(url=server.url, file=file))
    assert says.format(url=server.url) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(("options", "says"), [
    ("device=tpu", "device='tpu' is not auto, cpu, cuda[:N] or mps"),
    ("dtype=float8", "dtype must be auto, float32, bfloat16, float16"),
])
def test_bad_local_engine_options_are_one_line(tiny_judge: Path, options: str, says: str) -> None:
    with pytest.raises(BonbenchError) as info:
        get_verifier(f"judge:{tiny_judge}?{options}")
    assert says in str(info.value) and "\n" not in str(info.value)


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has CUDA")
def test_a_local_judge_asked_for_cuda_without_one_names_the_fix(tiny_judge: Path) -> None:
    with pytest.raises(BonbenchError, match="torch sees no CUDA device: use device=cpu"):
        get_verifier(f"judge:{tiny_judge}?device=cuda")


def test_the_local_dtype_is_in_the_fingerprint(tiny_judge: Path) -> None:
    prints = {get_verifier(f"judge:{tiny_judge}?dtype={d}").fingerprint for d in ("float32", "bfloat16")}
    auto = get_verifier(f"judge:{tiny_judge}").fingerprint
    assert len(prints) == 2 and auto in prints


def test_an_endpoint_without_logprobs_fails_when_the_judge_is_built(server: JudgeServer) -> None:
    server.nologprobs = True
    with pytest.raises(BonbenchError, match=r"answered without log-probabilities: serve the judge with log-probabilities on"):
        get_verifier(f"judge:openai:{server.url}?model=judge-model&{FAST}")
    assert len(server.bodies) == 1  # one probe, not retried


def test_an_unreachable_endpoint_fails_when_the_judge_is_built() -> None:
    with pytest.raises(BonbenchError, match=r"cannot be reached \(connection refused\): start the server") as info:
        get_verifier(f"judge:openai:http://127.0.0.1:{free_port()}?model=m&max_attempts=2")
    assert not isinstance(info.value, EndpointDown)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    pp = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "bonbench.apps.cli", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": pp})


def test_cli_judge_without_logprobs_is_one_error_line_before_sampling(server: JudgeServer, tmp_path: Path,
                                                                      data_dir: Path) -> None:
    server.nologprobs = True
    r = _cli("run", "--task", "math", "--limit", "1", "--n", "2", "--metric", "pass@1,bon@2", "--backend", "openai",
             "--endpoint", server.url, "--model", "judge-model", "--verifier",
             f"judge:openai:{server.url}?model=judge-model&max_attempts=1", "--data-dir", str(data_dir), "--out", str(tmp_path))
    assert r.returncode != 0
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "without log-probabilities" in errors[0], r.stderr[-2000:]
    assert [b for b in server.bodies if b.get("logprobs") is None] == []  # nothing was sampled
    assert not list(tmp_path.glob("runs/**/samples.jsonl"))


def test_list_verifiers_shows_the_judge_scheme() -> None:
    r = _cli("list", "verifiers")
    assert r.returncode == 0 and "judge:<model folder or hub id | openai:URL?model=ID>" in r.stdout


def test_prompt_file_placeholders_are_checked(tmp_path: Path) -> None:
    file = tmp_path / "p.txt"
    file.write_text("no placeholders here")
    with pytest.raises(BonbenchError, match=r"lacks \{problem\} and \{solution\}"):
        load_prompt(str(file), 0)
    file.write_text("{problem} {solution} {rationale}")
    assert load_prompt(str(file), 3).cot
    with pytest.raises(BonbenchError, match=r"has a \{rationale\} but k=0"):
        load_prompt(str(file), 0)


# ----------------------------------------------------------------------------- a tiny local judge

@pytest.fixture(scope="module")
def tiny_judge(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_judge(tmp_path_factory.mktemp("judge"))


def test_local_judge_equals_the_reference_at_any_batch_size(tiny_judge: Path) -> None:
    problems = {"p": Problem("p", "What is 2 + 2?", "4")}
    samples = [Sample("p", i, text, 3, "stop") for i, text in enumerate(
        ["2 + 2 = 4", "GOOD: 4", "2 + 2 = 5 and the step by step", "Maybe 5", "a"])]
    got = {}
    for top in (20, 6):
        one = get_verifier(f"judge:{tiny_judge}?top={top}&batch_size=1").score(problems, samples, {})
        many = get_verifier(f"judge:{tiny_judge}?top={top}&batch_size=4").score(problems, samples, {})
        prompt = load_prompt(None, 0)
        for s, a, b in zip(samples, one, many, strict=True):
            ref = reference_p_yes(tiny_judge, prompt.verdict("What is 2 + 2?", s.completion), top, 0.0)
            assert a.score == pytest.approx(ref, abs=1e-5) and b.score == pytest.approx(a.score, abs=1e-5)
            assert a.calls == 1 and a.tokens == len(prompt.verdict("What is 2 + 2?", s.completion).split()) + 1  # + <bos>
        got[top] = [sc.score for sc in one]
    assert all(0.0 < v < 1.0 for v in got[20])  # both verdicts among the top 20 of this tiny model
    assert got[6] == [0.0] * len(samples)  # no Yes variant among the top 6: the floor


def test_local_judge_cot_counts_generated_tokens(tiny_judge: Path) -> None:
    problems = {"p": Problem("p", "What is 2 + 2?", "4")}
    judge = get_verifier(f"judge:{tiny_judge}?k=2&max_tokens=5&temperature=1.0")
    (row,) = judge.score(problems, [Sample("p", 0, "2 + 2 = 4", 3, "stop")], {})
    assert row.steps is not None and len(row.steps) == 2 and row.score == pytest.approx(sum(row.steps) / 2, abs=1e-12)
    assert row.calls is not None and 2 + 2 <= row.calls <= 2 + 2 * 5  # 2 reads + one forward per generated token
    again = get_verifier(f"judge:{tiny_judge}?k=2&max_tokens=5&temperature=1.0").score(
        problems, [Sample("p", 0, "2 + 2 = 4", 3, "stop")], {})
    assert again[0].steps == row.steps  # seeded rationales: the same scores
