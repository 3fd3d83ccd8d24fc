"""The leaderboard on a synthetic results tree: significant changes marked, null ones not, the run
choice rule, problem-set intersections, and the markdown/HTML output."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bonbench.apps.analysis.leaderboard import DOWN, UP, build_leaderboard
from bonbench.apps.analysis.leaderboard_write import render_markdown, write_leaderboard
from bonbench.apps.analysis.synthetic import write_synthetic_run
from bonbench.core.errors import BonbenchError

P = 300


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("results")
    p = 0.15 + 0.7 * np.random.default_rng(0).beta(0.8, 1.0, size=P)
    ids = [f"t/{i:03d}" for i in range(P)]

    def run(model: str, probs: np.ndarray, seed: int, **kw: object) -> Path:
        kw.setdefault("problem_ids", ids)
        return write_synthetic_run(root, probs, n=4, task="t", model=model, seed=seed, metrics=("pass@1", "pass@4"),
                                   n_boot=100, **kw)

    run("org/base", p, 1)
    run("org/better", p + 0.10, 2)
    run("org/worse", p - 0.10, 3)
    run("org/same", p, 4, timestamp="2025-01-01T00:00:00Z")
    # a newer run of org/same at another temperature: "latest" without --base, ignored with it
    run("org/same", p + 0.10, 5, temperature=0.7, timestamp="2025-06-01T00:00:00Z")
    # scored on the first 200 problems only: the difference is taken over the 200 shared ids
    run("org/subset", p[:200], 6, problem_ids=ids[:200])
    return root


def _cell(board, model: str, metric: str = "pass@1"):
    return board.cells[(model, "t", metric)]


def test_significant_changes_are_marked_and_null_ones_are_not(results: Path) -> None:
    board = build_leaderboard(results, base="org/base", n_boot=1000)
    assert board.models[0] == "org--base"
    better, worse, same = (_cell(board, m) for m in ("org--better", "org--worse", "org--same"))
    assert better.marker == UP and better.diff == pytest.approx(0.10, abs=0.04)
    assert worse.marker == DOWN and worse.diff == pytest.approx(-0.10, abs=0.04)
    assert same.marker == "" and same.diff_lo < 0 < same.diff_hi
    assert better.n_shared == worse.n_shared == same.n_shared == P and better.paired
    assert _cell(board, "org--subset").n_shared == 200
    assert _cell(board, "org--base").diff is None


def test_run_choice_rule_prefers_the_base_settings_else_latest(results: Path) -> None:
    with_base = build_leaderboard(results, base="org/base", n_boot=200)
    sel = {s.model: s for s in with_base.selections}
    assert sel["org--same"].run.temperature == 1.0
    assert sel["org--same"].rule == "latest run with the base run's settings, n and problems"
    assert sel["org--same"].n_candidates == 2
    without = build_leaderboard(results)
    sel = {s.model: s for s in without.selections}
    assert sel["org--same"].run.temperature == 0.7 and sel["org--same"].rule == "latest run"
    assert all(c.diff is None for c in without.cells.values())


def test_markdown_and_html_content(results: Path, tmp_path: Path) -> None:
    board = build_leaderboard(results, base="org/base", metrics=["pass@1"], n_boot=500)
    md_text = render_markdown(board)
    lines = {line.split("|")[1].strip(): line for line in md_text.splitlines() if line.startswith("| org--")}
    assert set(lines) == {"org--base", "org--better", "org--worse", "org--same", "org--subset"}
    assert UP in lines["org--better"] and DOWN in lines["org--worse"]
    assert UP not in lines["org--same"] and DOWN not in lines["org--same"]
    assert "(base)" in lines["org--base"] and "n=300" in lines["org--better"] and "n=200" in lines["org--subset"]
    assert "| model | t pass@1 |" in md_text and "pass@4" not in md_text.split("## Runs used")[0]
    assert "## Runs used" in md_text and "1 other run(s) ignored" in md_text
    md, html = write_leaderboard(board, tmp_path)
    assert md.read_text() == md_text
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("<tr>") == 1 + 5
    assert 'class="up"' in page and 'class="down"' in page and "org--better" in page
    assert (tmp_path / "leaderboard.json").is_file()


def test_cli_and_user_errors(results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bonbench.apps.analysis.analysis_flags import main

    assert main(["leaderboard", str(results), "--base", "org/base", "--metric", "pass@4", "--out", str(tmp_path),
                 "--n-boot", "200"]) == 0
    assert "t pass@4" in (tmp_path / "leaderboard.md").read_text()
    capsys.readouterr()
    assert main(["leaderboard", str(results), "--base", "org/nobody"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --base 'org/nobody' has no runs") and "\n" not in err
    with pytest.raises(BonbenchError, match="no run has metric"):
        build_leaderboard(results, metrics=["maj@64"])
    with pytest.raises(BonbenchError, match="no scored runs"):
        build_leaderboard(results, tasks=["nope"])


def test_base_run_pins_the_row_every_checkpoint_is_paired_against(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A base evaluated twice with the same settings (two seeds): no rule can tell which one the
    checkpoints are to be paired with, so the leaderboard refuses, listing both; --base-run names it."""
    p = 0.2 + 0.5 * np.random.default_rng(1).random(P)

    def run(model: str, probs: np.ndarray, seed: int, when: str) -> Path:
        return write_synthetic_run(tmp_path, probs, n=4, task="t", model=model, seed=seed, metrics=("pass@1",),
                                   n_boot=100, timestamp=when)

    first = run("org/base", p, 1, "2025-01-01T00:00:00Z")
    second = run("org/base", p + 0.2, 2, "2025-02-01T00:00:00Z")  # newer, and 0.2 better
    ckpt = run("org/ckpt", p + 0.1, 3, "2025-03-01T00:00:00Z")
    with pytest.raises(BonbenchError, match="has 2 runs of task t and 2 match 1 other model") as err:
        build_leaderboard(tmp_path, base="org/base", n_boot=300)
    assert str(first) in str(err.value) and str(second) in str(err.value) and "--base-run RUN_DIR" in str(err.value)
    assert "seed=1" in str(err.value) and "\n" not in str(err.value)
    pinned = build_leaderboard(tmp_path, base="org/base", n_boot=300, base_runs=[first])
    assert _cell(pinned, "org--ckpt").marker == UP and _cell(pinned, "org--ckpt").diff == pytest.approx(0.1, abs=0.04)
    sel = {s.model: s for s in pinned.selections}
    assert sel["org--base"].run.path == first and sel["org--base"].rule == "base: the run --base-run names"
    assert _cell(build_leaderboard(tmp_path, base="org/base", n_boot=300, base_runs=[second]), "org--ckpt").marker == DOWN
    with pytest.raises(BonbenchError, match="is a run of org--ckpt, not of the base org--base"):
        build_leaderboard(tmp_path, base="org/base", base_runs=[ckpt])
    with pytest.raises(BonbenchError, match="add --base MODEL"):
        build_leaderboard(tmp_path, base_runs=[first])
    with pytest.raises(BonbenchError, match="two runs for task t"):
        build_leaderboard(tmp_path, base="org/base", base_runs=[first, first])
    from bonbench.apps.analysis.analysis_flags import main

    assert main(["leaderboard", str(tmp_path), "--base", "org/base", "--base-run", str(first), "--n-boot", "200",
                 "--out", str(tmp_path / "out")]) == 0
    assert "base: the run --base-run names" in (tmp_path / "out" / "leaderboard.md").read_text()
    capsys.readouterr()
    assert main(["leaderboard", str(tmp_path), "--base", "org/base", "--n-boot", "200", "--out", str(tmp_path / "o2")]) == 1
    err_lines = capsys.readouterr().err.strip().splitlines()
    assert len(err_lines) == 1 and err_lines[0].startswith("error: the base org--base has 2 runs")


def test_the_base_run_is_the_one_matching_the_checkpoints_not_the_latest(tmp_path: Path) -> None:
    """The base scored on 200 problems at n = 4 (as the checkpoints) and, later, on all 300 at n = 8:
    the checkpoints are paired with the first, however recently the second was scored; the choice
    follows the checkpoints' problems when they move to the second setting."""
    p = 0.2 + 0.5 * np.random.default_rng(2).random(P)
    ids = [f"t/{i:03d}" for i in range(P)]

    def run(model: str, probs: np.ndarray, seed: int, n: int, when: str, count: int) -> Path:
        return write_synthetic_run(tmp_path, probs[:count], n=n, task="t", model=model, seed=seed, metrics=("pass@1",),
                                   n_boot=100, timestamp=when, problem_ids=ids[:count])

    small = run("org/base", p, 1, 4, "2025-01-01T00:00:00Z", 200)
    run("org/base", p, 2, 8, "2025-05-01T00:00:00Z", 300)  # newer: "latest" would take it
    run("org/ckpt-a", p + 0.1, 3, 4, "2025-02-01T00:00:00Z", 200)
    run("org/ckpt-b", p - 0.1, 4, 4, "2025-02-01T00:00:00Z", 200)
    board = build_leaderboard(tmp_path, base="org/base", n_boot=200)
    sel = {s.model: s for s in board.selections}
    assert sel["org--base"].run.path == small and sel["org--base"].rule.startswith("base: the run whose settings")
    assert sel["org--ckpt-a"].rule == "latest run with the base run's settings, n and problems"
    assert _cell(board, "org--ckpt-a").n_shared == 200 and _cell(board, "org--ckpt-a").marker == UP


def _add_kl(run: Path, kl: np.ndarray) -> None:
    """Give a synthetic run a per-problem ``kl`` and a closed-form ``kl_bon@4`` (as bonbench.pipeline.compare writes them)."""
    import json

    doc = json.loads((run / "metrics.json").read_text())
    ids = sorted(doc["per_problem"]["pass@1"])
    doc["metrics"]["kl"] = {"value": float(kl.mean()), "ci95": [float(kl.mean()) - 0.05, float(kl.mean()) + 0.05],
                            "n_problems": len(ids), "direction": "lower"}
    doc["per_problem"]["kl"] = dict(zip(ids, map(float, kl), strict=True))
    doc["metrics"]["kl_bon@4"] = {"value": 0.636, "ci95": [None, None], "n_problems": len(ids), "closed_form": True}
    doc["per_problem"]["kl_bon@4"] = {i: 0.636 for i in ids}
    (run / "metrics.json").write_text(json.dumps(doc))


def test_kl_columns_lower_is_better_closed_form_without_interval(tmp_path: Path) -> None:
    p = np.full(P, 0.5)
    rng = np.random.default_rng(4)
    base = write_synthetic_run(tmp_path, p, n=4, task="t", model="org/base", seed=1, metrics=("pass@1",), n_boot=50)
    ckpt = write_synthetic_run(tmp_path, p, n=4, task="t", model="org/ckpt", seed=2, metrics=("pass@1",), n_boot=50)
    _add_kl(base, rng.normal(0.0, 0.05, P))   # the base against itself: scattered around 0, some negative
    _add_kl(ckpt, rng.gamma(2.0, 1.0, P))     # a trained checkpoint: 2 nats away
    board = build_leaderboard(tmp_path, base="org/base", n_boot=200)
    kl, kl_bon = _cell(board, "org--ckpt", "kl"), _cell(board, "org--ckpt", "kl_bon@4")
    assert kl.marker == UP and kl.diff == pytest.approx(2.0, abs=0.3)
    assert kl_bon.diff is None and not np.isfinite(kl_bon.lo)
    md_text = render_markdown(board)
    row = next(line for line in md_text.splitlines() if line.startswith("| org--ckpt"))
    assert "| 0.636 |" in row  # no "±", no Δ
    assert "can fall below 0" in md_text and "Lower is better for kl, kl_bon@4" in md_text
    from bonbench.apps.analysis.leaderboard_write import render_html

    page = render_html(board)
    kl_td = next(td for td in page.split("<td") if "Δ +" in td and UP in td)
    assert kl_td.startswith(' class="down"')  # further from the reference: red
