"""Against one real ``vllm serve`` of the embedded Gemma (slow): the openai sampler backend, and the
``judge:`` verifier reading P(Yes) from the server's top log-probabilities.

Both share one server, started once for this module on 127.0.0.1 and stopped when the module ends
(45-130 s to start on a 2-core machine). The judge's score is checked against a bare HTTP request
for the same verdict prompt, renormalised by hand, so the test fails if the judge reads a different
prompt, position or set of log-probabilities than the server returns.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bonbench.core.errors import BonbenchError
from bonbench.core.records import Problem, Sample

REPO = Path(__file__).resolve().parents[1]
SERVED = "gemma-3-270m"
YES = {"yes"}
NO = {"no"}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pytest.importorskip("vllm")
    from bonbench.core.models import resolve_model
    from bonbench.plugins.samplers.local_server import vllm_serve

    log = tmp_path_factory.mktemp("vllm") / "serve.log"
    try:
        with vllm_serve(resolve_model(None).path, served_name=SERVED, log=log) as url:
            yield url
    except BonbenchError as exc:
        pytest.fail(f"{exc}\n{log.read_text()[-3000:] if log.exists() else ''}")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    pp = os.pathsep.join(filter(None, [str(REPO), str(REPO / ".pp"), os.environ.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "bonbench.apps.cli", *args], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": pp})


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_openai_backend_samples_from_a_real_server(vllm_server: str, tmp_path: Path, data_dir: Path) -> None:
    r = _cli("run", "--task", "math", "--limit", "1", "--n", "2", "--metric", "pass@1,2", "--max-tokens", "16",
             "--backend", "openai", "--endpoint", vllm_server, "--model", SERVED,
             "--data-dir", str(data_dir), "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    (samples,) = tmp_path.glob("runs/math/*/*/samples.jsonl")
    rows = _rows(samples)
    assert sorted(s["sample_idx"] for s in rows) == [0, 1] and len({s["problem_id"] for s in rows}) == 1
    for s in rows:
        assert 1 <= s["n_tokens"] <= 16 and s["finish_reason"] in ("stop", "length")
        assert s["logprob"] is not None and s["logprob"] <= 0
    (metrics,) = tmp_path.glob("runs/math/*/*/metrics.json")
    assert {"pass@1", "pass@2"} <= set(json.loads(metrics.read_text())["metrics"])


def _bare_p_yes(url: str, prompt: str) -> float:
    """The definition, with no bonbench code: one completion request, top 20 log-probabilities of the
    first token, P(Yes) over the Yes and No variants among them."""
    body = json.dumps({"model": SERVED, "prompt": prompt, "max_tokens": 1, "temperature": 1.0,
                       "logprobs": 20}).encode()
    req = urllib.request.Request(f"{url}/v1/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        doc = json.loads(resp.read())
    top: dict[str, float] = doc["choices"][0]["logprobs"]["top_logprobs"][0]
    assert len(top) >= 2, top

    def norm(token: str) -> str:
        return token.replace("\u2581", " ").strip().rstrip(".,!:;").lower()

    yes = sum(math.exp(lp) for t, lp in top.items() if norm(t) in YES)
    no = sum(math.exp(lp) for t, lp in top.items() if norm(t) in NO)
    assert yes > 0, f"the embedded model put no Yes variant in its top 20: {sorted(top)}"
    return yes / (yes + no)


def test_judge_reads_p_yes_from_the_server_as_a_bare_request_does(vllm_server: str) -> None:
    from bonbench.plugins.verifiers.judge import JudgeVerifier

    judge = JudgeVerifier(f"openai:{vllm_server}?model={SERVED}")  # the scheme's factory gets the rest of the name
    problem = Problem("p0", "What is 2 + 3?", "5")
    samples = [Sample("p0", 0, "2 + 3 = 5. The answer is $\\boxed{5}$.", 16, "stop"),
               Sample("p0", 1, "2 + 3 = 7. The answer is $\\boxed{7}$.", 16, "stop")]
    scores = judge.score({"p0": problem}, samples, {})
    assert [(s.problem_id, s.sample_idx) for s in scores] == [("p0", 0), ("p0", 1)]
    for sample, score in zip(samples, scores, strict=True):
        want = _bare_p_yes(vllm_server, judge.prompt.verdict(problem.input, sample.completion, ""))
        assert abs(score.score - want) < 1e-6, (score.score, want)
        assert score.calls == 1 and score.tokens is not None and score.tokens > 20


def test_a_run_scored_by_a_served_judge(vllm_server: str, tmp_path: Path, data_dir: Path) -> None:
    spec = f"judge:openai:{vllm_server}?model={SERVED}"
    r = _cli("run", "--task", "math", "--limit", "1", "--n", "2", "--metric", "pass@2", "--metric", "bon@2",
             "--max-tokens", "16", "--backend", "openai", "--endpoint", vllm_server, "--model", SERVED,
             "--verifier", spec, "--data-dir", str(data_dir), "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    (scores,) = tmp_path.glob("runs/math/*/*/scores/judge-*.jsonl")
    rows = _rows(scores)
    assert sorted(s["sample_idx"] for s in rows) == [0, 1]
    assert all(0.0 <= s["score"] <= 1.0 and s["calls"] == 1 and s["tokens"] > 0 for s in rows)
    (metrics,) = tmp_path.glob("runs/math/*/*/metrics.json")
    assert "bon@2" in json.dumps(json.loads(metrics.read_text())["metrics"])


def test_a_search_step_sampler_on_a_real_server(vllm_server: str) -> None:
    """``OpenAIStepSampler`` on vLLM's server: the probe passes (vLLM honours stop and names it in
    stop_reason), steps stop at the delimiter, greedy rows agree, and a row follows its seed, not its batch."""
    from bonbench.api.sampler import SamplingParams
    from bonbench.api.search.records import Prefix
    from bonbench.core.served import OpenAIOptions, served_model
    from bonbench.plugins.samplers.openai_backend import OpenAISampler
    from bonbench.plugins.samplers.steps import step_sampler

    opts = OpenAIOptions(endpoints=(vllm_server,), api_key="EMPTY")
    sampler = OpenAISampler(served_model(SERVED, opts), seed=0, options=opts)
    steps = step_sampler(sampler, SamplingParams(temperature=1.0, max_tokens=24), "\n\n")
    prompt = ("Problem: What is 2+3?\nSolution: We add.\n\n2+3=5.\n\nThe answer is $\\boxed{5}$.\n\n\n"
              "Problem: What is 12*13?\nSolution:")
    prefixes = ([Prefix(prompt, (), seed=100 + i) for i in range(6)]
                + [Prefix(prompt, (), seed=s, greedy=True) for s in (1, 2)] + [Prefix(prompt, (), seed=3, to_end=True)])
    got = steps.continue_prefixes(prefixes)
    assert "step" in {c.finish for c in got[:6]} and all("\n\n" not in c.text for c in got[:8])
    assert all(c.finish in ("step", "end", "length") and 1 <= c.tokens <= 24 and c.prompt_tokens > 20 for c in got)
    assert got[6].text == got[7].text and got[8].finish in ("end", "length")
    assert [c.text for c in steps.continue_prefixes(prefixes[:6][::-1])[::-1]] == [c.text for c in got[:6]]
