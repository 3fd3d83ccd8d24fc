"""Progress where stderr is not a terminal (issue 29 §7): plain lines per stage with counts, rate and
ETA, at most one per interval plus each stage's first and last; on a terminal the rich bars stay.

The interval is ``$BONBENCH_PROGRESS_INTERVAL`` (10 s by default): the unit tests drive
``ProgressLines`` with a fake clock, the CLI tests run the toy pipeline (tests/run_toy_cli.py) with
its stderr a pipe and a short interval.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bonbench.apps.cli.common import Progress
from bonbench.pipeline.progress import (
    HEARTBEAT_MIN_S,
    INTERVAL_ENV,
    INTERVAL_S,
    ProgressLines,
    duration_text,
    interval_s,
    label,
    rate_text,
)

HERE = Path(__file__).parent
LINE = re.compile(r"^(?P<stage>[a-z ]+): (?P<done>\d+)/(?P<total>\d+) (?P<unit>samples|steps) \((?P<pct>[\d.]+)%\)"
                  r"(?: (?P<rate>[\d.]+/s|[\d.]+ s/\w+) (?:ETA (?P<eta>\w+)|done in (?P<took>\w+))"
                  r"| (?P<elapsed>\w+) elapsed)?$")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_lines_respect_the_interval_and_keep_first_and_last() -> None:
    clock, lines = Clock(), []
    progress = ProgressLines(lines.append, interval=10.0, clock=clock)
    progress("sample", 0, 640)
    for _ in range(64):  # 10 samples every 1.5 s: 96 s in all
        clock.now += 1.5
        progress("sample", 10, 640)
    # nothing at the start (nothing done yet), the first report that did something (at 1.5 s), then
    # one every 10.5 s (the first report 10 s or more after the last line), then the last
    assert lines[0] == "sampling: 10/640 samples (1.6%) 6.7/s ETA 1m34s"
    assert lines[-1] == "sampling: 640/640 samples (100.0%) 6.7/s done in 1m36s"
    assert all(LINE.match(line) for line in lines), lines
    times = [int(LINE.match(line)["done"]) / 10 * 1.5 for line in lines]
    assert all(b - a >= 10.0 for a, b in zip(times, times[1:-1], strict=False)), times
    assert len(lines) == 1 + int((96 - 1.5) // 10.5)  # the first at 1.5 s, the last (96 s) among the 10.5 s steps
    assert lines[1] == "sampling: 80/640 samples (12.5%) 6.7/s ETA 1m24s"


def test_every_report_is_a_line_when_reports_are_further_apart_than_the_interval() -> None:
    clock, lines = Clock(), []
    progress = ProgressLines(lines.append, interval=10.0, clock=clock)
    progress("grade", 0, 512)
    for _ in range(2):
        clock.now += 30.0
        progress("grade", 256, 512)
    assert lines == ["grading: 256/512 samples (50.0%) 8.5/s ETA 30s",
                     "grading: 512/512 samples (100.0%) 8.5/s done in 1m00s"]


def test_stages_are_counted_apart_and_a_finished_stage_starts_again() -> None:
    clock, lines = Clock(), []
    progress = ProgressLines(lines.append, interval=10.0, clock=clock)
    progress("grade", 0, 4)
    progress("verify", 0, 4)
    clock.now = 2.0
    progress("grade", 4, 4)
    progress("verify", 2, 4)  # verify's first rows: its first line
    progress("grade", 0, 3)  # the next run's grading (nothing done yet: no line)
    clock.now = 5.0
    progress("grade", 3, 3)
    progress("verify", 1, 4)  # within the interval of verify's first line: none
    progress("sample", 0, 0)  # nothing to do: no line
    assert lines == ["grading: 4/4 samples (100.0%) 2.0/s done in 2s", "verifying: 2/4 samples (50.0%) 1.0/s ETA 2s",
                     "grading: 3/3 samples (100.0%) 1.0/s done in 3s"]


def test_a_stage_that_fails_before_its_first_rows_prints_no_line() -> None:
    # a failure at the start (a server that never answers, a bad file) stays the one line it prints
    clock, lines = Clock(), []
    progress = ProgressLines(lines.append, interval=10.0, clock=clock)
    progress("sample", 0, 640)
    clock.now = 30.0
    progress("sample", 0, 640)
    assert lines == []


def test_a_stage_silent_for_its_heartbeat_gets_a_line_before_its_first_rows_too() -> None:
    """``tick`` (the CLI's timer calls it): a stage under way that wrote nothing for the heartbeat (the
    interval, at least HEARTBEAT_MIN_S) gets its line, with how long it has run; its first rows are a
    line at once all the same; a finished stage, or one that failed sooner, says nothing more."""
    clock, lines = Clock(), []
    progress = ProgressLines(lines.append, interval=10.0, clock=clock)
    progress("sample", 0, 640)
    for now in (5.0, 9.9):
        clock.now = now
        progress.tick()
    assert lines == []  # within the heartbeat: a failure now would still be the only line
    clock.now = 10.0
    progress.tick()
    clock.now = 15.0
    progress.tick()  # 5 s after the last line: none
    clock.now = 20.5
    progress.tick()
    clock.now = 21.0
    progress("sample", 64, 640)  # the first chunk: at once, though the last line is 0.5 s old
    clock.now = 25.0
    progress("sample", 64, 640)  # within the interval: none
    clock.now = 31.0
    progress.tick()  # rows 10 s ago, none since: the line says so with the rate now
    clock.now = 40.0
    progress("sample", 512, 640)
    clock.now = 51.0
    progress.tick()
    assert lines == ["sampling: 0/640 samples (0.0%) 10s elapsed", "sampling: 0/640 samples (0.0%) 20s elapsed",
                     "sampling: 64/640 samples (10.0%) 3.0/s ETA 3m09s", "sampling: 128/640 samples (20.0%) 4.1/s ETA 2m04s",
                     "sampling: 640/640 samples (100.0%) 16.0/s done in 40s"]
    assert all(LINE.match(line) for line in lines), lines
    fast = ProgressLines(lines.append, interval=0.01, clock=clock)
    assert fast.heartbeat_s() == HEARTBEAT_MIN_S  # a tiny interval (the tests') does not make ticks a stream


def test_slow_work_reads_as_seconds_per_unit_and_resumed_work_is_not_in_the_rate() -> None:
    clock, lines = Clock(), []
    progress = ProgressLines(lines.append, interval=10.0, clock=clock)
    progress.begin("training", 40)  # 40 steps trained before this process started
    clock.now = 90.0
    progress.update("training", 43, 200, unit="steps", extra="reward 0.312")
    assert lines == ["training: 43/200 steps (21.5%) 30.0 s/step ETA 1h18m  reward 0.312"]


def test_the_words_of_a_line() -> None:
    assert [duration_text(s) for s in (0, 45.4, 163, 3599, 3900)] == ["0s", "45s", "2m43s", "59m59s", "1h05m"]
    assert rate_text(3.21, "samples") == "3.2/s" and rate_text(0.25, "steps") == "4.0 s/step"
    assert [label(s) for s in ("sample", "grade", "verify", "verify rm:x", "kl policy", "features")] == [
        "sampling", "grading", "verifying", "verifying rm:x", "kl policy", "features"]


def test_interval_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(INTERVAL_ENV, raising=False)
    assert interval_s() == INTERVAL_S == 10.0
    monkeypatch.setenv(INTERVAL_ENV, "0.5")
    assert interval_s() == 0.5 and ProgressLines(print).interval == 0.5
    for bad in ("soon", "0", "-1"):
        monkeypatch.setenv(INTERVAL_ENV, bad)
        assert interval_s() == INTERVAL_S


def test_the_cli_progress_draws_bars_on_a_terminal_and_lines_elsewhere(monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    with Progress() as plain:  # pytest's captured stderr is not a terminal
        plain("sample", 0, 2)
        plain("sample", 2, 2)
    assert plain.lines is not None and plain.progress is None
    (last,) = capsys.readouterr().err.splitlines()
    assert last.startswith("sampling: 2/2 samples (100.0%) ")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    with Progress() as bars:
        bars("grade", 0, 2)
        bars("grade", 2, 2)
    assert bars.lines is None and bars.progress is not None
    assert bars.progress.tasks[0].description == "grading" and bars.progress.tasks[0].completed == 2


def _toy(tmp_path: Path, delay: float, interval: str, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(HERE / "run_toy_cli.py"), str(delay), "--", "run", "--task", "toy", "--backend", "hf",
           "--out", str(tmp_path / "results"), *args]
    env = dict(os.environ, **{INTERVAL_ENV: interval})
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


def _stage_lines(stderr: str, stage: str) -> list[re.Match[str]]:
    found = [LINE.match(line) for line in stderr.splitlines() if line.startswith(f"{stage}: ")]
    assert found and all(found), stderr
    return [m for m in found if m is not None]


def test_not_a_terminal_sampling_grading_and_verifying_print_counts_rate_and_eta(tmp_path: Path) -> None:
    """Every report is a line (a tiny interval): each stage shows its chunks with a rate and an ETA,
    and its end; no bar is drawn (and no line before a stage has done anything)."""
    res = _toy(tmp_path, 0.0, "0.000001", "-T", "size=80", "--n", "8", "--metric", "pass@1", "--metric", "bon@8",
               "--verifier", "oracle")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "\r" not in res.stderr and "━" not in res.stderr and "\x1b" not in res.stderr
    for stage in ("sampling", "grading", "verifying"):
        lines = _stage_lines(res.stderr, stage)
        assert lines[0]["done"] != "0" and lines[0]["rate"] is not None, lines[0].string
        assert [m["total"] for m in lines] == ["640"] * len(lines)
        assert lines[-1]["done"] == "640" and lines[-1]["took"] is not None, lines[-1].string
        middle = lines[:-1]
        assert middle and all(m["rate"] and m["eta"] for m in middle), [m.string for m in lines]
        assert [int(m["done"]) for m in lines] == sorted(int(m["done"]) for m in lines)
    assert [int(m["done"]) for m in _stage_lines(res.stderr, "grading")] == [256, 512, 640]  # one per chunk


def test_not_a_terminal_sampling_lines_come_at_most_once_per_interval(tmp_path: Path) -> None:
    start = time.monotonic()
    res = _toy(tmp_path, 0.02, "0.5", "--n", "16", "--metric", "pass@1")  # 12 x 16 samples, 20 ms each: ~4 s
    took = time.monotonic() - start
    assert res.returncode == 0, res.stderr[-3000:]
    lines = _stage_lines(res.stderr, "sampling")
    assert lines[0]["done"] != "0" and lines[-1]["done"] == lines[-1]["total"] == "192"
    assert len(lines) >= 4, [m.string for m in lines]  # periodic lines between the first and the last
    assert len(lines) <= 2 + took / 0.5, ([m.string for m in lines], took)


def test_not_a_terminal_a_slow_first_chunk_shows_its_stage_before_it_ends(tmp_path: Path) -> None:
    """A sampler whose chunk takes longer than the heartbeat (the hf backend's 64 long samples): the
    CLI's timer writes the stage's line while the chunk is still running, then the chunk's own."""
    res = _toy(tmp_path, 2.5, "0.5", "-T", "size=2", "--n", "1", "--metric", "pass@1")  # 2 samples, 2.5 s each
    assert res.returncode == 0, res.stderr[-3000:]
    lines = _stage_lines(res.stderr, "sampling")
    assert lines[0]["done"] == "0" and lines[0]["elapsed"] in ("1s", "2s"), [m.string for m in lines]
    assert lines[-1]["done"] == "2" and lines[-1]["took"] is not None
    assert any(m["done"] == "1" for m in lines)
