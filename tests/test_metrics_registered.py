"""The new metric kinds as a user meets them: registered records, run end to end, stored with their
verifier, equal to the pure estimators on the stored grades, and one-line errors for bad input.

The estimators themselves are checked against enumeration of every k-subset in
``tests/test_metrics_reliability.py``, ``test_metrics_wmaj.py`` and ``test_metrics_bom.py``; this file
checks that ``bonbench run`` / ``score`` compute exactly those functions on a run's grades and scores.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import toy_plugin

from bonbench.api.metric.grammar import parse_metrics
from bonbench.api.metric.kind import metric_kind
from bonbench.api.verifier import VERIFIERS, register_verifier
from bonbench.apps.cli import main
from bonbench.core import models
from bonbench.core.records import Grade, Problem, Sample, Score
from bonbench.metrics.bom import bom_at_k
from bonbench.metrics.reliability import gpass_at_k, mgpass_at_k, pass_hat_at_k
from bonbench.metrics.weighted import wmaj_at_k
from bonbench.pipeline.votes import vote_answers
from bonbench.plugins.samplers import select

NEW = ["pass^2", "gpass@4:.50", "mgpass@3", "wmaj@4", "bom@4:0.4"]


class HashScore:
    """A verifier whose scores are spread over [0, 1) and lean towards right answers."""

    name = "hashscore"
    version = 1
    fingerprint = "h1"
    uses_grades = True

    def score(self, problems: Mapping[str, Problem], samples: Sequence[Sample],
              grades: Mapping[tuple[str, int], Grade]) -> list[Score]:
        out = []
        for s in samples:
            h = int(hashlib.sha256(f"{s.problem_id}:{s.sample_idx}".encode()).hexdigest(), 16) % 1000 / 1000
            right = bool(grades[s.key].correct)
            out.append(Score(s.problem_id, s.sample_idx, self.name, round(0.5 * h + (0.4 if right else 0.0), 3)))
        return out


@pytest.fixture
def toy_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models, "resolve_model", lambda name: models.ResolvedModel(
        name="toy-model", path="toy-model", is_chat=False, fingerprint="toy", revision=None))
    monkeypatch.setattr(select, "get_sampler", lambda *a, **k: toy_plugin.SlowScripted(0.0))
    register_verifier("hashscore")(HashScore)
    yield
    VERIFIERS.remove("hashscore")


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def _rows(path: Path) -> dict[tuple[str, int], dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {(r["problem_id"], r["sample_idx"]): r for r in rows}


def test_the_new_kinds_are_registered_records() -> None:
    assert [s.name for s in parse_metrics(NEW)] == ["pass^2", "gpass@4:0.5", "mgpass@3", "wmaj@4", "bom@4:0.4"]
    assert metric_kind("wmaj").estimate == "monte_carlo" and metric_kind("bom").estimate == "exact"
    for kind in ("wmaj", "bom"):
        assert {"answers", "scores"} <= metric_kind(kind).reads
    for kind in ("pass^", "gpass", "mgpass"):
        assert metric_kind(kind).reads == frozenset({"grades"}) and metric_kind(kind).direction == "higher"


def test_a_run_computes_the_estimators_on_its_stored_grades(toy_run: None, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    args = ["run", "--task", "toy", "--backend", "hf", "--n", "6", "--out", str(tmp_path), "--verifier", "hashscore"]
    args += [a for m in NEW for a in ("--metric", m)]
    code, out, err = _cli(capsys, *args)
    assert code == 0, err
    run = Path(out.strip().splitlines()[-1])
    doc = json.loads((run / "metrics.json").read_text())
    grades = _rows(run / "grades" / "exact.jsonl")
    scores = _rows(run / "scores" / "hashscore.jsonl")
    by_problem: dict[str, list[tuple[str, int]]] = {}
    for key in sorted(grades):
        by_problem.setdefault(key[0], []).append(key)
    for pid, keys in by_problem.items():
        gs = [Grade(pid, i, "exact", 1, grades[(pid, i)]["correct"], answer=grades[(pid, i)]["answer"]) for _, i in keys]
        correct = [1.0 if g.correct else 0.0 for g in gs]
        answers = vote_answers(gs)
        sc = [scores[key]["score"] for key in keys]
        pp = doc["per_problem"]
        assert pp["pass^2"][pid] == pytest.approx(pass_hat_at_k(correct, 2), abs=1e-12)
        assert pp["gpass@4:0.5"][pid] == pytest.approx(gpass_at_k(correct, 4, 0.5), abs=1e-12)
        assert pp["mgpass@3"][pid] == pytest.approx(mgpass_at_k(correct, 3), abs=1e-12)
        assert pp["bom@4:0.4"][pid] == pytest.approx(bom_at_k(answers, correct, sc, 4, 0.4), abs=1e-12)
        # C(6, 4) = 15 subsets: exact by enumeration
        assert pp["wmaj@4"][pid] == pytest.approx(wmaj_at_k(answers, correct, sc, 4), abs=1e-12)
    for name in ("wmaj@4", "bom@4:0.4"):
        assert doc["metrics"][name]["verifier"] == "hashscore"
    assert doc["metrics"]["wmaj@4"].get("estimate", "exact") == "exact"  # every subset was counted
    curves = json.loads((run / "curves.json").read_text())
    assert {"pass^", "gpass:0.5", "mgpass", "wmaj", "bom:0.4"} <= set(curves)
    code, out, err = _cli(capsys, "report", str(run))
    assert code == 0 and all(name in out for name in ("pass^2", "gpass@4:0.5", "wmaj@4", "bom@4:0.4")), err
    # the report fits the coverage law to rising curves only (MetricKind.scaling_law)
    code, out, err = _cli(capsys, "plot", str(run))
    assert code == 0, err
    fitted = json.loads((run / "report" / "report.json").read_text())["runs"][0]["fits"]
    assert {"pass", "maj", "wmaj"} <= set(fitted) and not {"pass^", "gpass:0.5", "mgpass", "bom:0.4"} & set(fitted)


@pytest.mark.parametrize(("metric", "verifier", "needle"), [
    ("gpass@4", "hashscore", "gpass@4 needs its parameter: gpass@k:tau with tau in [0, 1]"),
    ("gpass@4:1.5", "hashscore", "tau must be a number in [0, 1]"),
    ("bom@4:-0.1", "hashscore", "share must be a number in [0, 1]"),
    ("wmaj@8", "hashscore", "wmaj@8 need(s) k <= 6"),
    ("wmaj@4", "logprob", "wmaj@k needs non-negative verifier scores"),
])
def test_bad_metric_input_is_one_line(toy_run: None, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      metric: str, verifier: str, needle: str) -> None:
    code, _, err = _cli(capsys, "run", "--task", "toy", "--backend", "hf", "--n", "6", "--out", str(tmp_path),
                        "--verifier", verifier, "--metric", metric)
    lines = err.strip().splitlines()
    assert code == 1 and lines[-1].startswith("error: ") and needle in lines[-1], err


def test_a_monte_carlo_metric_is_stored_shown_and_gated_as_one(toy_run: None, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # n = 30: C(30, 4) = 27,405 subsets per problem, more than wmaj@4 counts, so it samples
    code, out, err = _cli(capsys, "run", "--task", "toy", "--backend", "hf", "--n", "30", "--out", str(tmp_path),
                          "--verifier", "hashscore", "--metric", "wmaj@4", "--metric", "maj@4")
    assert code == 0, err
    run = Path(out.strip().splitlines()[-1])
    m = json.loads((run / "metrics.json").read_text())["metrics"]["wmaj@4"]
    assert m["estimate"] == "monte_carlo" and m["mc_draws"] >= 32 and 0 < m["mc_se"]
    half = (m["ci95"][1] - m["ci95"][0]) / 2
    assert m["mc_se"] < 0.1 * half  # the draws were chosen for this
    assert "maj@4" in json.loads((run / "metrics.json").read_text())["metrics"]
    assert f"{m['mc_se']:.4f}" in out  # the table's MC SE column
    base = tmp_path / "base.json"
    code, _, err = _cli(capsys, "gate", "--run", str(run), "--save-baseline", "--out", str(base))
    assert code == 0, err
    code, out, err = _cli(capsys, "gate", "--run", str(run), "--baseline", str(base))
    assert code == 0 and "gate: PASS" in out and "wmaj@4 is a Monte Carlo estimate" in out, out + err


def test_rebuilt_curves_vote_in_the_pipelines_classes(toy_run: None, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """``run_rows.per_problem_curves`` rebuilds maj@k with the classes the pipeline scored: right
    answers written in two forms vote together there too."""
    from bonbench.apps.analysis.run_rows import per_problem_curves
    from bonbench.apps.analysis.rundir import load_run

    code, out, err = _cli(capsys, "run", "--task", "toy", "--backend", "hf", "--n", "6", "--out", str(tmp_path),
                          "--metric", "maj@4")
    assert code == 0, err
    run = Path(out.strip().splitlines()[-1])
    path = run / "grades" / "exact.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    flipped = 0
    for r in rows:  # every other right answer in a second form
        if r["correct"] and r["sample_idx"] % 2:
            r["answer"] += ".0"
            flipped += 1
    assert flipped
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = _cli(capsys, "score", str(run), "--metric", "maj@4")
    assert code == 0, err
    stored = json.loads((run / "metrics.json").read_text())["per_problem"]["maj@4"]
    rebuilt = per_problem_curves(load_run(run), "maj", [4])
    assert set(rebuilt) == set(stored)
    for pid, values in rebuilt.items():
        assert values[0] == pytest.approx(stored[pid], abs=1e-12), pid
