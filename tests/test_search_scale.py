"""Search runs among other runs (issue 34, point 3): `bonbench list strategies` and the strategy
column of `bonbench list runs`, search runs split with --shard and merged to the unsharded run,
--ray refused, and the leaderboard's row per (model, strategy). A tiny base policy
(``search_models``) and a tiny Math-Shepherd PRM (``prm_models``) on real MATH problems, as
``tests/test_search_run.py``."""

from __future__ import annotations

import json
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


@pytest.fixture(scope="module")
def mixed(models: dict[str, Path], data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One model's sampling run, then its beam search (the latest run of the model and task)."""
    out = tmp_path_factory.mktemp("mixed") / "out"
    assert main(run_args(models, data_dir, out, "--metric", "pass@1,bon@4", strategy=None)) == 0
    (sampling,) = [c.parent for c in out.glob("runs/math/*/*/config.json")]
    assert main(run_args(models, data_dir, out, "-S", "width=2", "-S", "max_iterations=2")) == 0
    (search,) = [c.parent for c in out.glob("runs/math/*/*/config.json") if c.parent != sampling]
    return {"out": out, "sampling": sampling, "search": search}


def test_list_strategies_and_the_strategy_column_of_list_runs(mixed: dict[str, Path],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "strategies"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed[:-1]] == ["beam", "best_of_n", "dvts", "particle_filtering"]
    beam = next(line for line in listed if line.startswith("beam "))
    assert "keep the n/width best partial solutions" in beam and "width=4 (int)" in beam and "lookahead=0 (int)" in beam
    assert "temperature=1.0 (float)" in next(line for line in listed if line.startswith("particle_filtering "))
    assert main(["list", "runs", "--out", str(mixed["out"])]) == 0
    columns = dict(line.split("  ", 1) for line in capsys.readouterr().out.splitlines())
    assert columns == {str(mixed["search"]): "beam(agg=last, lookahead=0, max_iterations=2, width=2) n=4 T=1",
                       str(mixed["sampling"]): "sampling n=4 T=1"}, columns


def test_the_leaderboard_gives_a_search_its_own_row(mixed: dict[str, Path], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from bonbench.apps.analysis.compute_axis import tokens_per_problem
    from bonbench.apps.analysis.leaderboard import build_leaderboard
    from bonbench.apps.analysis.rundir import load_run
    from bonbench.pipeline.ledger import compute_ledger

    board = build_leaderboard(mixed["out"], base="policy", n_boot=50)
    search_row = "policy · beam(agg=last, lookahead=0, max_iterations=2, width=2)"
    assert board.models == ["policy", search_row]  # the later search did not replace the model's sampling row
    runs = {s.model: s.run.path for s in board.selections}
    assert runs == {"policy": mixed["sampling"], search_row: mixed["search"]}
    for row, run_dir in runs.items():  # each row's cells are its own run's metrics
        stored = json.loads((run_dir / "metrics.json").read_text())["metrics"]
        cells = {m: c.value for (r, _, m), c in board.cells.items() if r == row}
        assert cells == {m: v["value"] for m, v in stored.items() if ("math", m) in board.columns}
    assert {m for (r, _, m) in board.cells if r == search_row} == {"pass@4", "bon@4", "maj@4", "wmaj@4"}  # k = N only
    assert ("policy", "math", "pass@1") in board.cells
    assert board.cells[(search_row, "math", "bon@4")].diff is not None  # compared with the base's sampling row
    for row, run_dir in runs.items():  # the compute from the ledger: policy prompt + generated + verifier tokens
        run = load_run(run_dir)
        total = compute_ledger(run_dir).total()
        spent = total.prompt_tokens + total.generated_tokens + sum(v.tokens for v in total.verifiers
                                                                   if v.verifier in ("search", run.meta["verifier"]))
        assert board.compute[(row, "math")] == tokens_per_problem(run, run.meta["verifier"]) == spent / 2 > 0
    out = tmp_path / "board"
    assert main(["leaderboard", str(mixed["out"]), "--base", "policy", "--out", str(out), "--n-boot", "50"]) == 0
    md = (out / "leaderboard.md").read_text()
    assert "| math tokens/problem |" in md and f"| {search_row} |" in md
    doc = json.loads((out / "leaderboard.json").read_text())
    assert {r["model"]: r["strategy"] for r in doc["runs"]} == {"policy": "sampling",
                                                                search_row: search_row.split(" · ")[1]}
    capsys.readouterr()
    line = one_error(main(["leaderboard", str(mixed["out"]), "--base", "policy", "--base-run", str(mixed["search"]),
                           "--out", str(out)]), capsys.readouterr().err)
    assert "is a search run" in line and "pin a sampling run of the base" in line


def run_dir(out: Path) -> Path:
    (cfg,) = out.glob("runs/math/*/*/config.json")
    return cfg.parent


def rows(path: Path) -> list[dict]:  # type: ignore[type-arg]  # JSON rows
    return sorted((json.loads(line) for line in path.read_text().splitlines()),
                  key=lambda r: (r["problem_id"], r["sample_idx"]))


TIMES = ("wall_s", "model_s", "overhead_s")  # the ledger's seconds: the only thing a sharded search may change


def test_shards_of_a_search_merge_to_the_unsharded_run(models: dict[str, Path], data_dir: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    import shlex

    from bonbench.pipeline.ledger import compute_ledger

    search = ["-S", "width=2", "-S", "max_iterations=2", "--seeds", "2"]
    whole, sharded = tmp_path / "whole", tmp_path / "sharded"
    assert main(run_args(models, data_dir, whole, *search, limit=3)) == 0
    assert main(run_args(models, data_dir, sharded, *search, "--shard", "1/2", limit=3)) == 0
    root = next(sharded.glob("runs/math/*/*"))
    assert root.name == run_dir(whole).name and (root / "shards" / "1-of-2" / "search" / "trees.jsonl").is_file()
    capsys.readouterr()
    # shard 2 not run yet: the merge names the command that runs it, search settings included; run as written
    line = one_error(main(["merge", str(root), "--data-dir", str(data_dir)]), capsys.readouterr().err)
    command = line.split("`")[1]
    assert "--strategy beam -S agg=last -S lookahead=0 -S max_iterations=2 -S width=2 --seeds 2" in command
    assert command.endswith("--shard 2/2")
    assert main([*shlex.split(command)[1:], "--data-dir", str(data_dir), "--n-boot", "20"]) == 0
    assert main(["merge", str(root), "--data-dir", str(data_dir), "--n-boot", "20"]) == 0
    one = run_dir(whole)
    # the same decisions and samples: every sample, tree (nodes, kept or pruned, candidates) and ledger count
    assert rows(root / "samples.jsonl") == rows(one / "samples.jsonl") and len(rows(one / "samples.jsonl")) == 3 * 8
    assert rows(root / "search" / "trees.jsonl") == rows(one / "search" / "trees.jsonl")
    untimed = [[{k: v for k, v in r["cost"].items() if k not in TIMES} for r in rows(d / "search" / "ledger.jsonl")]
               for d in (root, one)]
    assert untimed[0] == untimed[1] and len(untimed[0]) == 6
    totals = [compute_ledger(d).total() for d in (root, one)]
    assert [(t.prompt_tokens, t.generated_tokens, t.verifiers) for t in totals][0] == \
        [(t.prompt_tokens, t.generated_tokens, t.verifiers) for t in totals][1]
    metrics = [json.loads((d / "metrics.json").read_text()) for d in (root, one)]
    assert metrics[0]["per_problem"] == metrics[1]["per_problem"] and metrics[0]["search"] == metrics[1]["search"]
    assert {k: v["value"] for k, v in metrics[0]["metrics"].items()} == {k: v["value"] for k, v in metrics[1]["metrics"].items()}
    assert metrics[0]["shards"]["merged"] == ["1/2", "2/2"]
    assert main(["merge", str(root), "--data-dir", str(data_dir), "--n-boot", "20"]) == 0  # again: nothing appended
    assert rows(root / "search" / "trees.jsonl") == rows(one / "search" / "trees.jsonl")


def test_shards_of_other_strategy_options_are_not_merged(models: dict[str, Path], data_dir: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(run_args(models, data_dir, out, "-S", "width=2", "-S", "max_iterations=1", "--shard", "1/2")) == 0
    assert main(run_args(models, data_dir, out, "-S", "width=4", "-S", "max_iterations=1", "--shard", "2/2")) == 0
    (narrow,) = [d for d in out.glob("runs/math/*/*") if (d / "shards" / "1-of-2").is_dir()]
    (wide,) = [d for d in out.glob("runs/math/*/*") if (d / "shards" / "2-of-2").is_dir()]
    (wide / "shards" / "2-of-2").rename(narrow / "shards" / "2-of-2")  # a shard moved into the wrong run
    capsys.readouterr()
    line = one_error(main(["merge", str(narrow), "--data-dir", str(data_dir)]), capsys.readouterr().err)
    assert "shards 1/2 and 2/2 are searches of different -S" in line and "'width': 2" in line and "'width': 4" in line
    assert not (narrow / "config.json").exists()


def test_shards_of_other_seeds_are_not_merged(models: dict[str, Path], data_dir: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"  # --seeds is not hashed (more seeds add repetitions): both shards land in one run
    assert main(run_args(models, data_dir, out, "-S", "width=2", "-S", "max_iterations=1", "--shard", "1/2")) == 0
    assert main(run_args(models, data_dir, out, "-S", "width=2", "-S", "max_iterations=1", "--seeds", "2",
                         "--shard", "2/2")) == 0
    (root,) = out.glob("runs/math/*/*")
    capsys.readouterr()
    line = one_error(main(["merge", str(root), "--data-dir", str(data_dir)]), capsys.readouterr().err)
    assert "shards 1/2 and 2/2 were run with different --seeds (1 vs 2)" in line


def test_a_search_on_ray_is_refused_naming_shards(models: dict[str, Path], data_dir: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    line = one_error(main(run_args(models, data_dir, tmp_path / "out", "--ray")), capsys.readouterr().err)
    assert "--strategy does not run on Ray" in line and "--shard i/n" in line and "bonbench merge" in line
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("runs/**/samples.jsonl"))


def test_the_compute_axis_labels_a_search_as_the_leaderboard_does(mixed: dict[str, Path]) -> None:
    """``bonbench plot``'s accuracy-against-tokens points are labelled by ``core.config.strategy_label``,
    every option included (agg too), as `list runs` and the leaderboard label them."""
    from bonbench.apps.analysis.compute_axis import compute_point
    from bonbench.apps.analysis.rundir import load_run

    search, sampling = compute_point(load_run(mixed["search"])), compute_point(load_run(mixed["sampling"]))
    assert search is not None and sampling is not None
    assert search.label == "beam(agg=last, lookahead=0, max_iterations=2, width=2) N=4 · policy", search.label
    assert search.strategy == "beam" and not search.curve
    assert sampling.label == "sampling N=4 · policy" and sampling.strategy == "sampling" and sampling.curve


def test_a_base_with_only_search_runs_is_told_to_sample_it(mixed: dict[str, Path], tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """`bonbench leaderboard --base M` where M has only search runs: one line that says so, names its
    rows and the fix (a sampling run of M, or another base), not that M has no runs."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(mixed["search"], out / mixed["search"].relative_to(mixed["out"]))
    code = main(["leaderboard", str(out), "--base", "policy"])
    err = capsys.readouterr().err
    assert one_error(code, err) == (
        f"error: --base 'policy' has only search runs under {out} (policy · beam(agg=last, lookahead=0, "
        "max_iterations=2, width=2)), and the base row is a model's sampling runs: run it without --strategy "
        "(`bonbench run --model policy ...`) or pick another --base"), err
