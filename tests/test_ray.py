"""``--ray`` on a real local Ray cluster that the tests start: a head and one worker node on 127.0.0.1.

The cluster is this module's own (``ray start --block`` in new process groups, its own temp dir and
port); the tests stop it by killing those process groups, never with a global ``ray stop``. The
fault test kills the worker node's processes while its sampling actor has work in flight, and checks
that the run ends with the same keys, no duplicate rows and the same metrics as a one-machine run.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bonbench.api.sampler import SampleRequest
from bonbench.api.task import GraderOptions, get_task
from bonbench.core import ray_cluster
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Prompt, Sample
from bonbench.pipeline import stages as pipeline
from bonbench.pipeline.prepared import PreparedRun
from bonbench.plugins.graders.ray_sandbox import RaySandbox
from bonbench.plugins.samplers.ray_backend import RaySampler, units
from bonbench.plugins.samplers.scripted import ScriptedSampler
from bonbench.run.plan import plan
from bonbench.run.request import RunRequest
from bonbench_sandbox.result_cache import ResultCache

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
import ray_helpers  # noqa: E402  (also importable on the cluster's workers: their PYTHONPATH has tests/)
from ray_helpers import LocalCluster, free_port, node_env  # noqa: E402  (tests/ joins sys.path just above)


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[LocalCluster, Any]]:
    import ray

    c = LocalCluster()
    try:
        c.start()
        ray_cluster.connect(ray_cluster.RayOptions(address=c.address))
        c.wait_nodes(ray, 2)
        yield c, ray
    finally:
        ray_cluster.shutdown()
        c.stop()


def _worker_node_id(ray: Any) -> str:
    return next(n["NodeID"] for n in ray_cluster.alive_nodes(ray) if n["Resources"].get("worker"))


# ------------------------------------------------------------------------------- no cluster


def test_units_cover_every_key_once_in_order() -> None:
    reqs = [SampleRequest(Prompt("a", "x"), (0, 1, 2, 3, 4)), SampleRequest(Prompt("b", "y"), (1, 3))]
    got = units(reqs, 3)
    assert [sum(len(r.sample_indices) for r in u) for u in got] == [3, 2, 2]  # b does not fit beside a's rest
    assert [(r.problem_id, i) for u in got for r in u for i in r.sample_indices] == \
        [("a", 0), ("a", 1), ("a", 2), ("a", 3), ("a", 4), ("b", 1), ("b", 3)]


def test_ray_options_are_checked() -> None:
    assert ray_cluster.ray_options(None) is None
    assert ray_cluster.ray_options("local") == ray_cluster.RayOptions()
    with pytest.raises(BonbenchError, match="--ray-workers needs --ray"):
        ray_cluster.ray_options(None, 2)
    with pytest.raises(BonbenchError, match="not HOST:PORT"):
        ray_cluster.ray_options("somewhere")
    with pytest.raises(BonbenchError, match="at least 1"):
        ray_cluster.ray_options("auto", 0)


def test_unreachable_address_is_one_line_error_and_writes_nothing(tmp_path: Path, data_dir: Path) -> None:
    port = free_port()  # nothing listens there once the probe socket is closed
    out = tmp_path / "results"
    cmd = [sys.executable, "-m", "bonbench.apps.cli", "run", "--task", "math", "--limit", "1", "--backend", "hf",
           "--metric", "pass@1", "--ray", f"127.0.0.1:{port}", "--out", str(out), "--data-dir", str(data_dir)]
    res = subprocess.run(cmd, env=node_env(), capture_output=True, text=True, timeout=300)
    assert res.returncode == 1, res.stderr
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert lines == [f"error: no Ray cluster answers at 127.0.0.1:{port}: start one with `ray start --head` or drop --ray"]
    assert not out.exists() or not any(out.rglob("*.json*"))


@pytest.mark.slow  # ~35 s here: two CLI processes, one of which starts a local Ray
def test_score_with_local_ray_equals_score_without(tmp_path: Path, data_dir: Path) -> None:
    """`bonbench score --samples F --ray`: a local Ray (started by the command), code tests as its tasks."""
    task = get_task("humaneval", data_dir=str(data_dir))
    script = ray_helpers.humaneval_script(task.problems[:2])
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps({"task_id": pid, "completion": texts[i % 2]}) + "\n"  # right, wrong, right
                            for pid, texts in script.items() for i in range(3)))
    docs = []
    for flags in ([], ["--ray"]):
        out = tmp_path / ("ray" if flags else "pool")
        cmd = [sys.executable, "-m", "bonbench.apps.cli", "score", "--task", "humaneval", "--samples", str(path), "--metric",
               "pass@1,2", "--n-boot", "100", "--out", str(out), "--data-dir", str(data_dir), *flags]
        res = subprocess.run(cmd, env=node_env(), capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stderr[-3000:]
        run_dir = Path(res.stdout.strip().splitlines()[-1])
        docs.append((json.loads((run_dir / "metrics.json").read_text()), json.loads((run_dir / "config.json").read_text())))
    (pool, pool_cfg), (on_ray, ray_cfg) = docs
    assert {k: v["value"] for k, v in on_ray["metrics"].items()} == {k: v["value"] for k, v in pool["metrics"].items()}
    assert on_ray["metrics"]["pass@1"]["value"] == pytest.approx(2 / 3)
    assert ray_cfg["ray"] == {"address": "local", "workers": None} and "ray" not in pool_cfg
    assert ray_cfg["hash"] == pool_cfg["hash"]  # where it ran is not part of the run id


# ------------------------------------------------------------------------------- on the cluster


def test_code_tests_as_ray_tasks_give_the_local_pool_verdicts(cluster: tuple[LocalCluster, Any], data_dir: Path,
                                                              tmp_path: Path) -> None:
    c, ray = cluster
    task = get_task("humaneval", data_dir=str(data_dir), timeout_s=2.0)
    problems = {p.id: p for p in task.problems[:3]}
    script = ray_helpers.humaneval_script(problems.values())
    samples = [Sample(pid, i, texts[i], 1, "stop") for pid, texts in script.items() for i in range(3)]
    local = task.grader.with_options(GraderOptions(exec_cache=tmp_path / "local"))
    remote = task.grader.with_options(GraderOptions(exec_cache=tmp_path / "ray", executor=RaySandbox(
        ray_cluster.RayOptions(address=c.address), groups_per_task=1)))
    want = {g.key: (g.correct, g.detail) for g in local.grade(problems, samples)}
    got = {g.key: (g.correct, g.detail) for g in remote.grade(problems, samples)}
    assert got == want
    statuses = {d["status"] for _, d in want.values()}
    assert {"ok", "timeout"} <= statuses and len(statuses) == 3  # right, wrong and hanging programs all seen
    # the driver stored what the tasks returned: grading again executes nothing
    before = remote._cache.misses
    again = {g.key: (g.correct, g.detail) for g in remote.grade(problems, samples)}
    assert again == want and remote._cache.misses == before


def test_worker_node_killed_mid_run_same_keys_and_metrics(cluster: tuple[LocalCluster, Any], data_dir: Path,
                                                         tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    c, ray = cluster
    req = dict(task="math", backend="hf", limit=6, n=4, metrics=("pass@1,4", "maj@4"), data_dir=str(data_dir), n_boot=200)
    on_ray = plan(RunRequest(**req, out=tmp_path / "ray")).runs[0]
    alone = plan(RunRequest(**req, out=tmp_path / "alone")).runs[0]
    script = ray_helpers.math_script(on_ray.problems)
    spec = ray_helpers.SlowSpec("scripted", models_resolved(on_ray), seed=0, script=script, delay=0.25)
    sampler = RaySampler(spec, ray_cluster.RayOptions(address=c.address), unit_samples=2)
    worker = _worker_node_id(ray)
    stored = []

    def kill_after_two(stage: str, advance: int, total: int) -> None:
        stored.append(advance)
        if len(stored) == 2:  # both actors are busy, 10 of 12 units still to go
            c.kill("worker")

    try:
        assert pipeline.sample(on_ray, sampler, kill_after_two) == 24
    finally:
        sampler.close()
    lost = [sampler.actor_nodes[i] for i in sampler.lost]
    assert lost == [worker], "the worker node's actor is the one lost"
    assert "was lost" in capsys.readouterr().err
    rows = [json.loads(line) for line in on_ray.store.samples.path.read_text().splitlines() if line.strip()]
    keys = [(r["problem_id"], r["sample_idx"]) for r in rows]
    assert len(keys) == len(set(keys)) == 24
    assert set(keys) == {(p.id, i) for p in on_ray.problems for i in range(4)}

    pipeline.sample(alone, ScriptedSampler(script))
    docs = [pipeline.evaluate(r, plan(RunRequest(**req, out=tmp_path / "x")).specs, None, n_boot=200) for r in (on_ray, alone)]
    assert {k: v["value"] for k, v in docs[0]["metrics"].items()} == {k: v["value"] for k, v in docs[1]["metrics"].items()}
    assert docs[0]["metrics"]["pass@4"]["value"] == 1.0 and docs[0]["metrics"]["pass@1"]["value"] == 0.75


def models_resolved(run: PreparedRun) -> Any:
    from bonbench.core import models

    return models.ResolvedModel(name=run.cfg.model, path="", is_chat=False, fingerprint=run.cfg.model_fingerprint)


SLEEP_S = 3.0


def test_ctrl_c_under_ray_keeps_every_finished_grade_and_a_rerun_completes(cluster: tuple[LocalCluster, Any],
                                                                            data_dir: Path, tmp_path: Path) -> None:
    """`bonbench score --ray ADDRESS` gets SIGINT once a Ray task has returned and others still run:
    exit 130, and the grades on disk are exactly those of the samples whose executions came back
    (the driver stores each returned execution in the cache, so the cache says which finished);
    the same command again grades the rest."""
    c, ray = cluster
    task = get_task("humaneval", data_dir=str(data_dir), timeout_s=30.0)  # -T timeout_s=30 below: the same job keys
    problems = task.problems[:8]
    rows = []
    for p in problems:  # a correct sample, then one that sleeps before answering correctly
        rows.append({"task_id": p.id, "completion": p.meta["canonical_solution"]})
        slow = f"    import time\n    time.sleep({SLEEP_S})\n" + p.meta["canonical_solution"]
        rows.append({"task_id": p.id, "completion": slow})
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out, cache = tmp_path / "results", tmp_path / "exec"
    cmd = [sys.executable, "-m", "bonbench.apps.cli", "score", "--samples", str(samples), "--task", "humaneval",
           "--data-dir", str(data_dir), "--limit", str(len(problems)), "--out", str(out), "--metric", "pass@1",
           "-T", f"exec_cache={cache}", "-T", "timeout_s=30", "--ray", c.address]
    proc = subprocess.Popen(cmd, env=node_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while _cached(cache) == 0:  # the first Ray task has returned
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no Ray task returned"
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err[-3000:]
    graded = {(g["problem_id"], g["sample_idx"]): g for g in _grades(out)}
    assert graded and all(g["correct"] is True for g in graded.values()), graded
    grader = task.grader.with_options(GraderOptions(exec_cache=cache))
    by_id = {p.id: p for p in problems}
    finished = set()
    with ResultCache(cache / "results.sqlite") as results:
        for i, r in enumerate(rows):
            cases = grader.build_jobs(by_id[r["task_id"]], r["completion"])
            if all(results.get(grader.job_for(case)[0].key()) is not None for case in cases):
                finished.add((r["task_id"], i % 2))
    assert set(graded) == finished, (sorted(graded), sorted(finished))
    assert len(graded) < len(rows), "grading was not interrupted"
    again = subprocess.run(cmd, env=node_env(), capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    kept = _grades(out)
    assert len(kept) == len(rows) and {(g["problem_id"], g["sample_idx"]) for g in kept} == {
        (r["task_id"], i % 2) for i, r in enumerate(rows)}  # the rest added, none graded twice
    run_dir = Path(again.stdout.strip().splitlines()[-1])
    assert json.loads((run_dir / "metrics.json").read_text())["metrics"]["pass@1"]["value"] == 1.0


def _cached(cache: Path) -> int:
    import sqlite3

    try:
        with contextlib.closing(sqlite3.connect(str(cache / "results.sqlite"), timeout=1.0)) as con:
            return int(con.execute("SELECT COUNT(*) FROM results").fetchone()[0])
    except sqlite3.Error:
        return 0


def _grades(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for f in out.rglob("grades/*.jsonl") for line in f.read_text().splitlines() if line.strip()]
