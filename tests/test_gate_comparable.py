"""The gate refuses what it cannot compare and knows which way is better: runs of another split or
problem set (real MATH train vs test through the pipeline), closed-form and lower-is-better
metrics, what --save-baseline stores, a checkpoint folder passed as a run, and unreadable or
unwritable files, each as one `error:` line with exit code 2."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from bonbench.apps.analysis.analysis_flags import GATE_ERROR, GATE_PASS, GATE_REGRESSION, main
from bonbench.apps.analysis.synthetic import write_synthetic_run


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def _math_run(data_dir: Path, out: Path, split: str, limit: int) -> Path:
    """A scored MATH run of ``split`` (first ``limit`` problems) through the real task, grader and
    pipeline; the samples are scripted: the first two of four answer with the gold answer."""
    from bonbench.api.metric.grammar import parse_metrics
    from bonbench.api.task import get_task
    from bonbench.core.config import RunConfig
    from bonbench.core.records import Sample
    from bonbench.pipeline import stages as pipeline
    from bonbench.pipeline.prepared import open_run, prepare

    task = get_task("math", data_dir=str(data_dir), split=split)
    cfg = RunConfig(task="math", model="org/m", backend="scripted", n=4, limit=limit, task_args={"split": split},
                    metrics=("pass@1", "pass@4"))
    run = prepare(task, cfg, out)
    open_run(run)
    pipeline.store_samples(run, [Sample(p.id, i, f"The final answer is $\\boxed{{{p.target if i < 2 else -7}}}$.", 10,
                                        "stop") for p in run.problems for i in range(cfg.n)])
    pipeline.evaluate(run, parse_metrics(list(cfg.metrics)), None, n_boot=50)
    return run.store.root


def test_a_train_split_run_is_refused_against_a_test_split_baseline(data_dir: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    test_run = _math_run(data_dir, tmp_path / "a", "test", 12)
    train_run = _math_run(data_dir, tmp_path / "b", "train", 8)
    again = _math_run(data_dir, tmp_path / "c", "test", 12)
    baseline = tmp_path / "base.json"
    assert main(["gate", "--save-baseline", "--run", str(test_run), "--out", str(baseline)]) == GATE_PASS
    saved = json.loads(baseline.read_text())
    assert len(saved["problem_ids"]) == 12 and saved["metrics"]["pass@1"]["direction"] == "higher"
    capsys.readouterr()
    assert main(["gate", "--baseline", str(baseline), "--run", str(train_run)]) == GATE_ERROR
    line = _one_error_line(capsys)
    assert "not comparable" in line and "dataset fingerprint" in line and "12 (baseline) vs 8 (run), 0 shared" in line
    assert "task args {'split': 'test'} vs {'split': 'train'}" in line and "--save-baseline" in line
    # the same split and problems pass (identical scripted samples: every difference is 0)
    assert main(["gate", "--baseline", str(baseline), "--run", str(again)]) == GATE_PASS
    assert "gate: PASS (2 metric(s) checked)" in capsys.readouterr().out


def _with_metrics(run: Path, extra: dict[str, dict], per_problem: dict[str, dict[str, float]]) -> Path:
    doc = json.loads((run / "metrics.json").read_text())
    doc["metrics"].update(extra)
    doc["per_problem"].update(per_problem)
    (run / "metrics.json").write_text(json.dumps(doc))
    cfg = json.loads((run / "config.json").read_text())
    cfg["config"]["metrics"] = list(cfg["config"]["metrics"]) + [m for m in extra if not m.startswith("kl_bon")]
    (run / "config.json").write_text(json.dumps(cfg))
    return run


def _kl_run(root: Path, kl: np.ndarray, seed: int) -> Path:
    """A synthetic run with a per-problem ``kl`` and a closed-form ``kl_bon@4`` (equal on every problem)."""
    run = write_synthetic_run(root, np.full(len(kl), 0.5), n=4, metrics=("pass@1",), seed=seed, n_boot=50)
    ids = sorted(json.loads((run / "metrics.json").read_text())["per_problem"]["pass@1"])
    kl_bon = float(np.log(4) - 3 / 4)
    return _with_metrics(run, {
        "kl": {"value": float(kl.mean()), "ci95": [float(kl.mean()) - 0.1, float(kl.mean()) + 0.1], "n_problems": len(kl),
               "reference": "org/base", "direction": "lower"},
        "kl_bon@4": {"value": kl_bon, "ci95": [None, None], "n_problems": len(kl), "reference": "synthetic/model",
                     "closed_form": True},
    }, {"kl": dict(zip(ids, map(float, kl), strict=True)), "kl_bon@4": {i: kl_bon for i in ids}})


def test_kl_is_gated_lower_is_better_and_closed_form_kl_bon_is_not_gated(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(0)
    base_kl = rng.gamma(2.0, 0.5, size=200)
    base = _kl_run(tmp_path / "a", base_kl, 1)
    baseline = tmp_path / "b.json"
    assert main(["gate", "--save-baseline", "--run", str(base), "--out", str(baseline)]) == GATE_PASS
    saved = json.loads(baseline.read_text())
    assert list(saved["metrics"]) == ["pass@1", "kl"] and saved["metrics"]["kl"]["direction"] == "lower"
    assert "kl_bon@4" not in saved["per_problem"]  # closed-form: never stored, never gated
    capsys.readouterr()
    assert main(["gate", "--save-baseline", "--run", str(base), "--out", str(tmp_path / "x.json"),
                 "--metric", "kl_bon@4"]) == GATE_ERROR
    assert "closed-form function of n and k" in _one_error_line(capsys) and not (tmp_path / "x.json").exists()

    # a baseline saved before closed forms were recognised holds kl_bon@4: the gate says it skips it
    old = json.loads(baseline.read_text())
    old["metrics"]["kl_bon@4"] = {"value": 0.636, "ci95": [0.636, 0.636], "n_problems": 200}
    del old["default_metrics"], old["problem_ids"]  # fields such files lack
    old_file = tmp_path / "old.json"
    old_file.write_text(json.dumps(old))
    assert main(["gate", "--baseline", str(old_file), "--run", str(base)]) == GATE_PASS
    out = capsys.readouterr().out
    assert "note: kl_bon@4 is closed-form in the run" in out and "gate: PASS (2 metric(s) checked)" in out

    further = _kl_run(tmp_path / "c", base_kl + 0.3, 1)   # moved away from the reference: worse
    closer = _kl_run(tmp_path / "d", base_kl * 0.5, 1)     # closer to it: better
    assert main(["gate", "--baseline", str(baseline), "--run", str(further), "--metric", "kl"]) == GATE_REGRESSION
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("kl "))
    assert "lower" in row and "+0.3000" in row and row.rstrip().endswith("REGRESSION")
    assert main(["gate", "--baseline", str(baseline), "--run", str(closer), "--metric", "kl"]) == GATE_PASS
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("kl "))
    assert row.rstrip().endswith("improved") and "-0." in row


def test_save_baseline_stores_the_requested_metrics_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_synthetic_run(tmp_path, np.full(30, 0.5), n=4, metrics=("pass@1", "pass@4"), n_boot=20)
    # a per-group metric the task added beside the requested ones, and a report without a better side
    ids = sorted(json.loads((run / "metrics.json").read_text())["per_problem"]["pass@1"])
    doc = json.loads((run / "metrics.json").read_text())
    doc["metrics"]["pass@1[level=1]"] = {"value": 0.5, "ci95": [0.4, 0.6], "n_problems": 10}
    doc["per_problem"]["pass@1[level=1]"] = {i: 0.5 for i in ids[:10]}
    doc["metrics"]["gold_abstained"] = {"value": 3, "ci95": [3, 3], "n_problems": 30}
    (run / "metrics.json").write_text(json.dumps(doc))
    out = tmp_path / "b.json"
    assert main(["gate", "--save-baseline", "--run", str(run), "--out", str(out)]) == GATE_PASS
    saved = json.loads(out.read_text())
    assert list(saved["metrics"]) == ["pass@1", "pass@4", "pass@1[level=1]"]  # not the report, not kl_bon
    assert saved["default_metrics"] == ["pass@1", "pass@4"]  # groups only when named with --metric
    assert main(["gate", "--baseline", str(out), "--run", str(run)]) == GATE_PASS
    assert main(["gate", "--baseline", str(out), "--run", str(run), "--metric", "pass@1[level=1]"]) == GATE_PASS
    capsys.readouterr()
    assert main(["gate", "--baseline", str(out), "--run", str(run)]) == GATE_PASS
    assert "gate: PASS (2 metric(s) checked)" in capsys.readouterr().out
    assert main(["gate", "--save-baseline", "--run", str(run), "--out", str(out), "--metric", "gold_abstained"]) == GATE_ERROR


def test_a_checkpoint_folder_is_not_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ckpt = tmp_path / "checkpoints" / "math-passk4"
    ckpt.mkdir(parents=True)
    (ckpt / "config.json").write_text(json.dumps({"model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"]}))
    (ckpt / "bonbench_manifest.json").write_text("{}")
    assert main(["gate", "--save-baseline", "--run", str(ckpt)]) == GATE_ERROR
    line = _one_error_line(capsys)
    assert "is a model checkpoint, not a run directory" in line and f"--model {ckpt}" in line and "bonbench run" in line
    run = write_synthetic_run(tmp_path, np.full(20, 0.5), n=2, n_boot=20)
    baseline = tmp_path / "b.json"
    assert main(["gate", "--save-baseline", "--run", str(run), "--out", str(baseline)]) == GATE_PASS
    capsys.readouterr()
    assert main(["gate", "--baseline", str(baseline), "--run", str(ckpt)]) == GATE_ERROR
    assert "--task synthetic --model" in _one_error_line(capsys)
    from bonbench.apps.analysis.leaderboard import build_leaderboard
    from bonbench.core.errors import BonbenchError

    with pytest.raises(BonbenchError, match="is a model checkpoint, not a run directory"):
        build_leaderboard(tmp_path, base="synthetic/model", base_runs=[ckpt])


def test_a_model_folder_and_a_training_log_are_two_rules(tmp_path: Path) -> None:
    """The gate refuses any model folder as a run; the report plots only folders with a training log."""
    from bonbench.apps.analysis.baseline import is_model_folder
    from bonbench.apps.analysis.html import has_training_log

    model = tmp_path / "hf-model"  # a saved transformers model: no training log
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "gemma3_text"}))
    training = tmp_path / "checkpoints" / "unfinished"  # a training still running: log and settings, no export
    training.mkdir(parents=True)
    (training / "log.jsonl").write_text('{"step": 1}\n')
    (training / "train_config.json").write_text("{}")
    run = write_synthetic_run(tmp_path, np.full(20, 0.5), n=2, n_boot=20)
    assert [is_model_folder(p) for p in (model, training, run)] == [True, True, False]
    assert [has_training_log(p) for p in (model, training, run)] == [False, True, False]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_out_keeps_the_old_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_synthetic_run(tmp_path, np.full(20, 0.5), n=2, n_boot=20)
    folder = tmp_path / "baselines"
    folder.mkdir()
    old = folder / "b.json"
    old.write_text("old")
    folder.chmod(0o555)
    try:
        assert main(["gate", "--save-baseline", "--run", str(run), "--out", str(old)]) == GATE_ERROR
        assert "cannot write" in _one_error_line(capsys) and old.read_text() == "old"
    finally:
        folder.chmod(0o755)


def test_a_read_only_out_as_root_is_simulated(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Where tests run as root (chmod does not stop root), the write fails with EROFS as on a
    read-only mount: one line, exit 2, the old file kept."""
    import errno

    from bonbench.core import outputs

    run = write_synthetic_run(tmp_path, np.full(20, 0.5), n=2, n_boot=20)
    old = tmp_path / "b.json"
    old.write_text("old")

    def read_only(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(outputs.os, "open", read_only)
    assert main(["gate", "--save-baseline", "--run", str(run), "--out", str(old)]) == GATE_ERROR
    line = _one_error_line(capsys)
    assert "cannot write" in line and "Read-only file system" in line and old.read_text() == "old"


@pytest.mark.parametrize("content", [b"\xff\xfe{\"bonbench_baseline\": 1}", b"{\"bonbench_baseline\": 1, ", b"[1, 2]"])
def test_an_unreadable_baseline_is_one_line(tmp_path: Path, content: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_synthetic_run(tmp_path, np.full(20, 0.5), n=2, n_boot=20)
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    assert main(["gate", "--baseline", str(bad), "--run", str(run)]) == GATE_ERROR
    line = _one_error_line(capsys)
    assert str(bad) in line and "--save-baseline" in line
