"""The commands that read verifier scores accept every verifier scheme: ``score`` with bon@k, wmaj@k
and bom@k, ``eval-verifier``, ``leaderboard`` and ``list verifiers``, each with a ``prm:`` verifier (a
tiny Math-Shepherd PRM), a local ``judge:`` (a tiny Llama judge) and a served one (the scripted
judge server), on a run of 3 real MATH-500 problems x 4 imported samples."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from judge_models import JudgeServer, build_tiny_judge
from prm_models import build_math_shepherd

from bonbench.api.verifier import get_verifier, verifier_schemes
from bonbench.apps.cli import main
from bonbench.pipeline.ledger import compute_ledger
from bonbench.plugins.rewards.prm.verifier import parse_prm

N = 4
REPO = Path(__file__).resolve().parents[1]


def _completions(answer: str) -> list[str]:
    """Two right answers (one multi-step, one the judge server likes), two wrong ones."""
    return [f"Step 1: we read the problem.\n\nStep 2: we compute it.\n\nThe answer is \\boxed{{{answer}}}",
            f"GOOD: we compute it.\n\nThe answer is \\boxed{{{answer}}}",
            "Step 1: a guess.\n\nThe answer is \\boxed{0}",
            "The answer is \\boxed{1}"]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("newv")
    rows = [json.loads(line) for line in (data_dir / "math500" / "test.jsonl").read_text().splitlines()[:3]]
    samples = base / "samples.jsonl"
    samples.write_text("".join(json.dumps({"problem_id": r["unique_id"], "sample_idx": j, "completion": c}) + "\n"
                               for r in rows for j, c in enumerate(_completions(r["answer"]))))
    results = base / "results"
    assert main(["score", "--task", "math500", "--samples", str(samples), "--model", "policy", "--data-dir", str(data_dir),
                 "--out", str(results), "--n-boot", "10", "--metric", "pass@1"]) == 0
    return {"run": next((results / "runs" / "math500").glob("*/*")), "results": results, "samples": samples,
            "prm": build_math_shepherd(base / "math-shepherd-mistral-7b-prm"), "judge": build_tiny_judge(base / "judge")}


@pytest.fixture(scope="module")
def server() -> Iterator[JudgeServer]:
    with JudgeServer() as s:
        yield s


def _spec(kind: str, world: dict[str, Path], server: JudgeServer) -> str:
    return {"prm": f"prm:{world['prm']}?agg=min", "judge": f"judge:{world['judge']}?batch_size=4",
            "served": f"judge:openai:{server.url}?model=judge-model&max_attempts=2"}[kind]


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _by_hand(world: dict[str, Path], verifier: str) -> tuple[float, float]:
    """(bon@n, wmaj@n) from the stored rows: at k = n the top-scored sample, and the answer class with
    the largest score sum, decide; ties are split evenly."""
    run = world["run"]
    grades = {(g["problem_id"], g["sample_idx"]): g for g in _rows(next((run / "grades").glob("*.jsonl")))}
    scores = {(s["problem_id"], s["sample_idx"]): s["score"] for s in _rows(run / "scores" / f"{verifier}.jsonl")}
    bon, wmaj = [], []
    for pid in sorted({k[0] for k in grades}):
        keys = [k for k in grades if k[0] == pid]
        top = max(scores[k] for k in keys)
        bon.append(sum(bool(grades[k]["correct"]) for k in keys if scores[k] == top) / sum(scores[k] == top for k in keys))
        mass: dict[str, float] = {}
        right: dict[str, bool] = {}
        for k in keys:
            mass[grades[k]["answer"]] = mass.get(grades[k]["answer"], 0.0) + scores[k]
            right[grades[k]["answer"]] = bool(grades[k]["correct"])
        best = [a for a in mass if mass[a] == max(mass.values())]
        wmaj.append(sum(right[a] for a in best) / len(best))
    return sum(bon) / len(bon), sum(wmaj) / len(wmaj)


@pytest.mark.parametrize("kind", ["prm", "judge", "served"])
def test_score_with_bon_wmaj_and_bom_takes_every_new_verifier(world: dict[str, Path], server: JudgeServer, kind: str,
                                                             data_dir: Path) -> None:
    spec = _spec(kind, world, server)
    metrics = f"bon@{N},wmaj@{N},bom@{N}:0,bom@{N}:0.5"
    assert main(["score", str(world["run"]), "--metric", metrics, "--verifier", spec, "--n-boot", "10",
                 "--data-dir", str(data_dir)]) == 0
    doc = json.loads((world["run"] / "metrics.json").read_text())
    name = get_verifier(spec).name
    got = doc["metrics"]
    assert all(got[m]["verifier"] == name for m in (f"bon@{N}", f"wmaj@{N}", f"bom@{N}:0", f"bom@{N}:0.5"))
    bon, wmaj = _by_hand(world, name)
    assert got[f"bon@{N}"]["value"] == pytest.approx(bon) and got[f"wmaj@{N}"]["value"] == pytest.approx(wmaj)
    assert got[f"bom@{N}:0"]["value"] == pytest.approx(bon)  # no class is too small: the verifier's best of all
    assert 0.0 <= got[f"bom@{N}:0.5"]["value"] <= 1.0
    rows = _rows(world["run"] / "scores" / f"{name}.jsonl")
    assert len(rows) == 3 * N and all(r["tokens"] > 0 and r["calls"] >= 1 for r in rows)
    cost = compute_ledger(world["run"]).total().verifier(name)
    assert cost is not None and cost.tokens == sum(r["tokens"] for r in rows) and cost.samples == 3 * N


def test_eval_verifier_takes_prm_and_judge_verifiers(world: dict[str, Path], server: JudgeServer, data_dir: Path,
                                                     tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    specs = [_spec(kind, world, server) for kind in ("prm", "judge", "served")] + ["oracle"]
    out = tmp_path / "eval.json"
    args = [a for s in specs for a in ("--verifier", s)]
    assert main(["eval-verifier", str(world["run"]), *args, "--k", str(N), "--n-boot", "10", "--data-dir", str(data_dir),
                 "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["verifiers"] == specs and doc["n_problems"] == 3 and doc["n"] == N
    assert set(doc["auroc"]) == set(specs) and doc["auroc"]["oracle"] == 1.0
    assert all(isinstance(doc["auroc"][s], float) and 0.0 <= doc["auroc"][s] <= 1.0 for s in specs)
    assert all(any(key.endswith(f":{s}") for key in doc["curves"]) for s in specs)
    assert set(doc["paired_bon_diff"]) == {f"{specs[0]} - {s}" for s in specs[1:]}
    printed = capsys.readouterr().out
    assert all(s.split("?")[0].split("/")[-1] in printed or s in printed for s in specs), printed


def test_leaderboard_takes_runs_scored_with_new_verifiers(world: dict[str, Path], server: JudgeServer, data_dir: Path,
                                                          tmp_path: Path) -> None:
    metrics = f"bon@{N},wmaj@{N}"
    assert main(["score", str(world["run"]), "--metric", metrics, "--verifier", _spec("prm", world, server),
                 "--n-boot", "10", "--data-dir", str(data_dir)]) == 0
    # a second model's run of the same samples, scored by the served judge
    assert main(["score", "--task", "math500", "--samples", str(world["samples"]), "--model", "other", "--data-dir",
                 str(data_dir), "--out", str(world["results"]), "--n-boot", "10", "--metric", metrics,
                 "--verifier", _spec("served", world, server)]) == 0
    prm, judge = (get_verifier(_spec(kind, world, server)).name for kind in ("prm", "served"))
    other = next((world["results"] / "runs" / "math500" / "other").glob("*"))
    values = {run: json.loads((run / "metrics.json").read_text())["metrics"] for run in (world["run"], other)}
    assert main(["leaderboard", str(world["results"]), "--metric", f"bon@{N}", "--metric", f"wmaj@{N}", "--out",
                 str(tmp_path), "--n-boot", "10"]) == 0
    text = (tmp_path / "leaderboard.md").read_text()
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    for model, run in (("policy", world["run"]), ("other", other)):
        assert all(f"{values[run][m]['value']:.3f}" in rows[model] for m in (f"bon@{N}", f"wmaj@{N}"))
    # which verifier made each row, and that a column mixes two, are said
    assert f"verifier={prm})" in text and f"verifier={judge})" in text
    assert f"math500 bon@{N}: the cells come from different verifiers ({', '.join(sorted([prm, judge]))})" in text
    board = json.loads((tmp_path / "leaderboard.json").read_text())
    assert {r["model"]: r["verifier"] for r in board["runs"]} == {"policy": prm, "other": judge}


def test_list_verifiers_gives_one_working_example_per_scheme(capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["list", "verifiers"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert {"oracle", "logprob"} <= set(lines)  # the plain names are their own examples
    schemes = [prefix for prefix, _ in verifier_schemes()]
    assert {"rm:", "learned:", "prm:", "judge:"} <= set(schemes)
    monkeypatch.chdir(REPO)  # the learned: example is the committed verifier folder
    for prefix in schemes:
        (line,) = [line for line in lines if line.startswith(prefix)]
        found = re.findall(r"e\.g\. (\S+)$", line)
        assert len(found) == 1 and found[0].startswith(prefix), line
        if prefix == "prm:":  # a hub id: the hub is out of reach here, so its options are checked
            source, options = parse_prm(found[0][len(prefix):])
            assert source.count("/") == 1 and options.agg == "min"
        else:  # built as a run would build it (nothing is loaded before it scores)
            assert get_verifier(found[0]).name
