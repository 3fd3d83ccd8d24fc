"""A judge's rationales on the viewer's problem page (issue 32, point 4).

A MATH run made by `bonbench run` (scripted backend) is scored by the ``judge:`` verifier against the
scripted judge server (tests/judge_models.py), sampling one rationale per answer (``k=1``); the
server's rationale is hostile markup. The score rows carry it, and the problem page shows it as text
beside the P(Yes) read after it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from judge_models import JudgeServer

from bonbench.apps.cli import main
from bonbench.apps.viewer.prompts import TaskTexts
from bonbench.apps.viewer.runs import find_runs
from bonbench.apps.viewer.site import Site

HOSTILE = '<script>window.pwned = 1</script></pre><img src=x onerror="window.pwned = 2"> so step 2 holds'


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with JudgeServer() as s:
        yield s


def test_the_problem_page_shows_the_judges_rationale_as_text(tmp_path: Path, server: JudgeServer,
                                                             data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BONBENCH_CACHE", str(tmp_path / "cache"))
    server.rationale = HOSTILE
    rows = [{"problem_id": "test/algebra/1.json", "sample_idx": i, "completion": f"GOOD: the answer is $\\boxed{{{a}}}$.",
             "n_tokens": 9, "finish_reason": "stop", "logprob": -1.0} for i, a in enumerate(["2", "3"])]
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = f"judge:openai:{server.url}?model=judge-model&k=1&max_tokens=8&max_attempts=2"
    assert main(["run", "--task", "math", "--backend", "scripted", "--samples", str(samples), "--verifier", spec,
                 "--metric", "bon@2", "--n-boot", "10", "--data-dir", str(data_dir), "--out", str(tmp_path / "results")]) == 0
    (scores,) = (tmp_path / "results").rglob("scores/*.jsonl")
    stored = [json.loads(line) for line in scores.read_text().splitlines()]
    # the scripted server's rationale runs on to the verdict's question (a real one stops before it)
    assert [r["rationales"] for r in stored] == [[f"{HOSTILE}\nIs the proposed solution correct? Answer"]] * 2
    site = Site(find_runs([tmp_path / "results"], keep=False), TaskTexts(None))
    (rid,) = site.runs
    page = site.render(f"runs/{rid}/problems/0.html") or ""
    assert page.count("judge's rationale 1 (P(Yes) after it ") == 2
    assert page.count("&lt;script&gt;window.pwned = 1&lt;/script&gt;&lt;/pre&gt;&lt;img src=x onerror=") == 2
    assert "<script>window.pwned" not in page and "<img" not in page
