"""``recipe_workers``: the tables of a cold recipe computed in child processes are the tables this
process computes, a child answers for each run it is given, and a run that fails fails in the
caller's words, as without workers."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bonbench.apps.analysis import recipe_workers
from bonbench.apps.analysis.recipe import build_recipe
from bonbench.apps.analysis.recipe_table import RunTable, TableSpec, compute_table, is_kept, kept_path
from bonbench.apps.analysis.recipe_write import recipe_json
from bonbench.apps.analysis.rundir import RunData, load_run
from bonbench.apps.cli import main
from bonbench.core.errors import BonbenchError
from tests.test_recipe import write_runs

SPEC = TableSpec(0.5, ("single", "maj", "bon"))


@pytest.fixture(autouse=True)
def recipe_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BONBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "recipe"


def same_table(a: RunTable, b: RunTable) -> bool:
    return (a.ids == b.ids and a.n == b.n and (a.prompt == b.prompt).all() and (a.gen == b.gen).all()
            and a.values.keys() == b.values.keys()
            and all(a.values[k][0] == b.values[k][0] and (a.values[k][1] == b.values[k][1]).all() for k in a.values))


def test_a_child_keeps_each_runs_table_and_answers(tmp_path: Path) -> None:
    runs = write_runs(tmp_path / "results")
    child = subprocess.run([sys.executable, "-m", "bonbench.apps.analysis.recipe_workers", json.dumps([0.5, list(SPEC.rules)])],
                           input=f"{runs['small']}\n{tmp_path / 'not-a-run'}\n{runs['big']}\n", capture_output=True,
                           text=True, timeout=300)
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["kept", "failed", "kept"]
    for path in runs.values():
        run = load_run(path)
        assert is_kept(run, SPEC)
        kept = recipe_workers.table_of(run, SPEC)  # read from the kept file
        assert same_table(kept, compute_table(run, SPEC))


def test_workers_share_the_runs_and_give_the_same_recipe(tmp_path: Path, recipe_cache: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "results"
    runs = write_runs(root)
    alone = recipe_json(build_recipe([root], [600.0, 1000.0], n_boot=50, workers=1))
    monkeypatch.setenv("BONBENCH_CACHE", str(tmp_path / "cache-workers"))
    real, mine = recipe_workers.table_of, []

    def after_the_child(run: RunData, spec: TableSpec) -> RunTable:
        # this process takes the first run and waits for the child to keep the other's table, so
        # the test shows a child computing, however slowly it starts
        mine.append(run.path)
        other = next(load_run(p) for p in runs.values() if p != run.path)
        deadline = time.monotonic() + 120
        while not is_kept(other, spec) and time.monotonic() < deadline:
            time.sleep(0.05)
        return real(run, spec)

    monkeypatch.setattr(recipe_workers, "table_of", after_the_child)
    spec = TableSpec(0.5, ("single", "maj", "bon"))
    recipe_workers.keep_tables([load_run(p) for p in runs.values()], spec, workers=2)
    assert len(mine) == 1, mine
    assert all(kept_path(load_run(p), spec).is_file() for p in runs.values())
    monkeypatch.setattr(recipe_workers, "table_of", real)
    assert recipe_json(build_recipe([root], [600.0, 1000.0], n_boot=50, workers=2)) == alone


def test_a_failing_run_fails_in_the_callers_words(tmp_path: Path) -> None:
    root = tmp_path / "results"
    write_runs(root, prompt_tokens=None)
    errors = []
    for workers in (1, 2):
        with pytest.raises(BonbenchError, match="prompt token counts") as err:
            build_recipe([root], [600.0], n_boot=20, workers=workers)
        errors.append(str(err.value))
    assert errors[0] == errors[1]


def test_workers_flag_takes_one_or_more(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "results"
    write_runs(root)
    assert main(["recipe", str(root), "--budget", "600", "--n-boot", "20", "--workers", "1"]) == 0
    capsys.readouterr()
    assert main(["recipe", str(root), "--budget", "600", "--workers", "0"]) != 0
    assert capsys.readouterr().err.strip() == "error: --workers must be >= 1 (got 0)"
