"""Search runs among other runs (issue 34, point 3): `bonbench list strategies` and the strategy
column of `bonbench list runs`, search runs split with --shard and merged to the unsharded run,
--ray refused, and the leaderboard's row per (model, strategy). A tiny base policy
(``search_models``) and a tiny Math-Shepherd PRM (``prm_models``) on real MATH problems, as
``tests/test_search_run.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
from prm_models import build_math_shepherd
from search_models import build_policy

from bonbench.apps.cli import main


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("search-scale")
    return {"policy": build_policy(root / "policy"),
            "prm": build_math_shepherd(root / "math-shepherd-mistral-7b-prm")}


def run_args(models: dict[str, Path], data_dir: Path, out: Path, *extra: str, strategy: str | None = "beam",
             n: int = 4, limit: int = 2) -> list[str]:
    search = ["--strategy", strategy] if strategy is not None else []
    return ["run", "--task", "math", "-T", "fewshot=0", "--limit", str(limit), "--n", str(n), *search,
            "--verifier", f"prm:{models['prm']}", "--backend", "hf", "--model", str(models["policy"]),
            "--max-tokens", "16", "--dtype", "float32", "--data-dir", str(data_dir), "--out", str(out),
            "--n-boot", "20", *extra]


def one_error(code: int, err: str) -> str:
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code != 0 and len(errors) == 1 and "Traceback" not in err, err
    return errors[0]


def test_list_strategies_and_the_strategy_column_of_list_runs(models: dict[str, Path], data_dir: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "strategies"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed[:-1]] == ["beam", "best_of_n", "dvts", "particle_filtering"]
    beam = next(line for line in listed if line.startswith("beam "))
    assert "keep the n/width best partial solutions" in beam and "width=4 (int)" in beam and "lookahead=0 (int)" in beam
    assert "temperature=1.0 (float)" in next(line for line in listed if line.startswith("particle_filtering "))
    out = tmp_path / "out"
    assert main(run_args(models, data_dir, out, "-S", "width=2", "-S", "max_iterations=2")) == 0
    assert main(run_args(models, data_dir, out, "--metric", "bon@4", strategy=None)) == 0
    capsys.readouterr()
    assert main(["list", "runs", "--out", str(out)]) == 0
    columns = {line.split("  ")[1] for line in capsys.readouterr().out.splitlines()}
    assert columns == {"beam(agg=last, lookahead=0, max_iterations=2, width=2) n=4 T=1",
                       "sampling n=4 T=1"}, columns
