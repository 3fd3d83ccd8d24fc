"""Ctrl-C during grading (issue 24 §4): a real ``bonbench score --task humaneval`` gets SIGINT
mid-grading, stops long before its remaining work would have finished, and every grade finished
before the signal is on disk, keyed by (problem_id, sample_idx)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bonbench.api.task import get_task

SLEEP_S = 4.0


@pytest.mark.slow
def test_sigint_stops_grading_and_keeps_finished_grades(data_dir: Path, tmp_path: Path) -> None:
    task = get_task("humaneval", data_dir=str(data_dir), exec_cache=str(tmp_path / "warm"))
    problems = task.problems[:12]
    rows = []
    for p in problems:  # per problem: a fast correct sample, then one that sleeps before answering
        rows.append({"task_id": p.id, "completion": p.meta["canonical_solution"]})
        rows.append({"task_id": p.id,
                     "completion": f"    import time\n    time.sleep({SLEEP_S})\n" + p.meta["canonical_solution"]})
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "results"
    env = dict(os.environ, BONBENCH_EXEC_CACHE=str(tmp_path / "exec"), PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "bonbench.apps.cli", "score", "--samples", str(samples), "--task", "humaneval",
           "--data-dir", str(data_dir), "--limit", str(len(problems)), "--out", str(out), "--metric", "pass@1",
           "-T", f"exec_cache={tmp_path / 'exec'}", "-T", "workers=2", "-T", "timeout_s=30"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        grades_rows = _wait_for_executions(tmp_path / "exec", proc, minimum=4)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        stopped_after = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err[-2000:]
    # the slow half alone is 12 x SLEEP_S / 2 workers of work; stopping took a small part of what was left
    remaining = len(problems) * SLEEP_S / 2 - grades_rows * SLEEP_S / 2
    assert stopped_after < max(remaining / 3, 2 * SLEEP_S), (stopped_after, remaining, err[-2000:])
    grade_files = list(out.rglob("grades/*.jsonl"))
    assert grade_files, f"no grades file under {out}: {sorted(str(p) for p in out.rglob('*'))}"
    kept = [json.loads(line) for f in grade_files for line in f.read_text().splitlines() if line.strip()]
    assert kept, "the grades finished before Ctrl-C were not written"
    keys = {(g["problem_id"], g["sample_idx"]) for g in kept}
    assert len(keys) == len(kept)
    for g in kept:  # every kept grade is a real verdict: all these samples are correct
        assert g["correct"] is True, g
    assert len(kept) < len(rows), "grading was not interrupted (all grades finished before the signal)"
    assert "interrupted" in err


def _wait_for_executions(cache_dir: Path, proc: subprocess.Popen[str], minimum: int) -> int:
    """Wait until the execution cache holds ``minimum`` results (grading is under way); returns how many."""
    import sqlite3

    db = cache_dir / "results.sqlite"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        if db.exists():
            try:
                with sqlite3.connect(str(db), timeout=1.0) as con:
                    n = con.execute("SELECT COUNT(*) FROM results").fetchone()[0]
            except sqlite3.Error:
                n = 0
            if n >= minimum:
                return int(n)
        time.sleep(0.2)
    raise AssertionError("grading never started")
