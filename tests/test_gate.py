"""The CI gate: its false-alarm rate on identical reruns, its power on a real drop, the tolerance rule,
the test chosen for paired / unpaired / summary-only inputs, baseline files and exit codes, and the
committed baseline reproduced by the pipeline."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bonbench.apps.analysis.analysis_flags import GATE_ERROR, GATE_PASS, GATE_REGRESSION, main
from bonbench.apps.analysis.gate import compare_metric, paired_test, verdict
from bonbench.apps.analysis.rundir import Metric
from bonbench.apps.analysis.synthetic import per_problem_pass, write_synthetic_run
from bonbench.core.errors import BonbenchError

ALPHA = 0.05
P, N = 500, 16
IDS = [f"p{i:03d}" for i in range(P)]


def _probs(seed: int = 0) -> np.ndarray:
    # per-problem success rates in [0.1, 0.9] so that a 5-point drop is exactly 5 points everywhere
    return 0.1 + 0.8 * np.random.default_rng(seed).beta(0.7, 1.2, size=P)


def _metric(pp: np.ndarray) -> Metric:
    return Metric(float(pp.mean()), (float("nan"), float("nan")), len(pp))


def _gate_fails(base_pp: np.ndarray, cur_pp: np.ndarray, tolerance: float = 0.0) -> bool:
    r = compare_metric(_metric(base_pp), dict(zip(IDS, base_pp, strict=True)), _metric(cur_pp),
                       dict(zip(IDS, cur_pp, strict=True)), ALPHA)
    assert r.test == "paired t" and r.n_paired == P
    return verdict(r, ALPHA, tolerance) == "REGRESSION"


@pytest.mark.parametrize(("n", "k"), [(1, 1), (4, 1), (16, 1), (16, 4)])
def test_false_alarm_rate_on_identical_reruns(n: int, k: int) -> None:
    # 1000 (baseline, rerun) pairs: both re-sample every problem's correctness from the same p_i,
    # as two seeds of one model would. A one-sided level-0.05 test may alarm on ~5% of them.
    # n = 1 makes the per-problem values 0/1, the least t-like case.
    rng = np.random.default_rng(100 * n + k)
    p = _probs()
    trials = 1000
    alarms = sum(_gate_fails(per_problem_pass(p, n, k, rng), per_problem_pass(p, n, k, rng)) for _ in range(trials))
    rate = alarms / trials
    print(f"false-alarm rate pass@{k}, n={n}: {rate:.3f} ({alarms}/{trials})")
    # alpha plus 3 binomial standard errors (0.021); the lower bound shows the test is not vacuous
    assert 0.02 <= rate <= ALPHA + 0.021


@pytest.mark.parametrize(("n", "min_power"), [(1, 0.45), (4, 0.95), (16, 0.99)])
def test_power_against_a_five_point_drop_on_500_problems(n: int, min_power: float) -> None:
    # Normal approximation of the paired t-test's power: with one sample per problem the per-problem
    # differences have sd ~ 0.6, se ~ 0.028, so a 0.05 drop is found ~56% of the time; n = 4 averages
    # that noise down enough for > 0.95.
    rng = np.random.default_rng(7 + n)
    p = _probs()
    trials = 400
    hits = sum(_gate_fails(per_problem_pass(p, n, 1, rng), per_problem_pass(p - 0.05, n, 1, rng)) for _ in range(trials))
    power = hits / trials
    print(f"power, 5-point pass@1 drop, {P} problems, n={n}: {power:.3f}")
    assert power >= min_power


def test_tolerance_excuses_only_small_significant_drops() -> None:
    rng = np.random.default_rng(3)
    p = _probs()
    base, cur = per_problem_pass(p, N, 1, rng), per_problem_pass(p - 0.05, N, 1, rng)
    r = compare_metric(_metric(base), dict(zip(IDS, base, strict=True)), _metric(cur), dict(zip(IDS, cur, strict=True)), ALPHA)
    assert r.p < ALPHA and -0.07 < r.diff < -0.03
    assert verdict(r, ALPHA, tolerance=0.0) == "REGRESSION"
    assert verdict(r, ALPHA, tolerance=0.01) == "REGRESSION"
    assert verdict(r, ALPHA, tolerance=0.10) == "ok (drop <= tolerance)"


def test_paired_test_degenerate_and_directional_cases() -> None:
    x = np.linspace(0, 1, 50)
    same = paired_test(x, x)
    assert same.p == 1.0 and same.diff == 0.0
    shifted = paired_test(x, x - 0.01)  # every problem exactly 1 point worse: no noise at all
    assert shifted.p == 0.0 and shifted.hi < 0
    better = paired_test(x, np.clip(x + np.random.default_rng(0).normal(0.1, 0.05, 50), 0, 1))
    assert better.p > 0.99 and verdict(better, ALPHA, 0.0) == "improved"


def test_test_choice_follows_problem_overlap_and_available_values() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.random(200), rng.random(200)
    ids_a = [f"a{i}" for i in range(200)]
    ids_b = [f"b{i}" for i in range(200)]
    # no shared problems: the means are over different problems, so there is nothing to compare
    with pytest.raises(BonbenchError, match="share 0 problem"):
        compare_metric(_metric(a), dict(zip(ids_a, a, strict=True)), _metric(b), dict(zip(ids_b, b, strict=True)), ALPHA)
    # a run on a subset (another --limit): paired on the shared problems
    partly = compare_metric(_metric(a), dict(zip(ids_a, a, strict=True)), _metric(b),
                            dict(zip(ids_a[:30], b[:30], strict=True)), ALPHA)
    assert partly.test == "paired t" and partly.n_paired == 30 and (partly.n_baseline, partly.n_current) == (200, 30)
    summary = compare_metric(Metric(0.50, (0.45, 0.55), 400), None, Metric(0.40, (0.35, 0.45), 400), None, ALPHA)
    assert summary.test == "z (from CIs)" and summary.p < 0.01
    with pytest.raises(Exception, match="neither per-problem values nor a CI"):
        compare_metric(_metric(a), None, _metric(b), None, ALPHA)


# ---- through the CLI on run directories ------------------------------------------------------------

def _run(root: Path, p: np.ndarray, seed: int, **kw: object) -> Path:
    return write_synthetic_run(root, p, n=8, seed=seed, metrics=("pass@1", "pass@4"), n_boot=50, **kw)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("gate_runs")
    p = 0.1 + 0.8 * np.random.default_rng(0).beta(0.7, 1.2, size=400)
    return {
        "base": _run(root / "a", p, seed=1),
        "rerun": _run(root / "b", p, seed=2),
        "drop": _run(root / "c", p - 0.08, seed=3),
        "other_task": _run(root / "d", p, seed=4, task="other"),
    }


def test_cli_save_baseline_then_gate(tmp_path: Path, runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    baseline = tmp_path / "baselines" / "synthetic.json"
    assert main(["gate", "--save-baseline", "--run", str(runs["base"]), "--out", str(baseline)]) == GATE_PASS
    assert baseline.is_file()
    capsys.readouterr()

    # list form as `bonbench run --metric` takes it; the duplicate is gated once
    assert main(["gate", "--baseline", str(baseline), "--run", str(runs["rerun"]),
                 "--metric", "pass@1,4", "--metric", "pass@1"]) == GATE_PASS
    out = capsys.readouterr().out
    assert "gate: PASS (2 metric(s) checked)" in out and "paired t" in out and "400 paired" in out

    json_out = tmp_path / "gate.json"
    code = main(["gate", "--baseline", str(baseline), "--run", str(runs["drop"]), "--json", str(json_out)])
    out = capsys.readouterr().out
    assert code == GATE_REGRESSION
    assert "REGRESSION" in out and "gate: FAIL" in out and "p (one-sided)" in out and "90% CI" in out
    assert '"failed": true' in json_out.read_text()

    # a tolerance larger than the drop turns the same comparison into a pass
    code = main(["gate", "--baseline", str(baseline), "--run", str(runs["drop"]), "--tolerance", "0.2"])
    assert code == GATE_PASS and "ok (drop <= tolerance)" in capsys.readouterr().out


@pytest.mark.parametrize("case", ["missing_metric", "no_baseline_file", "task_mismatch", "not_a_run"])
def test_cli_input_errors_exit_2_with_one_line(case: str, tmp_path: Path, runs: dict[str, Path],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    baseline = tmp_path / "base.json"
    assert main(["gate", "--save-baseline", "--run", str(runs["base"]), "--out", str(baseline)]) == GATE_PASS
    capsys.readouterr()
    args = {
        "missing_metric": ["--baseline", str(baseline), "--run", str(runs["rerun"]), "--metric", "bon@4"],
        "no_baseline_file": ["--baseline", str(tmp_path / "nope.json"), "--run", str(runs["rerun"])],
        "task_mismatch": ["--baseline", str(baseline), "--run", str(runs["other_task"])],
        "not_a_run": ["--baseline", str(baseline), "--run", str(tmp_path)],
    }[case]
    assert main(["gate", *args]) == GATE_ERROR
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")


# ---- the committed baseline ----------------------------------------------------------------------

BASELINE = Path(__file__).resolve().parents[1] / "results" / "baselines" / "math--gemma-3-270m.json"


def test_committed_math_baseline_is_reproduced_by_the_pipeline_and_passes_the_gate(
        data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The committed baseline (math, Gemma 3 270M, 2 problems, n = 32) keeps no grades, so they are
    rebuilt from the per-problem values it records: test/algebra/1.json has 5 of 32 samples right,
    all with the gold answer and every wrong answer different, and its top log-probability on a wrong
    sample; test/algebra/2.json has none right. Real MATH problems, the MATH grader and the pipeline
    with the baseline's seed and the CLI's default bootstrap size must give exactly its metrics and
    per-problem values, and `bonbench gate` must pass on the run."""
    from bonbench.api.metric.grammar import parse_metrics
    from bonbench.api.task import get_task
    from bonbench.api.verifier import get_verifier
    from bonbench.apps.cli import main as bonbench_main
    from bonbench.core.config import RunConfig
    from bonbench.core.records import Sample
    from bonbench.pipeline import stages as pipeline
    from bonbench.pipeline.prepared import prepare

    base = json.loads(BASELINE.read_text())
    c = base["config"]
    task = get_task("math", data_dir=str(data_dir))
    cfg = RunConfig(task="math", model=c["model"], backend="scripted", n=c["n"], temperature=c["temperature"],
                    top_p=c["top_p"], max_tokens=c["max_tokens"], seed=c["seed"], stop=tuple(c["stop"]),
                    prompt_style=c["prompt_style"], limit=c["limit"])
    run = prepare(task, cfg, tmp_path / "results")
    assert [p.id for p in run.problems] == sorted(base["per_problem"]["pass@1"])
    right = {"test/algebra/1.json": 5, "test/algebra/2.json": 0}
    samples = []
    for p in run.problems:
        for i in range(cfg.n):
            ok = i < right[p.id]
            answer = p.target if ok else str(-1000 - i)
            # right samples get the lowest log-probabilities, so the verifier's top pick is wrong
            samples.append(Sample(p.id, i, f"The final answer is $\\boxed{{{answer}}}$.", 10, "stop",
                                  logprob=-100.0 - i if ok else -float(i)))
    pipeline.store_samples(run, samples)
    doc = pipeline.evaluate(run, parse_metrics(c["metrics"]), get_verifier("logprob"), n_boot=1000)
    got = {name: {k: doc["metrics"][name][k] for k in ("value", "ci95", "n_problems")} for name in base["metrics"]}
    assert got == base["metrics"]
    assert {name: doc["per_problem"][name] for name in base["per_problem"]} == base["per_problem"]
    capsys.readouterr()
    assert bonbench_main(["gate", "--baseline", str(BASELINE), "--run", str(run.store.root)]) == GATE_PASS
    out = capsys.readouterr().out
    assert "gate: PASS (4 metric(s) checked)" in out and "2 paired" in out and "note: settings differ" not in out


def test_a_changed_verifier_is_noted_on_bon_metrics_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """bon@k under another verifier is another selector: the gate says so (a learned verifier by its
    folder name, whatever machine's path it was loaded from), and says nothing when only pass@k is gated."""
    p = np.full(40, 0.5)
    run = write_synthetic_run(tmp_path / "a", p, n=4, metrics=("pass@1", "bon@4"), seed=1)
    base = tmp_path / "base.json"
    assert main(["gate", "--save-baseline", "--run", str(run), "--out", str(base)]) == GATE_PASS
    cfg_path = run / "config.json"
    doc = json.loads(cfg_path.read_text())
    for where in ("/machine/a/results/verifiers/math-x-head", "/machine/b/results/verifiers/math-x-head/"):
        doc["config"]["verifier"] = f"learned:{where}"
        cfg_path.write_text(json.dumps(doc))
        if where.startswith("/machine/a"):
            saved = tmp_path / "learned.json"
            assert main(["gate", "--save-baseline", "--run", str(run), "--out", str(saved)]) == GATE_PASS
    capsys.readouterr()
    assert main(["gate", "--baseline", str(base), "--run", str(run)]) == GATE_PASS
    assert "note: verifier differs" in capsys.readouterr().out
    assert main(["gate", "--baseline", str(base), "--run", str(run), "--metric", "pass@1"]) == GATE_PASS
    assert "verifier differs" not in capsys.readouterr().out
    assert main(["gate", "--baseline", str(saved), "--run", str(run)]) == GATE_PASS  # same folder, other machine
    assert "verifier differs" not in capsys.readouterr().out
