"""Ctrl-C at any moment stops the sandbox pool, on a loaded machine too (issue 29 §7).

The race: a KeyboardInterrupt raised at an arbitrary bytecode of the main thread could land inside
``concurrent.futures.wait`` (which takes each future's lock in a Python loop) or inside
``threading.Condition.__enter__`` after its lock was taken, leaving that lock held; the worker
finishing that future then blocked forever and joining the pool never returned (``bonbench score``
took more than 60 s to exit in one loaded test run). ``bonbench_sandbox.pool.SigintGate`` turns
SIGINT into a flag the pool reads where it holds no lock.

The first test hammers the pool itself (fake executions of a millisecond, so thousands of futures
come and go) with SIGINT at random moments, beside busy-loop processes; before the gate, about one
trial in a hundred hung. The second interrupts real ``bonbench score`` runs at random moments under
the same load and asks each to exit within seconds.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bonbench.api.task import get_task
from bonbench_sandbox.pool import SigintGate

TRIALS = 60
HANG_S = 10.0  # a trial that has not ended by then is hung (it takes ~0.1 s)

# one child process runs every trial; faulthandler ends it (and prints every thread) on a hang
_TRIALS = r"""
import faulthandler, os, random, signal, sys, threading, time
import bonbench_sandbox.pool as pool
from bonbench_sandbox.supervise import Cancelled, ExecResult

def fake_execute(program, *, cancel=None, **kw):  # a millisecond of "execution" that honours cancel
    end = time.monotonic() + float(program)
    while time.monotonic() < end:
        if cancel is not None and cancel.is_set():
            raise Cancelled("cancelled")
        time.sleep(0.0002)
    return ExecResult("ok", 0, "", "", 0.0)

pool.execute = fake_execute
rng = random.Random(int(sys.argv[2]))
interrupted = 0
for trial in range(int(sys.argv[1])):
    groups = [[pool.Job(program=str(rng.uniform(0.0002, 0.002)), stdin=str(i), unsafe=True)] for i in range(1500)]
    timer = threading.Timer(rng.uniform(0.0, 0.15), os.kill, (os.getpid(), signal.SIGINT))
    faulthandler.dump_traceback_later(float(sys.argv[3]), exit=True)
    try:
        timer.start()
        pool.run_many_tests(groups, workers=16)
        timer.join()
    except pool.Interrupted as exc:
        interrupted += 1
        assert all(len(r) == 1 for r in exc.done.values()), "finished groups keep their results"
    except KeyboardInterrupt:
        pass  # the signal came after the pool returned
    timer.join()
    faulthandler.cancel_dump_traceback_later()
print("trials", sys.argv[1], "interrupted", interrupted)
"""


@pytest.fixture
def loaded() -> Iterator[int]:
    """Busy-loop processes, two per CPU, for the length of the test (each killed by its pid)."""
    n = 2 * (os.cpu_count() or 1)
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield n
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_sigint_at_random_moments_never_hangs_the_pool(loaded: int) -> None:
    res = subprocess.run([sys.executable, "-c", _TRIALS, str(TRIALS), "29", str(HANG_S)], capture_output=True,
                         text=True, timeout=TRIALS * HANG_S)
    assert res.returncode == 0, f"a trial hung; every thread's stack:\n{res.stderr[-6000:]}"
    words = res.stdout.split()
    assert words[:2] == ["trials", str(TRIALS)]
    assert int(words[3]) >= TRIALS // 2, res.stdout  # most signals landed while the pool ran


def test_gate_defers_sigint_to_check_and_never_loses_it() -> None:
    with SigintGate() as gate:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # no KeyboardInterrupt here: the handler only sets the flag
        with pytest.raises(KeyboardInterrupt):
            gate.check()
        gate.check()  # seen once, raised once
    with pytest.raises(KeyboardInterrupt):  # a Ctrl-C that no check saw is raised on leaving
        with SigintGate():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is back
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1.0)


SLEEP_S = 3.0


@pytest.mark.slow
def test_bonbench_score_exits_within_seconds_of_ctrl_c_under_load(data_dir: Path, tmp_path: Path, loaded: int) -> None:
    """Real ``bonbench score`` runs, interrupted at random moments of their grading with every CPU
    busy: each exits with 130 within seconds and keeps only real verdicts."""
    task = get_task("humaneval", data_dir=str(data_dir))
    problems = task.problems[:8]
    rows = []
    for p in problems:  # per problem: a correct sample, then one that sleeps before answering
        rows.append({"task_id": p.id, "completion": p.meta["canonical_solution"]})
        slow = f"    import time\n    time.sleep({SLEEP_S})\n" + p.meta["canonical_solution"]
        rows.append({"task_id": p.id, "completion": slow})
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rng = random.Random(7)
    stops = []
    for trial in range(5):
        out, cache = tmp_path / f"out{trial}", tmp_path / f"exec{trial}"
        cmd = [sys.executable, "-m", "bonbench.apps.cli", "score", "--samples", str(samples), "--task", "humaneval",
               "--data-dir", str(data_dir), "--limit", str(len(problems)), "--out", str(out), "--metric", "pass@1",
               "-T", f"exec_cache={cache}", "-T", "workers=4", "-T", "timeout_s=30"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, PYTHONUNBUFFERED="1"))
        try:
            _wait_for_grading(cache, proc)
            time.sleep(rng.uniform(0.0, 2 * SLEEP_S))  # a random moment of the grading
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
            stops.append(time.monotonic() - sent)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode in (0, 130), err[-2000:]  # 0: the run had finished before the signal
        kept = [json.loads(line) for f in out.rglob("grades/*.jsonl") for line in f.read_text().splitlines() if line]
        assert all(g["correct"] is True for g in kept), kept  # every sample is correct: nothing half-graded
    assert max(stops) < 15.0, stops  # the hang this guards against lasted more than 60 s


def _wait_for_grading(cache_dir: Path, proc: subprocess.Popen[str]) -> None:
    """Wait until the execution cache file exists (the first execution finished)."""
    deadline = time.monotonic() + 180
    while not (cache_dir / "results.sqlite").exists():
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "grading never started"
        time.sleep(0.05)
