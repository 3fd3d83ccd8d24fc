"""A search's final step scores are the verifier's rows (issue 34): the PRM that guided the search
is the run's verifier, so its rows of the N candidates are written from the step scores the search
already has, and the verify stage does not score them a second time.

On the tiny base policy and the tiny Math-Shepherd PRM of ``test_search_run``: the reused rows
equal what scoring the candidates again gives (the same model input; compared to 1e-6, the HF
engine's padded batches differ from the search's), the PRM's ``score`` is called only for the
candidates the search could not vouch for, and the ledger's selection row counts no second pass.
A candidate whose text the PRM family splits otherwise (skywork's ``"\\n"``), or whose steps the
search scored only with a lookahead rollout after them, is re-scored, with the reason in ``trees.jsonl``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from prm_models import build_skywork
from test_search_run import models, rows, run_args, run_dir

from bonbench.api.search.records import Candidate, Node, SearchCost, SearchResult
from bonbench.api.think import AnswerView, ThinkOptions
from bonbench.apps.cli import main
from bonbench.core.records import Sample, Score
from bonbench.pipeline.ledger import compute_ledger
from bonbench.pipeline.search import reused_rows
from bonbench.plugins.rewards.prm.verifier import PRMVerifier, prm_verifier

__all__ = ["models"]  # the module-scoped fixture of test_search_run, shared here


def scored_samples(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every sample the PRM's ``score`` (the verify stage's second pass) is asked for, from now on."""
    asked: list[tuple[str, int]] = []
    real = PRMVerifier.score

    def counted(self: PRMVerifier, problems: Any, samples: Any, grades: Any) -> list[Score]:
        asked.extend(s.key for s in samples)
        return real(self, problems, samples, grades)

    monkeypatch.setattr(PRMVerifier, "score", counted)
    return asked


LOOKAHEAD = "rescored: the search scored these steps only inside a longer list (a lookahead rollout)"


def test_the_candidates_rows_are_the_search_step_scores(models: dict[str, Path], data_dir: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    asked = scored_samples(monkeypatch)
    out = tmp_path / "out"
    assert main(run_args(models, data_dir, out, "-S", "width=2", "-S", "max_iterations=3")) == 0
    root = run_dir(out)
    notes = {(t["problem_id"], c["sample_idx"]): c["verifier_row"]
             for t in rows(root / "search" / "trees.jsonl") for c in t["candidates"]}
    reused = {k for k, note in notes.items() if note == "reused"}
    assert len(notes) == 8 and len(reused) == 8, notes  # every final beam was scored as its own list of steps
    assert all(note == "reused" or note.startswith("rescored: ") for note in notes.values())
    # the verify stage scored only what the search did not vouch for
    assert sorted(asked) == sorted(k for k in notes if k not in reused)
    (scores_file,) = (root / "scores").glob("prm-*.jsonl")
    stored = {(r["problem_id"], r["sample_idx"]): r for r in rows(scores_file)}
    assert len(stored) == 8 and all(stored[k]["tokens"] == 0 and stored[k]["calls"] == 0 for k in reused)
    # the ledger: the search's entry counts the PRM; selecting among the candidates adds only the re-scored ones
    ledger = compute_ledger(root).total()
    selection = next(v for v in ledger.verifiers if v.verifier.startswith("prm-"))
    search = next(v for v in ledger.verifiers if v.verifier == "search")
    assert search.calls and search.calls > 0
    assert selection.calls == sum(stored[k]["calls"] for k in notes if k not in reused)
    capsys.readouterr()
    assert main(["report", str(root)]) == 0
    assert "verifier rows: 8 of 8 candidates' are the search's step scores, no second pass" in capsys.readouterr().out
    # a second pass over the same candidates (the run's rows dropped) gives the same rows
    again = tmp_path / "again" / root.relative_to(out)  # the <out>/runs/<task>/<model>/<hash> layout
    shutil.copytree(root, again)
    shutil.rmtree(again / "scores")
    asked.clear()
    assert main(["score", str(again), "--data-dir", str(data_dir)]) == 0
    assert sorted(asked) == sorted(notes)
    (fresh_file,) = (again / "scores").glob("prm-*.jsonl")
    fresh = {(r["problem_id"], r["sample_idx"]): r for r in rows(fresh_file)}
    for key in notes:
        a, b = stored[key], fresh[key]
        assert (a["aggregation"], a["verifier_fingerprint"], len(a["steps"])) == (
            b["aggregation"], b["verifier_fingerprint"], len(b["steps"]))
        assert a["score"] == pytest.approx(b["score"], abs=1e-6)
        assert a["steps"] == pytest.approx(b["steps"], abs=1e-6)
    assert compute_ledger(again).total() != ledger  # the second pass is counted where it ran
    fresh_calls = next(v for v in compute_ledger(again).total().verifiers if v.verifier.startswith("prm-")).calls
    assert fresh_calls == sum(1 for r in fresh.values() if r["steps"]) > (selection.calls or 0)
    metrics, metrics_again = (json.loads((d / "metrics.json").read_text())["metrics"] for d in (root, again))
    assert {k: v["value"] for k, v in metrics.items()} == {k: v["value"] for k, v in metrics_again.items()}


@pytest.fixture(scope="module")
def skywork(tmp_path_factory: pytest.TempPathFactory) -> PRMVerifier:
    return prm_verifier(str(build_skywork(tmp_path_factory.mktemp("reuse") / "skywork-o1-open-prm")))


def test_a_text_the_family_splits_otherwise_is_rescored(skywork: PRMVerifier) -> None:
    assert skywork.family.split == "\n"
    same = skywork.reused_row(Sample("p", 3, "a b\n\nc d", 5, "stop"), ("a b", "c d"), (0.25, 0.75))
    assert isinstance(same, Score) and same.key == ("p", 3) and same.steps == (0.25, 0.75)
    assert same.aggregation == "min" and same.score == 0.25 and (same.tokens, same.calls) == (0, 0)
    # a step holding a line break is two steps for skywork: the search scored one
    other = skywork.reused_row(Sample("p", 0, "a\nb\n\nc", 5, "stop"), ("a\nb", "c"), (0.25, 0.75))
    assert isinstance(other, str) and "skywork" in other and "'\\n'" in other
    # through the answer view: a reasoning trace cut off leaves other steps than the search scored
    view = AnswerView(skywork, ThinkOptions())
    assert isinstance(view.reused_row(Sample("p", 0, "a b\n\nc d", 5, "stop"), ("a b", "c d"), (0.5, 0.5)), Score)
    assert isinstance(view.reused_row(Sample("p", 0, "x</think>c d", 5, "stop"), ("x</think>c d",), (0.5,)), str)


def test_steps_scored_only_with_a_rollout_are_rescored(skywork: PRMVerifier) -> None:
    lead = Node(None, 1, "a b", 0.5, 0.5, "step", 3, True)
    leaf = Node(0, 2, "c d", 0.25, 0.25, "step", 3, True)
    result = SearchResult("p", "dvts", (), 2, 0, (Candidate(0, "a b", ("a b",), (0.5,), 0.5, "step"),
                                                  Candidate(1, "a b\n\nc d", ("a b", "c d"), (0.5, 0.25), 0.25,
                                                            "step")),
                          (lead, leaf), SearchCost())
    samples = [Sample("p", 0, "a b", 3, "step"), Sample("p", 1, "a b\n\nc d", 6, "step")]
    # "a b" was scored as a list of its own; "a b", "c d" only with a greedy rollout after it
    got, notes = reused_rows(skywork, result, samples, {("a b",): (0.5,), ("a b", "c d", "e"): (0.5, 0.25, 0.75)})
    assert notes == ["reused", LOOKAHEAD] and [r.key for r in got] == [("p", 0)] and got[0].steps == (0.5,)
    _, none = reused_rows(None, result, samples, {("a b",): (0.5,)})
    assert all(n.startswith("rescored: ") for n in none)
