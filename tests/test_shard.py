"""Sharded runs (``--shard i/n``) and ``bonbench merge``: the slices, sharded + merged == one unsharded
run (metrics, per-problem values, curves, rows), shards in parallel processes, a killed shard, a missing
shard, mixed splits and configs, merging twice, a merge interrupted by a full disk, growing n after a
merge, and the real MATH task."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import toy_plugin

from bonbench.apps.cli import main
from bonbench.core import models, store
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Problem
from bonbench.pipeline import shard
from bonbench.plugins.samplers import select
from bonbench.plugins.samplers.scripted import ScriptedSampler
from bonbench.run import merge as run_merge
from bonbench.run import plan as plan_mod
from bonbench.run.execute import execute
from bonbench.run.merge import merge
from bonbench.run.request import RunRequest

HERE = Path(__file__).parent
# 11 of the toy task's 12 problems: slices of 6/5 (n=2) and 4/4/3 (n=3), and --limit is exercised
RUN = ["run", "--task", "toy", "--backend", "hf", "--metric", "pass@1,4", "--metric", "maj@4", "--metric", "bon@4",
       "--limit", "11"]


def cli(*args: str, delay: float = 0.0) -> list[str]:
    return [sys.executable, str(HERE / "run_toy_cli.py"), str(delay), "--", *args]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(cli(*args), capture_output=True, text=True, timeout=120)


def last_line(proc: subprocess.CompletedProcess) -> Path:
    assert proc.returncode == 0, proc.stderr
    return Path(proc.stdout.strip().splitlines()[-1])


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(err) == 1 and err[0].startswith("error: "), proc.stderr
    return err[0]


def run_shards(out: Path, count: int, *extra: str, only: tuple[int, ...] | None = None) -> Path:
    """Shards ``only`` (default all) of ``count`` as concurrent processes; returns their run directory."""
    procs = [subprocess.Popen(cli(*RUN, *extra, "--shard", f"{i}/{count}", "--out", str(out)), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in (only or range(1, count + 1))]
    dirs = set()
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
        dirs.add(Path(stdout.strip().splitlines()[-1]))
    assert len(dirs) == 1  # the shard is not part of the run id
    return dirs.pop()


def rows(path: Path) -> dict[tuple, dict]:
    """Rows of a JSONL file by key, asserting that no key occurs twice."""
    out: dict[tuple, dict] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        key = (row["problem_id"], row["sample_idx"])
        assert key not in out, f"{key} twice in {path}"
        out[key] = row
    return out


def metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


def assert_same_run(merged: Path, reference: Path) -> None:
    """The merged run holds exactly the unsharded run's rows and metrics (per problem too) and curves."""
    got, want = metrics(merged), metrics(reference)
    assert got["metrics"] == want["metrics"]
    assert got["per_problem"] == want["per_problem"]
    assert got["problem_set"] == want["problem_set"] and got["n"] == want["n"]
    assert json.loads((merged / "curves.json").read_text()) == json.loads((reference / "curves.json").read_text())
    for name in ("samples.jsonl", "grades/exact.jsonl", "scores/logprob.jsonl"):
        assert rows(merged / name) == rows(reference / name), name


@pytest.fixture
def toy_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models, "resolve_model", lambda name: models.ResolvedModel(
        name="toy-model", path="toy-model", is_chat=False, fingerprint="toy", revision=None))
    monkeypatch.setattr(select, "get_sampler", lambda *a, **k: toy_plugin.SlowScripted(0.0))


def _request(out: Path, spec: shard.ShardSpec | None = None, *metrics: str) -> RunRequest:
    """The request ``RUN`` makes (plus ``metrics``), as a library call."""
    return RunRequest(task="toy", metrics=("pass@1,4", "maj@4", "bon@4", *metrics), backend="hf", limit=11,
                      out=out, shard=spec)


def shards_in_process(out: Path, count: int, *metrics: str, only: tuple[int, ...] | None = None) -> Path:
    """Shards ``only`` (default all) of ``count`` through the library, one after the other; their run directory."""
    dirs = {execute(plan_mod.plan(_request(out, shard.ShardSpec(i, count), *metrics))).runs[0].store.run_root
            for i in (only or range(1, count + 1))}
    assert len(dirs) == 1
    return dirs.pop()


def cli_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """``bonbench ARGS`` in this process: exit 1 with one ``error:`` line, which is returned."""
    capsys.readouterr()
    assert main(list(args)) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def cli_ok(capsys: pytest.CaptureFixture[str], *args: str) -> Path:
    """``bonbench ARGS`` in this process: exit 0; the last line printed (the run directory)."""
    capsys.readouterr()
    assert main(list(args)) == 0
    return Path(capsys.readouterr().out.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------ the slices


def test_slices_partition_every_selection_evenly_and_stay_put_as_the_limit_grows() -> None:
    problems = tuple(Problem(id=f"p/{i}", input="", target="") for i in range(40))
    for size in (1, 2, 7, 12, 40):
        selection = problems[:size]  # --limit keeps a prefix
        for count in range(1, size + 1):
            slices = [shard.ShardSpec(i, count).select(selection) for i in range(1, count + 1)]
            ids = [p.id for s in slices for p in s]
            assert sorted(ids) == sorted(p.id for p in selection) and len(ids) == len(set(ids))
            assert max(map(len, slices)) - min(map(len, slices)) <= 1
            # a problem's shard depends on its position alone: a larger limit keeps it where it was
            for i, s in enumerate(slices, 1):
                assert {p.id for p in s} <= {p.id for p in shard.ShardSpec(i, count).select(problems)}
    assert shard.parse_shard(" 3 / 8 ") == shard.ShardSpec(3, 8)


@pytest.mark.parametrize("value, message", [
    ("0/4", "numbered from 1, so i must be in 1..4 (for `sbatch --array=0-3` pass"),
    ("5/4", "i must be in 1..4"),
    ("x", "--shard takes i/n"),
    ("3/0", "n must be at least 1"),
    ("2/12", "only 11 problems are selected; use at most 11 shards"),
])
def test_bad_shard_values_are_one_line_errors(tmp_path: Path, toy_engine: None, value: str, message: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert message in cli_error(capsys, *RUN, "--shard", value, "--out", str(tmp_path))
    assert not any(tmp_path.iterdir())  # nothing written


# --------------------------------------------------------------------- sharded + merged == unsharded


@pytest.mark.parametrize("count", [2, 3])
def test_sharded_and_merged_equals_one_unsharded_run(tmp_path: Path, count: int) -> None:
    reference = last_line(run_cli(*RUN, "--out", str(tmp_path / "ref")))
    run_dir = run_shards(tmp_path / "sharded", count)
    assert run_dir.name == reference.name
    # every shard wrote only under shards/<i>-of-<n>/; the run itself has no file yet
    assert sorted(p.name for p in run_dir.iterdir()) == ["shards"]
    selection = [f"toy/{i}" for i in range(11)]
    for i in range(1, count + 1):
        folder = run_dir / "shards" / f"{i}-of-{count}"
        assert sorted({k[0] for k in rows(folder / "samples.jsonl")}) == sorted(selection[i - 1::count])
        doc = json.loads((folder / "shard-metrics.json").read_text())
        assert doc["shard"]["label"] == f"{i}/{count}" and doc["n_problems"] == len(selection[i - 1::count])
        assert json.loads((folder / "shard.json").read_text())["shard"]["count"] == count
    assert store.find_run_dirs(tmp_path / "sharded") == []  # shards alone are no run

    proc = run_cli("merge", str(run_dir))
    assert last_line(proc) == run_dir
    assert_same_run(run_dir, reference)
    assert metrics(run_dir)["shards"] == {"count": count, "merged": [f"{i}/{count}" for i in range(1, count + 1)],
                                          "missing": [], "partial": False, "n_problems_selected": 11}
    # merge again: nothing appended, the same metrics
    before = {p: p.read_bytes() for p in run_dir.rglob("*.jsonl")}
    again = run_cli("merge", str(run_dir))
    assert last_line(again) == run_dir and "merged rows: nothing new" in again.stderr
    assert {p: p.read_bytes() for p in run_dir.rglob("*.jsonl")} == before
    assert_same_run(run_dir, reference)


def test_growing_n_and_adding_metrics_after_a_merge(tmp_path: Path, toy_engine: None,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = shards_in_process(tmp_path / "sharded", 2)
    cli_ok(capsys, "merge", str(run_dir))
    # a metric added to the merged run, as to any run
    cli_ok(capsys, "score", str(run_dir), "--metric", "maj@2")
    assert "maj@2" in metrics(run_dir)["metrics"]
    # grow n: rerun the shards with n = 8; they sample only indices 4..7 (0..3 are merged)
    shards_in_process(tmp_path / "sharded", 2, "pass@8")
    grown = rows(run_dir / "shards" / "1-of-2" / "samples.jsonl")
    assert sum(1 for _, idx in grown if idx >= 4) == 6 * 4
    # the run's metrics wait for the merge
    assert "holds samples not merged" in cli_error(capsys, "score", str(run_dir))
    cli_ok(capsys, "merge", str(run_dir))
    reference = execute(plan_mod.plan(_request(tmp_path / "ref", None, "pass@8"))).runs[0].store.root
    assert metrics(run_dir)["n"] == 8
    assert_same_run(run_dir, reference)


def test_a_killed_shard_resumes_with_every_key_once(tmp_path: Path) -> None:
    out = tmp_path / "sharded"
    proc = subprocess.Popen(cli(*RUN, "--shard", "2/2", "--out", str(out), delay=0.02), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:  # kill on progress: after 5 rows
        if sum(f.read_bytes().count(b"\n") for f in out.glob("runs/**/shards/2-of-2/samples.jsonl")) >= 5:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.005)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the shard finished before it was killed; the test did not resume"
    run_dir = run_shards(out, 2)
    assert len(rows(run_dir / "shards" / "2-of-2" / "samples.jsonl")) == 5 * 4
    last_line(run_cli("merge", str(run_dir)))
    assert_same_run(run_dir, last_line(run_cli(*RUN, "--out", str(tmp_path / "ref"))))


# --------------------------------------------------------------------------------- what is refused


def test_a_missing_shard_is_an_error_until_it_runs_or_partial_is_asked(tmp_path: Path, toy_engine: None,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    reference = execute(plan_mod.plan(_request(tmp_path / "ref"))).runs[0].store.root
    run_dir = shards_in_process(tmp_path / "sharded", 3, only=(1, 3))
    before = sorted(p.relative_to(run_dir) for p in run_dir.rglob("*"))
    err = cli_error(capsys, "merge", str(run_dir))
    assert "shard 2/3 has 0 of 4 problems sampled: run `bonbench run --task toy" in err
    assert "--limit 11" in err and err.endswith("--shard 2/3` (or pass --partial to score the finished problems)")
    assert sorted(p.relative_to(run_dir) for p in run_dir.rglob("*")) == before  # the failed merge wrote nothing
    assert "has not been merged yet: run `bonbench merge" in cli_error(capsys, "score", str(run_dir))
    assert "not merged yet: run `bonbench merge" in cli_error(capsys, *RUN, "--out", str(tmp_path / "sharded"))
    # --partial scores the finished problems and says so
    cli_ok(capsys, "merge", str(run_dir), "--partial")
    doc = metrics(run_dir)
    assert doc["shards"]["partial"] is True and doc["shards"]["missing"] == ["2/3"] and doc["n_problems"] == 7
    done = {f"toy/{i}" for i in range(11) if i % 3 != 1}
    assert doc["per_problem"]["pass@4"] == {p: v for p, v in metrics(reference)["per_problem"]["pass@4"].items() if p in done}
    # the command the error names runs the missing shard, and the merge is whole
    command = err.split("`")[1].split()
    assert command[:2] == ["bonbench", "run"]
    assert cli_ok(capsys, *command[1:]) == run_dir
    cli_ok(capsys, "merge", str(run_dir))
    assert_same_run(run_dir, reference)
    assert metrics(run_dir)["shards"]["partial"] is False


def test_shards_of_two_splits_or_two_configs_are_refused(tmp_path: Path, toy_engine: None,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    mixed = shards_in_process(tmp_path / "mixed", 2, only=(1,))
    shards_in_process(tmp_path / "mixed", 3, only=(2,))
    assert "holds shards of 2 splits (*-of-2, *-of-3)" in cli_error(capsys, "merge", str(mixed))
    other = shards_in_process(tmp_path / "other", 2, only=(1,))
    shards_in_process(tmp_path / "other", 2, "pass@8", only=(2,))
    err = cli_error(capsys, "merge", str(other))
    assert "shards 1/2 and 2/2 were run with different --n (4 vs 8); rerun the older shards" in err
    assert "run the shards without them" in cli_error(capsys, *RUN, "--metric", "kl", "--ref-model", "toy-model",
                                                       "--shard", "1/2", "--out", str(tmp_path / "kl"))


# ------------------------------------------------------------------------ in-process: disk full, crash


class _FullAfter:
    """A file that takes ``budget`` more bytes, then fails as a full disk does (ENOSPC), mid-line."""

    def __init__(self, fh, budget: int) -> None:
        self.fh, self.budget = fh, budget

    def write(self, text: str) -> int:
        if len(text) > self.budget:
            self.fh.write(text[: self.budget])
            self.fh.flush()
            self.budget = 0
            raise OSError(28, "No space left on device")
        self.budget -= len(text)
        return self.fh.write(text)

    def __getattr__(self, name: str):
        return getattr(self.fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.fh.close()


def test_a_full_disk_during_merge_is_one_line_and_the_rerun_finishes(tmp_path: Path, toy_engine: None,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    reference = execute(plan_mod.plan(_request(tmp_path / "ref"))).runs[0].store.root
    for i in (1, 2):
        run_dir = execute(plan_mod.plan(_request(tmp_path / "sharded", shard.ShardSpec(i, 2)))).runs[0].store.run_root
    shard_files = {p: p.read_bytes() for p in (run_dir / "shards").rglob("*") if p.is_file()}
    target = run_dir / "samples.jsonl"

    def full_open(path, mode="r", *args, **kwargs):
        fh = open(path, mode, *args, **kwargs)
        return _FullAfter(fh, 750) if Path(path) == target and "a" in mode else fh

    monkeypatch.setattr(store, "open", full_open, raising=False)
    assert main(["merge", str(run_dir)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: no space left writing {target}") and "rerun the same command" in err[0]
    monkeypatch.undo()
    # nothing written is lost: the shards are untouched, the run's rows so far are whole rows but a torn last one
    assert {p: p.read_bytes() for p in (run_dir / "shards").rglob("*") if p.is_file()} == shard_files
    partial = target.read_text()
    assert 0 < partial.count("\n") < 44 and not partial.endswith("\n")
    # a crash after the rows are merged but before the run is scored: the rerun scores it
    monkeypatch.setattr(run_merge, "execute", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    assert main(["merge", str(run_dir)]) == 130
    assert not (run_dir / "metrics.json").exists() and len(rows(target)) == 44
    monkeypatch.undo()
    assert main(["merge", str(run_dir)]) == 0
    assert_same_run(run_dir, reference)


def test_a_planned_shard_is_its_slice_and_writes_nothing(tmp_path: Path, toy_engine: None) -> None:
    plan = plan_mod.plan(_request(tmp_path, shard.ShardSpec(2, 3)))
    run = plan.runs[0]
    assert isinstance(run.store, shard.ShardStore) and [p.id for p in run.problems] == ["toy/1", "toy/4", "toy/7", "toy/10"]
    assert not run.store.run_root.exists()  # planning writes nothing
    with pytest.raises(BonbenchError, match="a samples file is scored in one go"):
        plan_mod.plan(replace(_request(tmp_path, shard.ShardSpec(1, 2)), samples=tmp_path / "x.jsonl", backend="scripted"))


# ----------------------------------------------------------------------------- real MATH problems


def test_math_sharded_and_merged_equals_unsharded(data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real MATH test split (first 24 problems, three subjects' worth of ids in order), a scripted
    model that boxes the right answer or a wrong one, graded by the real math grader."""
    from bonbench_tasks.math import math_task

    targets = {p.id: p.target for p in math_task(data_dir=str(data_dir)).problems[:24]}

    def answer(pid: str, idx: int) -> str:
        h = int(hashlib.sha256(f"{pid}:{idx}".encode()).hexdigest(), 16)
        return f"So the answer is $\\boxed{{{targets[pid] if h % 3 else h % 7}}}$."

    monkeypatch.setattr(models, "resolve_model", lambda name: models.ResolvedModel(
        name="scripted-math", path="scripted-math", is_chat=False, fingerprint="scripted", revision=None))
    monkeypatch.setattr(select, "get_sampler", lambda *a, **k: ScriptedSampler(answer))

    def request(out: Path, spec: shard.ShardSpec | None = None) -> RunRequest:
        return RunRequest(task="math", metrics=("pass@1,3", "maj@3"), backend="hf", limit=24, out=out,
                          data_dir=str(data_dir), shard=spec)

    reference = execute(plan_mod.plan(request(tmp_path / "ref"))).runs[0].store.root
    for i in (1, 2, 3):
        execute(plan_mod.plan(request(tmp_path / "sharded", shard.ShardSpec(i, 3))))
    run_dir = tmp_path / "sharded" / reference.relative_to(tmp_path / "ref")
    result = merge(run_dir, data_dir=str(data_dir))
    assert [len(c.complete) for c in result.coverage] == [8, 8, 8]
    got, want = metrics(run_dir), metrics(reference)
    assert got["metrics"] == want["metrics"] and got["per_problem"] == want["per_problem"]
    assert 0 < want["metrics"]["pass@1"]["value"] < 1
    assert rows(run_dir / "grades" / "math.jsonl") == rows(reference / "grades" / "math.jsonl")
