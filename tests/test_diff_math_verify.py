"""benchmarks/diff_math_verify.py: both verdicts per pair, the disagreement listing, the counts and
the labels' bookkeeping (unlabelled and stale rows), on a few synthetic pairs and a tiny run directory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bonbench.core.records import Problem, Sample
from bonbench.core.store import RunStore
from bonbench.plugins.graders.math import MathGrader

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture()
def diff(monkeypatch: pytest.MonkeyPatch):
    # on sys.path, so that the spawned math-verify worker can import the module too
    monkeypatch.syspath_prepend(str(BENCH))
    import diff_math_verify

    return diff_math_verify


def test_pairs_verdicts_and_counts(diff) -> None:
    golds = {"p": "0.1", "q": "\\frac{1}{99!}", "r": "2"}
    problems = {pid: Problem(pid, "", g) for pid, g in golds.items()}
    texts = [("p", 0, "So the rate is $\\boxed{10\\%}$."),  # percent: bonbench reads 10, math-verify 0.1
             ("q", 0, "Hence $\\boxed{\\frac{1}{100!}}$."),  # math-verify's rounding erases the difference
             ("r", 0, "The answer is $\\boxed{2}$."), ("r", 1, "The answer is $\\boxed{3}$."),
             ("r", 2, "The final answer is $2$.")]
    samples = tuple(Sample(pid, i, t, 5, "stop") for pid, i, t in texts)
    src = diff.Source("synthetic", problems, samples, MathGrader(workers=1))
    verdicts = diff.compare([src], timeout=5)
    got = {(v.problem_id, v.sample_idx): (v.bonbench, v.math_verify) for v in verdicts}
    assert got == {("p", 0): (False, True), ("q", 0): (False, True), ("r", 0): (True, True),
                   ("r", 1): (False, False), ("r", 2): (True, True)}
    pct = next(v for v in verdicts if v.problem_id == "p")
    assert (pct.bonbench_answer, pct.bonbench_canonical, pct.gold) == ("10\\%", "10", "0.1")
    assert pct.math_verify_answer is not None and "10" in pct.math_verify_answer
    assert diff.counts(verdicts) == [("synthetic", 5, 3, 0, 2), ("total", 5, 3, 0, 2)]
    labels = {("synthetic", "p", 0): {"class": "convention", "reason": "percent", "bonbench": False}}
    table = diff.markdown(verdicts, labels)
    assert "| synthetic | 5 | 3 | 0 | 2 |" in table
    assert "| convention | 1 |" in table and "| unlabelled | 1 |" in table
    assert "| synthetic | p | 0 | `0.1` | `10\\%` |" in table
    # a label given for the other direction (bonbench said right) does not hold for this row
    flipped = {("synthetic", "p", 0): {"class": "convention", "reason": "percent", "bonbench": True}}
    assert "| unlabelled | 2 |" in diff.markdown(verdicts, flipped)


def _stuck_worker(conn, timeout: int) -> None:
    """A math-verify worker that hangs on the pair "stuck" (as in a computation stuck in C) and ignores its timeout."""
    import time

    while (item := conn.recv()) is not None:
        if item[1] == "stuck":
            time.sleep(600)
        conn.send((True, item[1], None))


def test_a_stuck_pair_is_a_timeout_and_the_next_pair_gets_a_fresh_worker(diff, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # the spawned worker imports _stuck_worker from here
    mv = diff.MathVerify(1, grace=0.5, startup=30.0, target=_stuck_worker)
    try:
        assert mv.judge("1", "fine") == (True, "fine", None)
        stuck = mv.proc
        assert mv.judge("1", "stuck") == (False, None, "timeout")  # after 1 * 3 + 0.5 s
        assert not stuck.is_alive() and mv.proc is None
        assert mv.judge("1", "after") == (True, "after", None)
        assert mv.proc is not stuck
    finally:
        mv.close(kill=True)


def test_run_directory_end_to_end(tmp_path: Path, data_dir: Path) -> None:
    rows = [json.loads(x) for x in (data_dir / "math500" / "test.jsonl").read_text(encoding="utf-8").splitlines()]
    ints = [r for r in rows if r["answer"].isdigit()][:2]
    run = tmp_path / "runs" / "math500" / "toy" / "abc123"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"config": {"task": "math500", "task_args": {}}}), encoding="utf-8")
    a, b = ints[0], ints[1]
    RunStore(run).samples.append([
        Sample(a["unique_id"], 0, f"The answer is $\\boxed{{{a['answer']}}}$.", 5, "stop"),
        Sample(a["unique_id"], 1, f"So there are ${a['answer']}$ in all.", 5, "stop"),  # no marker: bonbench reads nothing
        Sample(b["unique_id"], 0, f"The answer is $\\boxed{{{int(b['answer']) + 1}}}$.", 5, "stop"),
    ])
    source = "run:math500/toy/abc123"
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"source": source, "problem_id": b["unique_id"], "sample_idx": 0, "bonbench": True,
                                  "class": "bonbench right", "reason": "no longer a disagreement"}) + "\n", encoding="utf-8")
    out = tmp_path / "diff.jsonl"
    proc = subprocess.run([sys.executable, str(BENCH / "diff_math_verify.py"), str(run), "--data-dir", str(data_dir),
                           "--out", str(out), "--labels", str(labels), "--markdown"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    listed = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [(r["problem_id"], r["sample_idx"], r["bonbench"], r["math_verify"]) for r in listed] == [
        (a["unique_id"], 1, False, True)]
    assert listed[0]["gold"] == a["answer"] and listed[0]["bonbench_answer"] is None and listed[0]["class"] is None
    lines = proc.stdout.splitlines()
    assert any(x.split() == [source, "3", "2", "0", "1"] for x in lines), proc.stdout
    assert "disagreements by class: bonbench right 0, math-verify right 0, convention 0, unlabelled 1" in lines
    assert any(x.startswith("unlabelled: ") and a["unique_id"] in x for x in lines)
    assert f"stale label (no longer this disagreement): {[source, b['unique_id'], 0]}" in lines
    assert "math-verify: 3/3 pairs (100.0%)" in proc.stderr


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(BENCH / "diff_math_verify.py"), "--references", "dev"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.strip() == "error: --references 'dev': use test, train or test,train"
