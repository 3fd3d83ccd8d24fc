"""Adaptive runs (issue 35, point 3): ``bonbench run --adaptive pilot=P,budget=B --n CAP`` and
``pilot=P,halfwidth=H`` on the real MATH test problems with a scripted model (``adaptive_model``:
problem j right with probability (j % 9) / 8) graded by the real math grader. The run samples exactly
what its recorded decision allocates, its metrics are the two-stage estimate computed here by hand
from the stored rows and adaptive.json, a half-width target records its prediction beside the
half-width achieved and stops before round two when the pilots put it out of reach (unless
``fallback=cap``), a run killed after the decision or mid second stage resumes to the same rows and
decisions, and bad input is one error line before anything is written. Without a run: every metric
and group through ``compute_metrics(two_stage=...)`` is each problem's ``TwoStage.estimate`` of its
two parts, and a Monte Carlo metric's SE is the bound of its parts'."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import adaptive_model
import numpy as np
import pytest

from bonbench.api.metric.values import compute_metrics
from bonbench.apps.cli import main
from bonbench.core.errors import BonbenchError
from bonbench.metrics.adaptive import TwoStage, allocate, allocate_halfwidth
from bonbench.metrics.bootstrap import bootstrap_ci
from bonbench.metrics.estimators import ProblemOutcome
from bonbench.pipeline.scoring import group_metrics

TESTS = Path(__file__).parent
PILOT, BUDGET, CAP, LIMIT = 4, 10, 16, 24
# a half-width target on pass@1 that these 24 problems reach below the cap, with tables that differ
HALF, HALF_SPEC = 0.138, "pilot=4,halfwidth=0.138"
METRICS = ("pass@1,2", "maj@2")


@pytest.fixture
def scripted(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for (module, name), value in adaptive_model.patches(data_dir).items():
        monkeypatch.setattr(module, name, value)


def run_args(data_dir: Path, out: Path, *extra: str, adaptive: str = f"pilot={PILOT},budget={BUDGET}",
             metrics: tuple[str, str] = METRICS) -> list[str]:
    return ["run", "--task", "math", "--limit", str(LIMIT), "--n", str(CAP), "--adaptive", adaptive,
            "--metric", metrics[0], "--metric", metrics[1], "--backend", "hf", "--data-dir", str(data_dir),
            "--out", str(out), "--n-boot", "50", *extra]


def run_dir(out: Path) -> Path:
    (cfg,) = out.glob("runs/math/*/*/config.json")
    return cfg.parent


def rows(path: Path) -> list[dict]:  # type: ignore[type-arg]  # JSON rows
    return [json.loads(line) for line in path.read_text().splitlines()]


def one_error(code: int, err: str) -> str:
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code != 0 and len(errors) == 1 and "Traceback" not in err, err
    return errors[0]


def pass_at(c: list[bool], k: int) -> float:
    n, right = len(c), sum(c)
    return 1.0 - math.comb(n - right, k) / math.comb(n, k)


def test_an_adaptive_run_samples_the_allocation_and_estimates_by_hand(scripted: None, data_dir: Path, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(run_args(data_dir, tmp_path)) == 0
    root = run_dir(tmp_path)
    hashed = json.loads((root / "config.json").read_text())["hashed"]
    problem_set = json.loads((root / "metrics.json").read_text())["problem_set"]
    assert hashed["adaptive"] == {"pilot": PILOT, "budget": BUDGET, "floor": 2, "n": CAP, "problem_set": problem_set}
    decision = json.loads((root / "adaptive.json").read_text())
    correct: dict[str, dict[int, bool]] = {}
    for g in rows(root / "grades" / "math.jsonl"):
        correct.setdefault(g["problem_id"], {})[g["sample_idx"]] = g["correct"]
    pids = list(decision["problems"])
    assert len(pids) == LIMIT
    # the decision is the allocation of the stored pilot grades, from the other problems' pilots
    s1 = [sum(correct[pid][i] for i in range(PILOT)) for pid in pids]
    want = allocate(s1, PILOT, (BUDGET - PILOT) * LIMIT, floor=2, cap=CAP - PILOT)
    for pid, s, d in zip(pids, s1, want, strict=True):
        got = decision["problems"][pid]
        assert (got["s1"], got["n"], got["second"], got["weight"]) == (s, PILOT + d.second[s], list(d.second), d.weight)
    assert len({p["n"] for p in decision["problems"].values()}) > 1  # the problems got different n
    # exactly the allocated samples, no more
    stored: dict[str, list[int]] = {}
    for s in rows(root / "samples.jsonl"):
        stored.setdefault(s["problem_id"], []).append(s["sample_idx"])
    assert {pid: sorted(v) for pid, v in stored.items()} == {
        pid: list(range(p["n"])) for pid, p in decision["problems"].items()}
    assert decision["spend"]["samples"] == sum(len(v) for v in stored.values())
    # each problem's value is w * (value on the pilot) + (1 - w) * (value on the second stage)
    doc = json.loads((root / "metrics.json").read_text())
    pooled = []
    for name, k in (("pass@1", 1), ("pass@2", 2)):
        hand = {}
        for pid, p in decision["problems"].items():
            c = [correct[pid][i] for i in range(p["n"])]
            w = p["weight"]
            hand[pid] = w * pass_at(c[:PILOT], k) + (1 - w) * pass_at(c[PILOT:], k)
            pooled.append(pass_at(c, k))
        assert doc["per_problem"][name] == pytest.approx(hand, abs=1e-12)
        values = np.array([hand[pid] for pid in pids])
        assert doc["metrics"][name]["value"] == pytest.approx(values.mean(), abs=1e-12)
        lo, hi = bootstrap_ci(values, n_boot=50, seed=0)
        assert doc["metrics"][name]["ci95"] == pytest.approx([float(lo), float(hi)], abs=1e-12)
    assert doc["metrics"]["pass@1"]["value"] != pytest.approx(np.mean(pooled[:LIMIT]), abs=1e-6)  # not the pooled mean
    assert doc["adaptive"]["pilot"] == PILOT and doc["adaptive"]["samples"] == decision["spend"]["samples"]
    # curves stop at the largest k every design supports: the pilot, or the smallest second stage
    top = min(PILOT, min(min(p["second"]) for p in decision["problems"].values()))
    curves = json.loads((root / "curves.json").read_text())
    assert curves["pass"]["k"] == list(range(1, top + 1))
    assert curves["pass"]["value"][0] == pytest.approx(doc["metrics"]["pass@1"]["value"], abs=1e-12)
    capsys.readouterr()
    assert main(["report", str(root)]) == 0
    assert f"adaptive two-stage: pilot {PILOT}, mean n {decision['spend']['mean_n']:.2f} of cap {CAP}" in capsys.readouterr().out
    # a rescore reads each problem's n and design from the run directory, and gives the same values
    before = doc["metrics"]
    assert main(["score", str(root), "--data-dir", str(data_dir)]) == 0
    after = json.loads((root / "metrics.json").read_text())["metrics"]
    assert {m: after[m]["value"] for m in before} == {m: v["value"] for m, v in before.items()}


def test_the_run_id_hashes_the_design_and_the_problem_set(scripted: None, data_dir: Path, tmp_path: Path) -> None:
    from bonbench.pipeline.adaptive_spec import AdaptiveSpec
    from bonbench.run.plan import plan
    from bonbench.run.request import RunRequest

    def run_id(**change: object) -> str:
        fields: dict[str, object] = {"task": "math", "metrics": ("pass@1,2",), "n": CAP, "backend": "hf", "limit": LIMIT,
                                     "data_dir": str(data_dir), "out": tmp_path, "adaptive": AdaptiveSpec(PILOT, BUDGET)}
        return plan(RunRequest(**{**fields, **change})).runs[0].run_hash  # type: ignore[arg-type]  # the fields above

    base = run_id()
    others = [run_id(adaptive=None), run_id(adaptive=AdaptiveSpec(PILOT, BUDGET + 1)), run_id(adaptive=AdaptiveSpec(3, BUDGET)),
              run_id(n=CAP + 1), run_id(limit=LIMIT - 1), run_id(task_args={"subject": "algebra", "level": "5"}),
              run_id(metrics=("pass@1,3",))]
    half = AdaptiveSpec(PILOT, halfwidth=HALF)
    targets = [run_id(adaptive=half), run_id(adaptive=AdaptiveSpec(PILOT, halfwidth=HALF / 2)),
               run_id(adaptive=half, metrics=("pass@2,1",))]  # the first metric is the one targeted
    assert len({base, *others, *targets}) == 1 + len(others) + len(targets)
    assert run_id(metrics=("pass@1,2", "maj@2")) == base  # another metric at the same floor: the same samples
    # fallback only says whether an out-of-reach target stops the run: the same samples, the same run
    assert run_id(adaptive=AdaptiveSpec(PILOT, halfwidth=HALF, fallback="stop")) == targets[0]


KILLER = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    sys.path.insert(0, os.environ["TESTS"])
    import adaptive_model
    adaptive_model.install(Path(os.environ["DATA_DIR"]))
    from bonbench.core import store
    from bonbench.apps.cli import main

    calls = 0
    append = store.JsonlTable.append

    def killing_append(self, records):
        global calls
        if self.path.name == "samples.jsonl":
            calls += 1
            if calls == int(os.environ["KILL_AT"]):
                os.kill(os.getpid(), signal.SIGKILL)  # as a killed job dies: no cleanup, no flush
        return append(self, records)

    store.JsonlTable.append = killing_append
    sys.exit(main(sys.argv[1:]))
""")


@pytest.mark.parametrize(("kill_at", "target", "metrics"), [
    (LIMIT + 1, f"pilot={PILOT},budget={BUDGET}", METRICS),  # right after the decision
    (LIMIT + LIMIT // 2, f"pilot={PILOT},budget={BUDGET}", METRICS),  # mid second stage
    (LIMIT + LIMIT // 2, HALF_SPEC, METRICS),
    # a target on maj@2 met with probability 0.9: decided from the pilots' answers, with a margin
    (LIMIT + LIMIT // 2, "pilot=4,halfwidth=0.16,confidence=0.9", ("maj@2", "pass@1,2")),
    # a target on bon@2: decided from the verifier's stored scores of the pilots
    (LIMIT + LIMIT // 2, "pilot=4,halfwidth=0.145", ("bon@2", "pass@1,2"))])
def test_a_killed_adaptive_run_resumes_to_the_same_rows_and_decisions(kill_at: int, target: str, metrics: tuple[str, str],
                                                                      scripted: None, data_dir: Path,
                                                                      tmp_path: Path) -> None:
    verifier = ("--verifier", "oracle") if metrics[0].startswith("bon@") else ()
    assert main(run_args(data_dir, tmp_path / "whole", *verifier, adaptive=target, metrics=metrics)) == 0
    whole = run_dir(tmp_path / "whole")
    env = {**os.environ, "KILL_AT": str(kill_at), "TESTS": str(TESTS), "DATA_DIR": str(data_dir),
           "PYTHONPATH": str(TESTS.parent)}
    args = run_args(data_dir, tmp_path / "killed", *verifier, adaptive=target, metrics=metrics)
    proc = subprocess.run([sys.executable, "-c", KILLER, *args], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == -9, proc.stderr[-2000:]
    killed = run_dir(tmp_path / "killed")
    assert (killed / "adaptive.json").read_bytes() == (whole / "adaptive.json").read_bytes()  # decided before the kill
    ns = [p["n"] for p in json.loads((whole / "adaptive.json").read_text())["problems"].values()]
    # one append per problem in each round: the pilots, and the second stages of the problems before the kill
    assert len(rows(killed / "samples.jsonl")) == PILOT * LIMIT + sum(n - PILOT for n in ns[:kill_at - 1 - LIMIT])
    assert not (killed / "metrics.json").exists()
    assert main(args) == 0
    for name in ("samples.jsonl", "grades/math.jsonl", "adaptive.json", *(["scores/oracle.jsonl"] if verifier else [])):
        assert (killed / name).read_bytes() == (whole / name).read_bytes(), name
    got, want = (json.loads((d / "metrics.json").read_text()) for d in (killed, whole))
    assert got["metrics"] == want["metrics"] and got["per_problem"] == want["per_problem"]


def test_a_sweep_decides_each_run_from_its_own_pilots(scripted: None, data_dir: Path, tmp_path: Path) -> None:
    assert main(run_args(data_dir, tmp_path, "--temperature", "0.5,1.0")) == 0
    roots = sorted(cfg.parent for cfg in tmp_path.glob("runs/math/*/*/config.json"))
    assert len(roots) == 2
    for root in roots:
        decision = json.loads((root / "adaptive.json").read_text())
        assert sum(1 for _ in rows(root / "samples.jsonl")) == decision["spend"]["samples"]
        assert json.loads((root / "metrics.json").read_text())["adaptive"]["samples"] == decision["spend"]["samples"]


def pilot_counts(root: Path, pids: list[str]) -> list[int]:
    correct: dict[str, dict[int, bool]] = {}
    for g in rows(root / "grades" / "math.jsonl"):
        correct.setdefault(g["problem_id"], {})[g["sample_idx"]] = g["correct"]
    return [sum(correct[pid][i] for i in range(PILOT)) for pid in pids]


def test_a_halfwidth_run_samples_what_the_pilots_predict_and_records_the_target(
        scripted: None, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(run_args(data_dir, tmp_path, adaptive=HALF_SPEC)) == 0
    root = run_dir(tmp_path)
    hashed = json.loads((root / "config.json").read_text())["hashed"]["adaptive"]
    assert hashed == {"pilot": PILOT, "halfwidth": HALF, "metric": "pass@1", "floor": 2, "n": CAP,
                      "problem_set": hashed["problem_set"]}  # fallback is not hashed
    decision = json.loads((root / "adaptive.json").read_text())
    pids = list(decision["problems"])
    s1 = pilot_counts(root, pids)
    want, hw = allocate_halfwidth(s1, PILOT, HALF, k=1, floor=2, cap=CAP - PILOT)
    for pid, s, d in zip(pids, s1, want, strict=True):
        got = decision["problems"][pid]
        assert (got["s1"], got["n"], got["second"], got["weight"]) == (s, PILOT + d.second[s], list(d.second), d.weight)
    assert decision["target"] == {"metric": "pass@1", "halfwidth": HALF, "predicted": hw.predicted, "at_cap": hw.at_cap,
                                  "between": hw.between, "reachable": True}
    assert "budget" not in decision and len({p["n"] for p in decision["problems"].values()}) > 1
    assert PILOT * LIMIT < decision["spend"]["samples"] < CAP * LIMIT
    assert sum(1 for _ in rows(root / "samples.jsonl")) == decision["spend"]["samples"]
    doc = json.loads((root / "metrics.json").read_text())
    lo, hi = doc["metrics"]["pass@1"]["ci95"]
    assert doc["adaptive"]["target"] == {**decision["target"], "achieved": pytest.approx((hi - lo) / 2, abs=1e-12)}
    capsys.readouterr()
    assert main(["report", str(root)]) == 0
    assert (f"target 95% CI half-width {HALF:g} on pass@1: predicted {hw.predicted:.4f}, achieved {(hi - lo) / 2:.4f}, "
            f"between problems alone {hw.between:.4f}, floor 2") in capsys.readouterr().out.replace("\n", " ")


def test_a_halfwidth_out_of_reach_stops_before_round_two_with_fallback_stop(
        scripted: None, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = one_error(main(run_args(data_dir, tmp_path, adaptive="pilot=4,halfwidth=0.12,fallback=stop")),
                     capsys.readouterr().err)
    root = run_dir(tmp_path)
    assert not (root / "adaptive.json").exists() and sum(1 for _ in rows(root / "samples.jsonl")) == PILOT * LIMIT
    pids = [json.loads(x)["problem_id"] for x in (root / "samples.jsonl").read_text().splitlines()[::PILOT]]
    _, hw = allocate_halfwidth(pilot_counts(root, pids), PILOT, 0.12, k=1, floor=2, cap=CAP - PILOT)
    assert not hw.reaches(0.12)
    assert (f"--adaptive halfwidth=0.12 on pass@1 is out of reach: the pilots predict {hw.at_cap:.4f} with every problem "
            f"at --n {CAP}, and {hw.between:.4f} from the spread between problems alone") in line
    assert "resume with fallback=cap to go on from these pilots" in line and "halfwidth=0.133 or more" in line
    capsys.readouterr()
    line = one_error(main(["score", str(root), "--data-dir", str(data_dir)]), capsys.readouterr().err)
    # the command that resumes it
    assert "pilot round has not finished" in line and "--adaptive pilot=4,halfwidth=0.12,fallback=stop " in line
    # the default (fallback=cap): the same run directory (fallback is not hashed), its pilots kept, every
    # problem to the cap
    with pytest.warns(UserWarning, match=f"going on, up to --n {CAP} per problem"):
        assert main(run_args(data_dir, tmp_path, adaptive="pilot=4,halfwidth=0.12")) == 0
    assert run_dir(tmp_path) == root
    decision = json.loads((root / "adaptive.json").read_text())
    assert {p["n"] for p in decision["problems"].values()} == {CAP} and decision["target"]["reachable"] is False
    assert sum(1 for _ in rows(root / "samples.jsonl")) == CAP * LIMIT
    capsys.readouterr()
    assert main(["report", str(root)]) == 0
    assert "out of reach: sampled to the cap" in capsys.readouterr().out.replace("\n", " ")
    # and with fallback=stop again: the stored decision is not what these flags give
    line = one_error(main(run_args(data_dir, tmp_path, adaptive="pilot=4,halfwidth=0.12,fallback=stop")),
                     capsys.readouterr().err)
    assert "is out of reach" in line


def test_a_halfwidth_target_on_another_metric_than_pass_maj_or_bon_is_one_error_line(
        scripted: None, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = run_args(data_dir, tmp_path / "out", adaptive=HALF_SPEC, metrics=("pass^2", "pass@1,2"))
    line = one_error(main(args), capsys.readouterr().err)
    assert "--adaptive halfwidth= targets the first --metric (pass^2)" in line and "put one of them first" in line
    assert not (tmp_path / "out" / "runs").exists()


def test_a_decision_that_the_pilots_do_not_give_is_one_error_line(scripted: None, data_dir: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(run_args(data_dir, tmp_path)) == 0
    path = run_dir(tmp_path) / "adaptive.json"
    decision = json.loads(path.read_text())
    first = next(iter(decision["problems"]))
    decision["problems"][first]["n"] += 1
    path.write_text(json.dumps(decision))
    capsys.readouterr()
    line = one_error(main(run_args(data_dir, tmp_path)), capsys.readouterr().err)
    assert "adaptive.json holds other decisions than this run's pilot grades give" in line


@pytest.mark.parametrize(("adaptive", "extra", "says"), [
    ("pilot=1,budget=8", (), "pilot=1 is below k = 2 of pass@2"),
    ("pilot=4,budget=3", (), "budget=3 must be between the pilot (4) and --n 16"),
    ("pilot=4,budget=17", (), "budget=17 must be between the pilot (4) and --n 16"),
    ("pilot=15,budget=16", (), "--n 16 leaves no second stage of k = 2 after a pilot of 15"),
    ("pilot=4", (), "--adaptive takes pilot=P,budget=B"),
    ("pilot=4,budget=8,floor=2", (), "--adaptive takes pilot=P,budget=B"),
    ("pilot=4,halfwidth=0", (), "--adaptive takes pilot=P,budget=B or pilot=P,halfwidth=H[,confidence=Q][,fallback=cap|stop]"),
    ("pilot=4,halfwidth=1.5", (), "H a 95% CI half-width between 0 and 1"),
    ("pilot=4,halfwidth=0.1,fallback=yes", (), "--adaptive takes pilot=P,budget=B or pilot=P,halfwidth=H"),
    ("pilot=4,halfwidth=0.1,confidence=0.4", (), "Q the probability of meeting H, from 0.5 (the default) to below 1"),
    ("pilot=4,halfwidth=0.1,confidence=1", (), "--adaptive takes pilot=P,budget=B or pilot=P,halfwidth=H[,confidence=Q]"),
    ("pilot=4,budget=8,confidence=0.9", (), "--adaptive takes pilot=P,budget=B or pilot=P,halfwidth=H"),
    ("pilot=4,budget=8,halfwidth=0.1", (), "--adaptive takes pilot=P,budget=B or pilot=P,halfwidth=H"),
    ("pilot=1,halfwidth=0.1", (), "pilot=1 is below k = 2 of pass@2"),
    ("pilot=15,halfwidth=0.1", (), "--n 16 leaves no second stage of k = 2 after a pilot of 15"),
    ("pilot=4,halfwidth=0.1", ("--shard", "1/2"), "drop --shard"),
    ("pilot=4,budget=8", ("--strategy", "beam", "--verifier", "prm:x"), "--adaptive does not combine with that setting: "
                                                                         "drop --strategy"),
    ("pilot=4,budget=8", ("--shard", "1/2"), "drop --shard"),
    ("pilot=4,budget=8", ("--samples", "x.jsonl"), "a samples file holds the samples it holds: drop --adaptive"),
])
def test_bad_adaptive_input_is_one_error_line_before_anything_is_written(adaptive: str, extra: tuple[str, ...], says: str,
                                                                         scripted: None, data_dir: Path, tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    args = run_args(data_dir, tmp_path / "out", *extra, adaptive=adaptive)
    if "--samples" in extra:
        args[args.index("hf")] = "scripted"
    line = one_error(main(args), capsys.readouterr().err)
    assert says in line, line
    assert not (tmp_path / "out" / "runs").exists()


# ----------------------------------------------------------------------------- the estimate's seam, without a run


def _outcomes(seed: int, n: int, problems: int) -> list[ProblemOutcome]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(problems):
        answers = tuple(int(a) for a in rng.integers(0, 4, n))
        out.append(ProblemOutcome(problem_id=f"p/{i}", correct=tuple(float(a == 0) for a in answers), answers=answers,
                                  scores=tuple(float(x) for x in rng.random(n))))
    return out


def test_every_metric_and_group_is_the_designs_estimate_of_its_two_parts() -> None:

    outs = _outcomes(0, 12, 8)
    designs = [TwoStage(4, (8, 8, 8, 8, 8), w) for w in (0.0, 0.25, 0.5, 1.0, 0.3, 0.3, 0.7, 0.1)]
    specs = ["pass@1", "pass@3", "maj@3", "bon@2", "wmaj@3", "bom@2:0.5"]
    _, per_pilot = compute_metrics([replace_part(o, 0, 4) for o in outs], specs, n_boot=30)
    _, per_second = compute_metrics([replace_part(o, 4, None) for o in outs], specs, n_boot=30)
    got, per = compute_metrics(outs, specs, n_boot=30, two_stage=designs)
    for name in per:
        want = {o.problem_id: d.estimate(per_pilot[name][o.problem_id], per_second[name][o.problem_id])
                for o, d in zip(outs, designs, strict=True)}
        assert per[name] == pytest.approx(want, abs=1e-12), name
        lo, hi = bootstrap_ci(np.array(list(want.values())), n_boot=30, seed=0)
        assert got[name].ci95 == pytest.approx((float(lo), float(hi)), abs=1e-12)
    # a group's metrics are its problems' estimates too
    task = SimpleNamespace(breakdowns={"half": lambda p: "a" if int(p.id.split("/")[1]) < 4 else "b"})
    problems = [SimpleNamespace(id=o.problem_id) for o in outs]
    by_id = {o.problem_id: d for o, d in zip(outs, designs, strict=True)}
    grouped, grouped_pp = group_metrics(task, problems, outs, ["pass@3"], n_boot=30, seed=0,  # type: ignore[arg-type]  # duck-typed task and problems
                                        designs=by_id)
    assert grouped_pp["pass@3[half=a]"] == pytest.approx({f"p/{i}": per["pass@3"][f"p/{i}"] for i in range(4)}, abs=1e-12)
    # k above what a design supports (a pilot of 4 with weight > 0) is one line, not a value
    with pytest.raises(BonbenchError, match="pass@5 needs k = 5 samples in each stage of this adaptive run"):
        compute_metrics(outs, ["pass@5"], n_boot=30, two_stage=designs)
    assert compute_metrics(outs, ["pass@5"], n_boot=30, two_stage=[TwoStage(4, (8,) * 5, 0.0)] * 8)[0]["pass@5"].value >= 0


def test_a_monte_carlo_metrics_se_is_the_bound_of_its_parts() -> None:

    outs = _outcomes(1, 60, 3)  # C(30, 6) subsets per part: wmaj@6 is sampled
    designs = [TwoStage(30, (30,) * 31, 0.5)] * 3
    pilot = compute_metrics([replace_part(o, 0, 30) for o in outs], ["wmaj@6"], n_boot=30)[0]["wmaj@6"]
    second = compute_metrics([replace_part(o, 30, None) for o in outs], ["wmaj@6"], n_boot=30)[0]["wmaj@6"]
    got = compute_metrics(outs, ["wmaj@6"], n_boot=30, two_stage=designs)[0]["wmaj@6"]
    assert pilot.mc_se is not None and second.mc_se is not None and got.mc_se is not None
    assert got.mc_se == pytest.approx(math.hypot(pilot.mc_se, second.mc_se), rel=1e-12)
    assert got.value == pytest.approx((pilot.value + second.value) / 2, abs=1e-12)


def replace_part(o: ProblemOutcome, lo: int, hi: int | None) -> ProblemOutcome:
    """Samples lo..hi-1 of a problem (written here again, not imported: the check of values._part)."""
    return replace(o, correct=o.correct[lo:hi], answers=o.answers[lo:hi],
                   scores=None if o.scores is None else o.scores[lo:hi])
