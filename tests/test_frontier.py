"""The reward-vs-KL plane and best-of-N references: Pareto front against brute force, plane
grouping by KL reference, and the report sections on a real (imported, offline-rewarded) IMDB run."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from typing import Any

import pytest

from bonbench.apps.analysis.frontier import PlanePoint, bon_curves, bon_reference_rows, pareto_front, plane_points
from bonbench.apps.analysis.plots_policy import plot_reward_kl
from bonbench.apps.analysis.rundir import Curve, Metric, RunData, load_run
from bonbench.apps.cli import main
from bonbench.metrics.estimators import pass_curve


def _point(i: int, kl: float, reward: float) -> PlanePoint:
    return PlanePoint(f"p{i}", "run", None, kl, (kl, kl), reward, (reward, reward))


def test_pareto_front_equals_brute_force_with_ties() -> None:
    rng = random.Random(3)
    for _ in range(300):
        pts = [_point(i, rng.randint(0, 5) / 2, rng.randint(0, 5) / 4) for i in range(rng.randint(1, 9))]
        front = pareto_front(pts)

        def dominated(p: PlanePoint, pts: list[PlanePoint] = pts) -> bool:
            return any(q.kl <= p.kl and q.reward >= p.reward and (q.kl < p.kl or q.reward > p.reward) for q in pts)

        undominated = {(p.kl, p.reward) for p in pts if not dominated(p)}
        assert {(p.kl, p.reward) for p in front} == undominated
        assert len(front) == len(undominated)  # exact duplicates appear once
        assert [p.kl for p in front] == sorted(p.kl for p in front)
        assert [p.reward for p in front] == sorted(p.reward for p in front)


def _run(h: str, model: str, temperature: float, metrics: dict[str, tuple[float, dict[str, Any]]]) -> RunData:
    return RunData(path=Path(h), config={"task": "imdb", "model": model, "temperature": temperature, "top_p": 1.0, "n": 8},
                   hash=h, metrics={name: Metric(v, (v - 0.01, v + 0.01), 10, notes) for name, (v, notes) in metrics.items()},
                   per_problem={}, curves={})


def test_plane_points_group_by_reference_policy() -> None:
    base = _run("b", "m", 1.0, {"mean": (0.5, {}), "max@4": (0.8, {}), "kl_bon@4": (0.6, {"reference": "m"})})
    cold = _run("c", "m", 0.7, {"mean": (0.55, {}), "kl": (0.3, {"reference": "m"}), "max@4": (0.75, {}),
                                "kl_bon@4": (0.7, {"reference": "m"}), "winrate@4": (0.7, {"against": "run b"})})
    alone = _run("a", "m", 0.7, {"mean": (0.55, {}), "max@2": (0.6, {}), "kl_bon@2": (0.2, {"reference": "m (T=0.7, top_p=1)"})})
    math_run = _run("x", "m", 1.0, {"pass@1": (0.1, {}), "mean": (0.1, {})})
    planes = plane_points([base, cold, alone, math_run])
    assert set(planes) == {("imdb", "m"), ("imdb", "m (T=0.7, top_p=1)")}
    on_m = {(p.run, p.k): (p.kl, p.reward) for p in planes[("imdb", "m")]}
    assert on_m == {("b", None): (0.0, 0.5), ("b", 4): (0.6, 0.8), ("c", None): (0.3, 0.55), ("c", 4): (0.7, 0.75)}
    assert [(p.run, p.k) for p in pareto_front(planes[("imdb", "m")])] == [("b", None), ("c", None), ("b", 4)]
    alone_pts = planes[("imdb", "m (T=0.7, top_p=1)")]
    assert [(p.k, p.kl) for p in alone_pts] == [(None, 0.0), (2, 0.2)]  # its own policy: KL 0
    rows = bon_reference_rows(cold)
    assert [(r.k, r.winrate_analytic, r.against) for r in rows] == [(4, 0.8, "run b")]
    assert rows[0].kl_bon is not None and rows[0].kl_analytic == pytest.approx(0.636294361, abs=1e-9)


def test_checkpoint_points_carry_their_method_and_the_plot_draws_one_curve_per_method(tmp_path: Path) -> None:
    base = _run("b", "m", 1.0, {"mean": (0.5, {}), "max@4": (0.8, {}), "kl_bon@4": (0.6, {"reference": "m"})})
    runs = [base]
    for h, objective, kl, reward in (("v2", "vbon", 0.4, 0.6), ("v8", "vbon", 2.0, 0.8), ("k1", "kl_rl", 1.0, 0.55)):
        r = _run(h, f"/ck/imdb-{h}", 1.0, {"mean": (reward, {}), "kl": (kl, {"reference": "m"})})
        runs.append(dataclasses.replace(r, training={"name": f"imdb-{h}", "objective": objective}))
    points = plane_points(runs)[("imdb", "m")]
    assert {(p.run, p.k): p.method for p in points} == {("b", None): "", ("b", 4): "", ("v2", None): "vbon",
                                                        ("v8", None): "vbon", ("k1", None): "kl_rl"}
    out = plot_reward_kl(points, pareto_front(points), tmp_path / "plane.png", reference="m")
    assert out.stat().st_size > 0


def test_runs_written_before_model_training_was_recorded_read_the_checkpoint_manifest(tmp_path: Path) -> None:
    ck = tmp_path / "imdb-vbon8"
    ck.mkdir()
    (ck / "bonbench_manifest.json").write_text(json.dumps({
        "name": "imdb-vbon8", "objective": "vbon", "config": {"objective_options": {"N": 8}}, "training_hash": "abc",
        "base": {"name": "gemma-3-270m", "is_chat": False}, "weights_sha256": "0" * 64}))
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"hash": "h", "config": {"task": "imdb", "model": str(ck)}}))
    (run / "metrics.json").write_text(json.dumps({"metrics": {}}))
    assert load_run(run).training == {"name": "imdb-vbon8", "objective": "vbon", "objective_options": {"N": 8},
                                      "training_hash": "abc", "base": "gemma-3-270m"}
    (ck / "bonbench_manifest.json").unlink()  # the checkpoint moved: no method, no error
    assert load_run(run).training is None
    (run / "config.json").write_text(json.dumps({"hash": "h", "config": {"task": "imdb", "model": str(ck)},
                                                 "model_training": {"objective": "kl_rl"}}))
    assert load_run(run).training == {"objective": "kl_rl"}  # what the run recorded wins


def test_bon_curve_is_the_references_own_max_curve_at_the_analytic_kl() -> None:
    """The plane's best-of-N curve comes from the reference's own run with the most samples; KL at N
    is log N - (N-1)/N and the reward is that run's exact max@N (checked against brute force over
    every N-subset of a small reward table)."""
    import itertools
    import math

    import numpy as np

    rng = np.random.default_rng(0)
    rewards = rng.random((5, 6))
    brute = [np.mean([np.mean([max(rewards[i, list(s)]) for s in itertools.combinations(range(6), k)])
                      for i in range(5)]) for k in range(1, 7)]
    ks = np.arange(1, 7)
    value = pass_curve(rewards, ks).mean(axis=0)  # per problem; on real rewards pass@k is max@k

    def with_curve(run: RunData, n: int) -> RunData:
        c = Curve(ks[:n], value[:n], value[:n] - 0.01, value[:n] + 0.01)
        return RunData(path=run.path, config=run.config, hash=run.hash, metrics=run.metrics, per_problem={}, curves={"max": c})

    small = with_curve(_run("s", "m", 1.0, {"mean": (0.5, {})}), 3)
    big = with_curve(_run("b", "m", 1.0, {"mean": (0.5, {})}), 6)
    trained = with_curve(_run("t", "ckpt", 1.0, {"mean": (0.7, {}), "kl": (2.0, {"reference": "m"})}), 6)
    curves = bon_curves([small, trained, big])
    assert set(curves) == {("imdb", "m")}  # a checkpoint measured against m is not m's best-of-N
    c = curves[("imdb", "m")]
    assert c.run == "b" and c.n.tolist() == list(range(1, 7))
    assert np.allclose(c.reward, brute, atol=1e-12)
    assert np.allclose(c.kl, [math.log(k) - (k - 1) / k for k in range(1, 7)], atol=1e-12)


def test_report_has_the_plane_and_the_references_for_an_imdb_run(tmp_path: Path, data_dir: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from bonbench.api.task import get_task

    problems = get_task("imdb", data_dir=str(data_dir), n_prompts=6).problems
    texts = [" is wonderful, I loved it.", " is awful and boring.", " was fine, I guess.", " is a moving masterpiece.",
             " made me want to leave.", " had good acting."]
    rows = [{"problem_id": p.id, "sample_idx": i, "completion": texts[(i + j) % len(texts)]}
            for j, p in enumerate(problems) for i in range(4)]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["score", "--task", "imdb", "--samples", str(path), "--metric", "mean,max@2,max@4", "--data-dir", str(data_dir),
                 "--out", str(tmp_path / "results")]) == 0
    run_dir = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert main(["score", str(run_dir), "--metric", "max@2,max@4,winrate@2,winrate@4", "--ref-run", str(run_dir),
                 "--data-dir", str(data_dir)]) == 0
    capsys.readouterr()
    assert main(["plot", str(run_dir), "--out", str(tmp_path / "report")]) == 0
    html = (tmp_path / "report" / "report.html").read_text()
    assert "Reward vs KL: imdb" in html and "Best-of-N against the analytic references" in html
    doc = json.loads((tmp_path / "report" / "report.json").read_text())
    metrics = json.loads((run_dir / "metrics.json").read_text())["metrics"]
    (plane,) = doc["planes"]
    got = {p["k"]: (p["kl"], p["reward"]) for p in plane["points"]}
    assert got == {None: (0.0, pytest.approx(metrics["mean"]["value"])),
                   2: (pytest.approx(metrics["kl_bon@2"]["value"]), pytest.approx(metrics["max@2"]["value"])),
                   4: (pytest.approx(metrics["kl_bon@4"]["value"]), pytest.approx(metrics["max@4"]["value"]))}
    # distinct rewards in every problem: kl_bon@k to the run's own policy is one closed form of n and k,
    # stored without an interval and marked so (never gated, shown without a CI)
    per = json.loads((run_dir / "metrics.json").read_text())["per_problem"]["kl_bon@4"]
    assert len({round(v, 12) for v in per.values()}) == 1
    assert metrics["kl_bon@4"]["closed_form"] is True and metrics["kl_bon@4"]["ci95"] == [None, None]
    assert "— (closed form)" in html
    refs = {r["k"]: r for r in doc["runs"][0]["bon_references"]}
    assert set(refs) == {2, 4} and refs[4]["winrate_analytic"] == 0.8
    assert refs[2]["winrate"]["value"] == pytest.approx(metrics["winrate@2"]["value"])
    assert len(list((tmp_path / "report").glob("plane00_imdb.png"))) == 1
