"""Adaptive runs with a half-width target on maj@k or bon@k, met with a stated probability (issue 35,
point 3): ``bonbench run --adaptive pilot=4,halfwidth=H[,confidence=Q]`` with maj@2 or bon@2 first, on
the real MATH test problems with the scripted model of ``adaptive_model`` and the real grader. The
decision is what ``allocate_halfwidth_votes`` gives on the pilots read back by hand from the stored
grades (and the verifier's stored scores), the run id hashes the confidence and a bon@k target's
verifier, and bad values are one error line. The kill-and-resume test of such a run is in
tests/test_adaptive_run.py (``test_a_killed_adaptive_run_resumes_to_the_same_rows_and_decisions``)."""

from __future__ import annotations

import json
from pathlib import Path

import adaptive_model
import pytest
from test_adaptive_run import CAP, LIMIT, PILOT, one_error, rows, run_args, run_dir

from bonbench.apps.cli import main
from bonbench.metrics.adaptive_votes import Pilot, allocate_halfwidth_votes

MAJ_SPEC, BON_SPEC = "pilot=4,halfwidth=0.16,confidence=0.9", "pilot=4,halfwidth=0.145"


@pytest.fixture
def scripted(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for (module, name), value in adaptive_model.patches(data_dir).items():
        monkeypatch.setattr(module, name, value)


def pilots(root: Path, pids: list[str], scores: str | None = None) -> list[Pilot]:
    """Each problem's pilot from the stored rows: right answers vote together, a wrong one for its answer."""
    grades = {(g["problem_id"], g["sample_idx"]): g for g in rows(root / "grades" / "math.jsonl")}
    scored = {} if scores is None else {(s["problem_id"], s["sample_idx"]): s["score"]
                                        for s in rows(root / "scores" / f"{scores}.jsonl")}
    out = []
    for pid in pids:
        gs = [grades[(pid, i)] for i in range(PILOT)]
        out.append(Pilot(tuple(1.0 if g["correct"] else 0.0 for g in gs),
                         tuple("right" if g["correct"] else g["answer"] for g in gs),
                         tuple(float(scored[(pid, i)]) for i in range(PILOT)) if scored else ()))
    return out


def test_a_maj_target_at_a_confidence_samples_what_the_pilots_answers_predict(
        scripted: None, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(run_args(data_dir, tmp_path, adaptive=MAJ_SPEC, metrics=("maj@2", "pass@1,2"))) == 0
    root = run_dir(tmp_path)
    hashed = json.loads((root / "config.json").read_text())["hashed"]["adaptive"]
    assert hashed == {"pilot": PILOT, "halfwidth": 0.16, "metric": "maj@2", "floor": 2, "n": CAP, "confidence": 0.9,
                      "problem_set": hashed["problem_set"]}
    decision = json.loads((root / "adaptive.json").read_text())
    pids = list(decision["problems"])
    want, hw = allocate_halfwidth_votes(pilots(root, pids), "maj", 0.16, k=2, floor=2, cap=CAP - PILOT, confidence=0.9)
    for pid, d in zip(pids, want, strict=True):
        got = decision["problems"][pid]
        assert (got["n"], got["second"], got["weight"]) == (PILOT + d.second[got["s1"]], list(d.second), d.weight)
    assert decision["target"] == {"metric": "maj@2", "halfwidth": 0.16, "predicted": hw.predicted, "at_cap": hw.at_cap,
                                  "between": hw.between, "reachable": True, "confidence": 0.9, "expected": hw.expected}
    assert hw.expected is not None and hw.expected < hw.predicted <= 0.16
    assert len({p["n"] for p in decision["problems"].values()}) > 1
    assert sum(1 for _ in rows(root / "samples.jsonl")) == decision["spend"]["samples"] < CAP * LIMIT
    doc = json.loads((root / "metrics.json").read_text())
    lo, hi = doc["metrics"]["maj@2"]["ci95"]
    assert doc["adaptive"]["target"] == {**decision["target"], "achieved": pytest.approx((hi - lo) / 2, abs=1e-12)}
    capsys.readouterr()
    assert main(["report", str(root)]) == 0
    assert (f"target 95% CI half-width 0.16 on maj@2 with probability 0.9: predicted {hw.predicted:.4f}, achieved "
            f"{(hi - lo) / 2:.4f}") in capsys.readouterr().out.replace("\n", " ")


def test_a_bon_target_is_decided_from_the_verifiers_scores_of_the_pilots(scripted: None, data_dir: Path,
                                                                         tmp_path: Path) -> None:
    assert main(run_args(data_dir, tmp_path, "--verifier", "oracle", adaptive=BON_SPEC, metrics=("bon@2", "pass@1,2"))) == 0
    root = run_dir(tmp_path)
    hashed = json.loads((root / "config.json").read_text())["hashed"]["adaptive"]
    assert hashed["verifier"] == "oracle" and hashed["metric"] == "bon@2" and "confidence" not in hashed
    decision = json.loads((root / "adaptive.json").read_text())
    pids = list(decision["problems"])
    want, hw = allocate_halfwidth_votes(pilots(root, pids, scores="oracle"), "bon", 0.145, k=2, floor=2, cap=CAP - PILOT)
    assert [decision["problems"][pid]["second"] for pid in pids] == [list(d.second) for d in want]
    assert decision["target"]["predicted"] == hw.predicted and "confidence" not in decision["target"]
    assert len({p["n"] for p in decision["problems"].values()}) > 1
    assert sum(1 for _ in rows(root / "samples.jsonl")) == decision["spend"]["samples"]


def test_the_run_id_hashes_the_confidence_and_a_bon_targets_verifier(scripted: None, data_dir: Path,
                                                                    tmp_path: Path) -> None:
    from bonbench.pipeline.adaptive_spec import parse_adaptive
    from bonbench.run.plan import plan
    from bonbench.run.request import RunRequest

    def run_id(spec: str, metric: str = "maj@2", **change: object) -> str:
        fields: dict[str, object] = {"task": "math", "metrics": (metric, "pass@1,2"), "n": CAP, "backend": "hf",
                                     "limit": LIMIT, "data_dir": str(data_dir), "out": tmp_path,
                                     "adaptive": parse_adaptive(spec)}
        return plan(RunRequest(**{**fields, **change})).runs[0].run_hash  # type: ignore[arg-type]  # the fields above

    base = run_id("pilot=4,halfwidth=0.16")
    assert run_id("pilot=4,halfwidth=0.16,confidence=0.5") == base  # the default, said or not: the same samples
    others = [run_id(MAJ_SPEC), run_id("pilot=4,halfwidth=0.16,confidence=0.95"), run_id(BON_SPEC, "bon@2"),
              run_id(BON_SPEC, "bon@2", verifier="oracle"), run_id(BON_SPEC, "pass@2")]
    assert len({base, *others}) == 1 + len(others)


def test_a_pilot_too_large_to_enumerate_at_k_is_one_error_line(scripted: None, data_dir: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    line = one_error(main(run_args(data_dir, tmp_path / "out", adaptive="pilot=11,halfwidth=0.1",
                                   metrics=("maj@5", "pass@1"))), capsys.readouterr().err)
    assert "would enumerate 248832 5-tuples per problem (at most 200000): use a smaller pilot" in line
    assert not (tmp_path / "out" / "runs").exists()
