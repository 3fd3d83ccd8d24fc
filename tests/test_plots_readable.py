"""Figures people can read: base and checkpoint k-curves on shared axes (`bonbench plot RUN_A RUN_B`),
log axes labelled 1, 2, 4, ... (never 2x10^0), training curves with a marker per step, integer step
ticks and one legend for every panel, and reward-vs-KL labels that do not overlap."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure

from bonbench.apps.analysis.plotkit import place_labels, plain_log_axis, plain_symlog_axis
from bonbench.apps.analysis.plots_policy import training_figure
from bonbench.apps.analysis.synthetic import write_synthetic_run


def _labels(ax, axis: str = "x") -> list[str]:  # ax: a matplotlib Axes
    ax.figure.canvas.draw()
    ticks = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    minor = ax.get_xticklabels(minor=True)
    return [t.get_text() for t in ticks if t.get_text()] + [f"minor:{t.get_text()}" for t in minor if t.get_text()]


@pytest.mark.parametrize(("k_max", "expected"), [(16, ["1", "2", "4", "8", "16"]), (2, ["1", "2"]),
                                                 (3, ["1", "2", "4"])])
def test_log_k_axes_read_as_plain_numbers(k_max: int, expected: list[str]) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = Figure()
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    k = np.arange(1, k_max + 1)
    ax.plot(k, k / k_max)
    plain_log_axis(ax, k)
    assert _labels(ax) == expected  # no "2×10^0", no labelled minor ticks


def test_symlog_kl_axis_reads_as_plain_numbers() -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = Figure()
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.plot([0, 25], [0, 1])
    ax.set_xscale("symlog", linthresh=1.0)
    plain_symlog_axis(ax, 25)
    assert _labels(ax) == ["0", "0.5", "1", "2", "5", "10", "20"]


def test_training_curves_have_markers_integer_steps_and_one_legend() -> None:
    rng = np.random.default_rng(0)
    logs = {name: [{"step": s, "reward": float(rng.random()), "kl_ref": float(s), "entropy": 1.0} for s in range(8)]
            for name in ("ckpt-a", "ckpt-b", "ckpt-c")}
    fig = training_figure(logs, title="t")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    fig.canvas.draw()
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 3
    for ax in panels:
        assert all(line.get_marker() not in (None, "None", "") for line in ax.get_lines())
        steps = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        assert steps and all(s.lstrip("−-").isdigit() for s in steps), steps  # whole steps, no 2.5
        assert ax.get_legend() is None
    (legend,) = fig.legends  # one legend for all panels
    assert [t.get_text() for t in legend.get_texts()] == list(logs)


def test_reward_kl_labels_do_not_overlap() -> None:
    """Twenty points crowded into two clusters, as on the IMDB plane: every label finds a free spot."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = Figure(figsize=(6.8, 4.6), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    rng = np.random.default_rng(1)
    xs = np.r_[rng.normal(1.0, 0.15, 10), rng.normal(6.0, 0.4, 10)]
    ys = np.r_[rng.normal(0.7, 0.02, 10), rng.normal(0.9, 0.02, 10)]
    ax.plot(xs, ys, "o")
    ax.set_xlim(0, 8)
    ax.set_ylim(0.5, 1.05)
    labels = place_labels(fig, ax, [(x, y, f"checkpoint {i} BoN4", "k") for i, (x, y) in enumerate(zip(xs, ys, strict=True))])
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    from matplotlib.text import Text

    boxes = [Text.get_window_extent(a, renderer) for a in labels]  # the text itself, not its leader line
    frame = ax.get_window_extent(renderer)
    for i, a in enumerate(boxes):
        assert frame.x0 <= a.x0 and a.x1 <= frame.x1 and frame.y0 <= a.y0 and a.y1 <= frame.y1
        for b in boxes[i + 1:]:
            assert not a.overlaps(b), (a, b)


def test_plot_puts_base_and_checkpoint_k_curves_on_shared_axes(tmp_path: Path) -> None:
    from bonbench.apps.analysis.analysis_flags import main

    p = 0.1 + 0.6 * np.random.default_rng(2).random(60)
    base = write_synthetic_run(tmp_path / "r", p, n=8, model="org/base", seed=1, metrics=("pass@1", "bon@8"), n_boot=50)
    ckpt = write_synthetic_run(tmp_path / "r", np.clip(p + 0.1, 0, 1), n=8, model="org/ckpt", seed=2, metrics=("pass@1",),
                               n_boot=50)
    assert main(["plot", str(base), str(ckpt), "--out", str(tmp_path / "report")]) == 0
    html = (tmp_path / "report" / "report.html").read_text()
    assert "Comparison: synthetic, 2 runs on shared axes" in html
    assert (tmp_path / "report" / "compare_synthetic.png").is_file()
    (comp,) = json.loads((tmp_path / "report" / "report.json").read_text())["comparisons"]
    assert comp["runs"] == [str(base), str(ckpt)]
    # the table beside it has both runs' pass@k at k = 1, 2, 4, 8, equal to their curves.json
    curve = json.loads((ckpt / "curves.json").read_text())["pass"]
    assert f"{curve['value'][0]:.3f} [" in html and "org--ckpt T=1 n=8" in html


def test_leaderboard_draws_base_and_checkpoints_on_shared_axes(tmp_path: Path) -> None:
    from bonbench.apps.analysis.leaderboard import build_leaderboard
    from bonbench.apps.analysis.leaderboard_write import write_leaderboard

    p = 0.1 + 0.6 * np.random.default_rng(3).random(60)
    write_synthetic_run(tmp_path, p, n=8, task="t", model="org/base", seed=1, metrics=("pass@1",), n_boot=50)
    write_synthetic_run(tmp_path, np.clip(p + 0.1, 0, 1), n=8, task="t", model="org/ckpt", seed=2, metrics=("pass@1",),
                        n_boot=50)
    md, html = write_leaderboard(build_leaderboard(tmp_path, base="org/base", n_boot=100), tmp_path / "out")
    assert (tmp_path / "out" / "leaderboard_t_kcurves.png").is_file()
    assert 'alt="leaderboard_t_kcurves"' in html.read_text()
