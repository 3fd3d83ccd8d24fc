"""A checkpoint's evaluations during training on its viewer page (issue 33, point 5; issue 32, point 6).

A hand-made checkpoint folder holds what ``bonbench train --eval-task`` writes: ``evals.jsonl`` (one
row per evaluated step: its run directory under ``CHECKPOINT/evals/``, metrics with CIs, paired
differences to step 0; the format of ``bonbench.apps.trainer.evaluate.Evaluation.record``), the run
directories themselves, the training log, and a manifest with the agreed ``keep_best`` and
``stopped`` keys. The page plots each metric by step with its band, marks the kept step, says why
training stopped, and links each evaluation's run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bonbench.apps.analysis.synthetic import write_synthetic_run
from bonbench.apps.viewer.checkpoints import find_checkpoints
from bonbench.apps.viewer.prompts import TaskTexts
from bonbench.apps.viewer.runs import find_runs
from bonbench.apps.viewer.site import Site


def checkpoint(root: Path, manifest: dict) -> tuple[Path, list[Path]]:
    ckpt = root / "checkpoints" / "math-grpo"
    ckpt.mkdir(parents=True)
    (ckpt / "train_config.json").write_text(json.dumps({"task": "synthetic", "objective": "grpo", "steps": 4}))
    (ckpt / "bonbench_manifest.json").write_text(json.dumps({"training_hash": "t9", **manifest}))
    log = [{"step": i, "reward": 0.2 * i, "kl_ref": 0.01 * i, "entropy": 1.0 - 0.1 * i} for i in range(1, 5)]
    (ckpt / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log))
    runs, rows = [], []
    for step, p in ((0, 0.3), (2, 0.6), (4, 0.5)):
        run = write_synthetic_run(ckpt / "evals", [p] * 6, n=4, model=f"math-grpo-step{step}", seed=step,
                                  metrics=("pass@1", "pass@4"), n_boot=20)
        doc = json.loads((run / "metrics.json").read_text())
        row = {"step": step, "run": str(run), "metrics": doc["metrics"]}
        if step:
            row["vs_step0"] = {"pass@1": {"diff": p - 0.3, "lo": p - 0.4, "hi": p - 0.2, "p": 0.01, "n_problems": 6}}
        runs.append(run)
        rows.append(row)
    # as Evaluation.record writes it (sorted keys, by step), then a torn line of a step being written
    (ckpt / "evals.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows) + '{"step": 6, "ru')
    return ckpt, runs


def test_the_checkpoint_page_plots_its_evaluations_marks_the_kept_step_and_links_the_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BONBENCH_CACHE", str(tmp_path / "cache"))
    manifest = {"keep_best": {"metric": "pass@1", "step": 2, "rule": "max"},
                "stopped": {"rule": "kl_ref>0.5", "step": 4, "reason": "kl_ref 0.7 > 0.5 <script>x</script>"}}
    ckpt, runs = checkpoint(tmp_path / "results", manifest)
    site = Site(find_runs([tmp_path / "results"], keep=False), TaskTexts(None),
                checkpoints=find_checkpoints([tmp_path / "results"], taken=[]))
    (cid,) = site.checkpoints
    page = site.render(f"checkpoints/{cid}/index.html") or ""
    assert re.findall(r'<h3 data-eval="([^"]+)">', page) == ["pass@1", "pass@4"]
    assert re.findall(r'<tr data-eval-step="(\d+)"', page) == ["0", "2", "4"]  # the torn step-6 line left out
    assert re.findall(r'<tr data-eval-step="(\d+)" class="pick" data-kept-row', page) == ["2"]
    assert "kept checkpoint (keep_best): metric pass@1, step 2, rule max" in page
    assert "reason kl_ref 0.7 &gt; 0.5 &lt;script&gt;x&lt;/script&gt;" in page and "<script>x" not in page
    by_id = {r.path.resolve(): r.id for r in site.runs.values()}
    linked = re.findall(r'<a href="\.\./\.\./runs/([^/]+)/index.html" data-eval-run>', page)
    assert linked == [by_id[r.resolve()] for r in runs]
    # each metric's line by step and its band, the kept step's vertical line beside it
    doc = json.loads((runs[1] / "metrics.json").read_text())
    value, (lo, hi) = doc["metrics"]["pass@1"]["value"], doc["metrics"]["pass@1"]["ci95"]
    assert f"<td>{value:.3f}</td><td>[{lo:.3f}, {hi:.3f}]</td><td>0.300 [0.200, 0.400]</td>" in page
    svg = page[page.index('<h3 data-eval="pass@1">'):page.index('<h3 data-eval="pass@4">')]
    lines = re.findall(r'<polyline points="([^"]*)"', svg)
    assert [len(p.split()) for p in lines] == [3, 2] and "<polygon" in svg and "kept: step 2" in svg
    # the training log's plots stay
    assert re.findall(r'<h3 data-log="([^"]+)">', page) == ["reward", "kl_ref", "entropy"]


def test_an_older_checkpoint_without_evaluations_or_manifest_keys(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BONBENCH_CACHE", str(tmp_path / "cache"))
    ckpt, _ = checkpoint(tmp_path / "results", {})
    (ckpt / "evals.jsonl").unlink()
    site = Site(find_runs([tmp_path / "results"], keep=False), TaskTexts(None),
                checkpoints=find_checkpoints([tmp_path / "results"], taken=[]))
    (cid,) = site.checkpoints
    page = site.render(f"checkpoints/{cid}/index.html") or ""
    assert "no evaluation during training" in page and "data-kept" not in page and "data-stopped" not in page
    assert re.findall(r'<h3 data-log="([^"]+)">', page) == ["reward", "kl_ref", "entropy"]
