"""A reward-judged run made by the pipeline, shown by the viewer (issue 32, point 4).

`bonbench score` scores a TL;DR samples file with the offline proxy reward model (the real data's
posts and reference summaries), the logprob verifier picking, win rates against the reference
summaries and the KL of reward best-of-2 selection; the viewer's table and problem page are checked
against the run's grade and score rows and metrics.json."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from test_kl import COMPLETIONS
from test_sampler_hf import build_tiny_model

from bonbench.api.task import get_task
from bonbench.apps.cli import main
from bonbench.apps.viewer.problems import problem_table
from bonbench.apps.viewer.prompts import TaskTexts
from bonbench.apps.viewer.runs import find_runs
from bonbench.apps.viewer.site import Site
from bonbench.plugins.samplers import select
from bonbench.plugins.samplers.scripted import ScriptedSampler
from bonbench.run.execute import execute
from bonbench.run.plan import plan
from bonbench.run.request import RunRequest


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_tldr_run_shows_rewards_win_rates_and_kl(tmp_path: Path, data_dir: Path,
                                                   monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("BONBENCH_CACHE", str(tmp_path / "cache"))
    problems = get_task("tldr", data_dir=str(data_dir)).problems[:4]
    # the reference itself, the post copied, the title
    rows = [{"problem_id": p.id, "sample_idx": i, "completion": text, "n_tokens": len(text.split()),
             "finish_reason": "stop", "logprob": -float(3 - i)}
            for p in problems for i, text in enumerate([" " + p.target, " " + p.input, " " + p.meta["title"]])]
    samples = tmp_path / "t.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["score", "--task", "tldr", "--samples", str(samples), "--reward-model", "tldr-proxy-eval",
                 "--verifier", "logprob", "--metric", "mean,max@2,bon@3,winrate,winrate@3", "--n-boot", "20",
                 "--data-dir", str(data_dir), "--out", str(tmp_path / "results")]) == 0
    run_dir = Path(capsys.readouterr().out.strip().splitlines()[-1])
    doc = json.loads((run_dir / "metrics.json").read_text())
    assert {"winrate", "winrate@3", "kl_bon@2"} <= set(doc["metrics"])
    (grades_file,) = [g for g in (run_dir / "grades").glob("*.jsonl") if not g.name.endswith(".references.jsonl")]
    rewards = {(g["problem_id"], g["sample_idx"]): g["score"] for g in _rows(grades_file)}
    scores = {(s["problem_id"], s["sample_idx"]): s["score"] for s in _rows(run_dir / "scores" / "logprob.jsonl")}

    (run,) = find_runs([run_dir], keep=False)
    site = Site([run], TaskTexts(None))
    table = site.tables.table(run)
    assert table == problem_table(run)  # problems.json (the pipeline's) and the rows give the same table
    for row, p in zip(table, problems, strict=True):
        mine = [rewards[(p.id, i)] for i in range(3)]
        pick = max(range(3), key=lambda i: (scores[(p.id, i)], -i))  # the highest score, the first on a tie
        assert row.rewards and row.pick == pick and row.pick_value == pytest.approx(mine[pick])
        assert row.pass_rate == pytest.approx(sum(mine) / 3) and row.best == pytest.approx(max(mine))
        assert ("pick_below_mean" in row.flags) == (mine[pick] < sum(mine) / 3)
    page = site.render(f"runs/{run.id}/index.html") or ""
    assert '<th data-sort="pass">mean reward</th>' in page and '<option value="pick_below_mean">' in page
    for name in ("winrate", "winrate@3", "kl_bon@2"):
        value = doc["metrics"][name]["value"]
        assert re.search(rf"<td class=\"l\">{re.escape(name)}</td><td>{value:.4f}</td>", page), name
    problem = site.render(f"runs/{run.id}/problems/0.html") or ""
    for i in range(3):
        assert f"reward {rewards[(problems[0].id, i)]:.3f}" in problem
    pick = table[0].pick
    assert f"#{pick} (score {scores[(problems[0].id, pick)]:.4f}; reward {rewards[(problems[0].id, pick)]:.3f})" in problem
    assert not math.isnan(table[0].mean_tokens)


def test_the_kl_terms_of_a_run_with_a_reference_policy_are_shown_per_sample(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run made by the runner with ``kl`` to a reference policy (tests/test_kl.py's task, its
    samples replayed; two tiny random models) stores both log-probabilities as scores (lp-*); each
    sample's page shows both beside its verdict, their difference being the sample's KL term, and the
    metric table the run's kl."""
    monkeypatch.setenv("BONBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(select, "get_sampler", lambda *a, **k: ScriptedSampler({f"t/{i}": COMPLETIONS for i in range(3)}))
    policy, ref = (build_tiny_model(tmp_path / name, seed=seed).path for name, seed in (("a", 0), ("b", 1)))
    req = RunRequest(task="tiny_kl", model=policy, backend="hf", n=5, metrics=("pass@1", "kl"), ref_model=ref,
                     dtype="float32", out=tmp_path)
    doc = execute(plan(req)).docs[0]
    (run,) = find_runs([tmp_path / "runs"], keep=False)
    lp = {p.stem: {(r["problem_id"], r["sample_idx"]): r["score"] for r in _rows(p)}
          for p in (run.path / "scores").glob("lp-*.jsonl")}
    assert len(lp) == 2
    site = Site([run], TaskTexts(None))
    page = site.render(f"runs/{run.id}/index.html") or ""
    assert re.search(rf'<td class="l">kl</td><td>{doc["metrics"]["kl"]["value"]:.4f}</td>', page)
    problem = site.render(f"runs/{run.id}/problems/0.html") or ""
    pid = site.tables.table(run)[0].problem_id
    for i in range(5):
        shown = ", ".join(f"{name} {scores[(pid, i)]:.4f}" for name, scores in sorted(lp.items()))
        assert f"other scores: {shown}" in problem
