"""A scored run's ``columns.npz`` (``bonbench.pipeline.run_columns``) and the recipe's use of it.

The pipeline writes every sample's counts, verdict and scores as columns when it scores a run; the
recipe reads them instead of the row files while the files are as they were, and the recipe is the
same either way, byte for byte in its JSON. A row appended since, a regrade or a second verifier
are each checked: the recipe reads the rows (or the columns still current), never a stale column."""

from __future__ import annotations

import json
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bonbench.apps.analysis.recipe import build_recipe
from bonbench.apps.analysis.recipe_write import recipe_json
from bonbench.apps.analysis.run_rows import grade_filter
from bonbench.apps.analysis.rundir import load_run
from bonbench.apps.analysis.synthetic import write_synthetic_run
from bonbench.apps.cli import main
from bonbench.apps.viewer.problems import summary_rows
from bonbench.apps.viewer.runs import find_runs
from bonbench.core.records import Sample, Score
from bonbench.core.store import Extent, RunStore
from bonbench.pipeline.row_key import file_sizes, is_current, row_files
from bonbench.pipeline.run_columns import COLUMNS, from_records, read_columns, write_columns

PROBLEMS = ("test/algebra/1.json", "test/algebra/2.json", "test/algebra/6.json")
BUDGETS = [130.0, 150.0, 190.0]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BONBENCH_CACHE", str(tmp_path / "cache"))


def math_run(root: Path, data_dir: Path, verifier: str = "logprob") -> Path:
    """A MATH run of n = 4 made by `bonbench run` (scripted backend with token counts, the MATH grader)."""
    boxed = ["2", "2", "5", "\\frac{1}{2}"]
    rows = [{"problem_id": pid, "sample_idx": i, "completion": f"So the answer is $\\boxed{{{a}}}$.",
             "n_tokens": 10 + 7 * i + 3 * j, "finish_reason": "stop", "logprob": -1.0 - i * (j + 1) / 3,
             "prompt_tokens": 100 + j} for j, pid in enumerate(PROBLEMS) for i, a in enumerate(boxed)]
    samples = root / "samples.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["run", "--task", "math", "--backend", "scripted", "--samples", str(samples), "--verifier", verifier,
                 "--metric", "pass@2", "--n", "4", "--n-boot", "20", "--data-dir", str(data_dir),
                 "--out", str(root / "results")]) == 0
    (found,) = [p.parent for p in (root / "results").rglob("metrics.json")]
    return found


def recipe_text(root: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The recipe's JSON, computed afresh (a cache of its own: no kept table)."""
    monkeypatch.setenv("BONBENCH_CACHE", str(cache))
    return json.dumps(recipe_json(build_recipe([root], BUDGETS, n_boot=50)), sort_keys=True)


def current(run_dir: Path) -> bool:
    run = load_run(run_dir)
    name, under = grade_filter(run)
    return read_columns(run_dir, name, under, [v for v in run.scored_with if v != "oracle"]) is not None


def seen(run_dir: Path) -> dict[str, Extent]:
    """What a store sees of the run's row files (math's grades, logprob's scores) read to their ends."""
    store = RunStore(run_dir)
    store.samples.read(), store.grades("math").read(), store.scores("logprob").read()
    return store.extents()


def test_the_pipeline_writes_columns_and_the_recipe_is_the_same_with_and_without(
        tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = math_run(tmp_path, data_dir)
    assert (run_dir / COLUMNS).is_file() and current(run_dir)
    run = load_run(run_dir)
    cols = read_columns(run_dir, "math", grade_filter(run)[1], ["logprob"])
    assert cols is not None and cols.ids == PROBLEMS and cols.grader == "math"
    assert cols.idx.tolist() == [0, 1, 2, 3] * 3 and cols.prompt_tokens.tolist() == [100.0] * 4 + [101.0] * 4 + [102.0] * 4
    assert cols.correct.tolist() == [1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0]
    assert [cols.answers[a] for a in cols.answer[:4]] == ["2", "2", "5", "\\frac{1}{2}"]
    assert cols.scores["logprob"][1].tolist() == [0.0] * 12  # logprob reads no tokens
    with_columns = recipe_text(tmp_path / "results", tmp_path / "c1", monkeypatch)
    # the columns are what the recipe read: changed columns (the files' sizes kept) change the recipe
    assert write_columns(run_dir, replace(cols, correct=np.ones_like(cols.correct)), seen(run_dir)) is not None
    assert recipe_text(tmp_path / "results", tmp_path / "c2", monkeypatch) != with_columns
    (run_dir / COLUMNS).unlink()
    assert recipe_text(tmp_path / "results", tmp_path / "c3", monkeypatch) == with_columns


def test_rows_appended_after_scoring_make_the_columns_stale(tmp_path: Path, data_dir: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = math_run(tmp_path, data_dir)
    store = RunStore(run_dir)
    # a later row of a key already scored: the ledger reads the latest row, so the cost changes
    store.scores("logprob").append([Score(PROBLEMS[0], 0, "logprob", -9.0, tokens=40, calls=1)])
    assert not current(run_dir)
    stale = recipe_text(tmp_path / "results", tmp_path / "c1", monkeypatch)
    (run_dir / COLUMNS).unlink()
    assert recipe_text(tmp_path / "results", tmp_path / "c2", monkeypatch) == stale
    store.samples.append([Sample(PROBLEMS[1], 4, "more", 31, "stop", prompt_tokens=101)])
    assert not current(run_dir)


def test_columns_are_written_only_when_the_files_hold_exactly_the_rows_scored(tmp_path: Path, data_dir: Path) -> None:
    run_dir = math_run(tmp_path, data_dir)
    store = RunStore(run_dir)
    samples, grades = store.samples.read(), store.grades("math").read()
    scores = {"logprob": store.scores("logprob").read()}
    cols = from_records(samples, grades, scores)
    assert cols is not None
    (run_dir / COLUMNS).unlink()
    store.samples.append([Sample(PROBLEMS[1], 4, "beyond n", 31, "stop", prompt_tokens=101)])  # a row not scored
    assert write_columns(run_dir, cols, store.extents()) is None and not (run_dir / COLUMNS).exists()
    # grades of some samples only, or of two grader settings: no columns
    assert from_records(samples, dict(list(grades.items())[:-1]), scores) is None
    regraded = {**grades, (PROBLEMS[0], 0): replace(grades[(PROBLEMS[0], 0)], grading_id="other")}
    assert from_records(samples, regraded, scores) is None


def test_a_second_verifier_keeps_the_first_ones_columns(tmp_path: Path, data_dir: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = math_run(tmp_path, data_dir)
    assert main(["score", str(run_dir), "--verifier", "oracle", "--metric", "pass@2", "--n-boot", "20",
                 "--data-dir", str(data_dir)]) == 0
    run = load_run(run_dir)
    under = grade_filter(run)[1]
    both = read_columns(run_dir, "math", under, ["logprob", "oracle"])
    assert both is not None and both.scores["oracle"][0].tolist() == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    assert current(run_dir)
    with_columns = recipe_text(tmp_path / "results", tmp_path / "c1", monkeypatch)
    (run_dir / COLUMNS).unlink()
    assert recipe_text(tmp_path / "results", tmp_path / "c2", monkeypatch) == with_columns


def test_synthetic_runs_write_the_columns_a_scoring_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's runs (``write_synthetic_run(columns=True)``): current columns, the same recipe."""
    root = tmp_path / "results"
    rng = np.random.default_rng(3)
    ids = [f"z{i}" for i in (3, 1, 2, 0)]  # not in id order: the columns are
    for seed, model in enumerate(("small", "big")):
        run_dir = write_synthetic_run(root, rng.random(4), n=4, model=model, seed=seed, problem_ids=ids,
                                      extra_scores={"v2": rng.random((4, 4))}, n_tokens=rng.integers(5, 60, size=(4, 4)),
                                      prompt_tokens=30, verifier_tokens=9, answers=True, n_boot=10, columns=True)
        assert current(run_dir)
    with_columns = recipe_text(root, tmp_path / "c1", monkeypatch)
    for f in root.rglob(COLUMNS):
        f.unlink()
    assert recipe_text(root, tmp_path / "c2", monkeypatch) == with_columns


def test_writing_the_columns_reads_no_row_file(tmp_path: Path, data_dir: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The columns' check that the files hold exactly the rows scored reads no row file: the store
    counted them as it read them (``RunStore.extents``)."""
    import builtins

    from bonbench.pipeline import stages

    run_dir = math_run(tmp_path, data_dir)
    (run_dir / COLUMNS).unlink()
    opened: list[str] = []
    real_open = builtins.open

    def spy(file: Any, *args: Any, **kwargs: Any) -> Any:
        if str(file).endswith(".jsonl") and Path(file).is_relative_to(run_dir):
            opened.append(Path(file).relative_to(run_dir).as_posix())
        return real_open(file, *args, **kwargs)

    def writing(*args: Any, **kwargs: Any) -> Any:
        before = len(opened)
        written = write_columns(*args, **kwargs)
        assert opened[before:] == [], "write_columns read a row file"
        return written

    monkeypatch.setattr(builtins, "open", spy)
    monkeypatch.setattr(stages, "write_columns", writing)
    assert main(["score", str(run_dir), "--metric", "pass@2", "--n-boot", "20", "--data-dir", str(data_dir)]) == 0
    monkeypatch.undo()
    assert (run_dir / COLUMNS).is_file() and current(run_dir)
    # one pass over each file (an imported run's samples are read once more, by its completeness check)
    assert sorted(opened) == ["grades/math.jsonl", "samples.jsonl", "samples.jsonl", "scores/logprob.jsonl"]


def test_columns_follow_what_the_store_saw_of_each_file(tmp_path: Path, data_dir: Path) -> None:
    """Torn, blank or foreign lines, or a file changed after the store read it: no columns."""
    run_dir = math_run(tmp_path, data_dir)
    store = RunStore(run_dir)
    cols = from_records(store.samples.read(), store.grades("math").read(), {"logprob": store.scores("logprob").read()})
    assert cols is not None and write_columns(run_dir, cols, store.extents()) is not None
    grades = run_dir / "grades" / "math.jsonl"
    whole = grades.read_bytes()
    for changed in (whole + b'{"problem_id": "x", "sample', whole + b"\n", whole.replace(b"\n", b"\n\n", 1)):
        (run_dir / COLUMNS).unlink(missing_ok=True)
        grades.write_bytes(changed)
        with pytest.warns(UserWarning, match="torn") if not changed.endswith(b"\n") else nullcontext():
            assert write_columns(run_dir, cols, seen(run_dir)) is None and not (run_dir / COLUMNS).exists()
    grades.write_bytes(whole)
    extents = seen(run_dir)
    assert write_columns(run_dir, cols, extents) is not None
    # another writer appends after the store read the file: its size is no longer the one seen
    RunStore(run_dir).scores("logprob").append([Score(PROBLEMS[0], 0, "logprob", -9.0)])
    assert write_columns(run_dir, cols, extents) is None


def test_problems_json_and_the_columns_go_stale_together(tmp_path: Path, data_dir: Path) -> None:
    """Both files are keyed by ``row_key.rows_key`` and checked by ``is_current``: whatever row file
    changes, the viewer's summary and the recipe's columns agree on whether they still hold."""
    run_dir = math_run(tmp_path, data_dir)
    summary = json.loads((run_dir / "problems.json").read_text())["key"]
    columns = np.load(run_dir / COLUMNS)
    assert json.loads(columns["meta"].tobytes())["key"] == summary  # one key, written the same way
    for name in ("samples.jsonl", "grades/math.jsonl", "scores/logprob.jsonl"):
        path = run_dir / name
        whole = path.read_bytes()
        (run,) = find_runs([tmp_path / "results"], keep=False)
        assert current(run_dir) and summary_rows(run) is not None
        path.write_bytes(whole + whole.splitlines(keepends=True)[0])  # one row more
        (run,) = find_runs([tmp_path / "results"], keep=False)
        assert not current(run_dir) and summary_rows(run) is None, name
        path.write_bytes(whole)
    # the key names its verifiers: the summary holds for exactly them, the columns for any of them
    assert is_current(summary, file_sizes(run_dir, row_files("math", ["logprob"])), "math", ["logprob"], exactly=True)
    assert is_current(summary, file_sizes(run_dir, row_files("math", [])), "math", [])
    assert not is_current(summary, file_sizes(run_dir, row_files("math", [])), "math", [], exactly=True)
    assert not is_current(summary, file_sizes(run_dir, row_files("other", [])), "other", [])
