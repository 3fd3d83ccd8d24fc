"""`bonbench plot CHECKPOINT` with held-out evaluations (``plots_policy.evaluation_figure``): the report has the
evaluation figure beside the training curves, and what it draws is evals.jsonl: each metric's value and 95% band at the
evaluated steps, the kept step (--keep-best) ringed, the log's reward, KL and entropy beside them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

import trainer_plugin  # noqa: F401  (registers tiny_train)
from test_sampler_hf import build_tiny_model
from trainer_scripted_eval import SCRIPT, AtStep

from bonbench.apps.analysis import sections
from bonbench.apps.analysis.plots_policy import evaluation_figure, plot_evaluation_curves
from bonbench.apps.cli import main
from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.loop import train


def test_plot_draws_the_evaluations_and_the_kept_step(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    tiny = build_tiny_model(tmp_path / "model").path
    SCRIPT.clear()
    SCRIPT.update({0: [0] * 8, 1: [1] * 6 + [0] * 2, 2: [1] * 5 + [0] * 3, 3: [1] * 4 + [0] * 4})
    folder = train(TrainConfig(task="tiny_train", objective="test_rloo", name="t", model=tiny, steps=3, prompts_per_step=2,
                               group=2, out=str(tmp_path), dtype="float32", lr=5e-2, warmup=0, progress=False,
                               eval_task="scripted_eval", eval_every=1, eval_metrics=("pass@1", "pass@2"), eval_n=2,
                               keep_best="pass@1"), callbacks=[AtStep()])
    drawn: list[tuple[Any, ...]] = []
    real = plot_evaluation_curves

    def spy(*args: Any, **kw: Any) -> Path:
        drawn.append(args)
        return real(*args, **kw)

    monkeypatch.setattr(sections, "plot_evaluation_curves", spy)
    capsys.readouterr()
    assert main(["plot", str(folder)]) == 0
    report = Path(capsys.readouterr().out.strip().splitlines()[-1])
    png = report.parent / "evaluation_curves.png"
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "held-out evaluations during training" in report.read_text()
    [(evals, logs, kept, _)] = drawn
    fig = evaluation_figure(evals, logs, kept)
    rows = [json.loads(line) for line in (folder / "evals.jsonl").read_text().splitlines()]
    log = [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines()]
    panels = {ax.get_title(): ax for ax in fig.axes if ax.get_visible()}
    assert set(panels) == {"pass@1 (held out, 95% CI)", "pass@2 (held out, 95% CI)", "training reward",
                           "KL to the base (per sequence)", "entropy (per token)"}
    for name in ("pass@1", "pass@2"):
        ax = panels[f"{name} (held out, 95% CI)"]
        [line] = [ln for ln in ax.lines if ln.get_gid() == "value"]
        assert line.get_xydata().tolist() == [[r["step"], r["metrics"][name]["value"]] for r in rows]
        [band] = [c for c in ax.collections if c.get_gid() == "ci95"]
        edges = {tuple(v) for v in np.round(band.get_paths()[0].vertices, 12).tolist()}
        want = {(r["step"], round(end, 12)) for r in rows for end in r["metrics"][name]["ci95"]}
        assert want <= edges and {y for _, y in edges} <= {y for _, y in want}
    # the kept step: step 1 (+0.75 over step 0); later steps are lower
    assert kept == {"t": json.loads((folder / "bonbench_manifest.json").read_text())["keep_best"]} and kept["t"]["step"] == 1
    [ring] = [ln for ln in panels["pass@1 (held out, 95% CI)"].lines if ln.get_gid() == "kept"]
    assert ring.get_xydata().tolist() == [[1, rows[1]["metrics"]["pass@1"]["value"]]]
    assert not [ln for ln in panels["pass@2 (held out, 95% CI)"].lines if ln.get_gid() == "kept"]
    [reward] = panels["training reward"].lines
    assert reward.get_xydata().tolist() == [[r["step"], r["reward"]] for r in log]


def test_a_metric_without_an_interval_is_drawn_without_a_band() -> None:
    # IMDB's evaluations compute kl_bon@4 in closed form: its ci95 is [null, null] in evals.jsonl
    rows = [{"step": s, "metrics": {"mean": {"value": v, "ci95": [v - 0.1, v + 0.1]},
                                   "kl_bon@4": {"value": k, "ci95": [None, None], "closed_form": True}}}
            for s, v, k in ((0, 0.68, 0.59), (3, 0.74, 0.41))]
    fig = evaluation_figure({"imdb": rows}, {"imdb": [{"step": 0, "reward": 0.6}]}, {})
    panels = {ax.get_title(): ax for ax in fig.axes if ax.get_visible()}
    kl = panels["kl_bon@4 (held out, 95% CI)"]
    [line] = [ln for ln in kl.lines if ln.get_gid() == "value"]
    assert line.get_xydata().tolist() == [[0, 0.59], [3, 0.41]]
    assert not [c for c in kl.collections if c.get_gid() == "ci95"]
    assert [c for c in panels["mean (held out, 95% CI)"].collections if c.get_gid() == "ci95"]
