"""scripts/leaderboard_runs.sh: every command it would run is one bonbench accepts.

A real run of the script takes hours; a wrong flag or objective option found after the first
checkpoint costs one. Here the script runs with ``DRY_RUN=1`` (it prints each bonbench command), and
each ``train`` command goes through the real CLI down to ``loop.prepare_training`` (objective, its options
and needs, the task's train split on the real data, the base model resolved; nothing loaded or
trained), each other command through bonbench's own argument parser.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bonbench.apps import cli
from bonbench.apps.trainer import loop
from bonbench.apps.trainer.setup import prepare_training

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "leaderboard_runs.sh"


def _commands(tmp_path: Path, data_dir: Path, *stages: str) -> list[list[str]]:
    env = {**os.environ, "DRY_RUN": "1", "OUT": str(tmp_path / "out"), "BONBENCH_DATA_DIR": str(data_dir)}
    out = subprocess.run(["bash", str(SCRIPT), *stages], capture_output=True, text=True, env=env, check=True)
    lines = [shlex.split(line) for line in out.stdout.splitlines() if line.startswith("bonbench ")]
    assert lines, out.stdout + out.stderr
    return [line[1:] for line in lines]


def test_every_train_command_reaches_prepare(tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []

    def fake_train(cfg: Any, on_step: Any = None) -> Path:
        seen.append(prepare_training(cfg))  # raises BonbenchError on anything the real run would refuse
        return tmp_path

    monkeypatch.setattr(loop, "train", fake_train)
    monkeypatch.setenv("BONBENCH_DATA_DIR", str(data_dir))  # the printed commands name no --data-dir
    commands = _commands(tmp_path, data_dir, "imdb", "math")
    trains = [c for c in commands if c[0] == "train"]
    for argv in trains:
        assert cli.main(argv) == 0, argv
    assert len(seen) == len(trains) == 14  # 4 IMDB + 5 math + the 5 math runs with --skip-zero-grad
    by_name = {p.cfg.name: p.cfg for p in seen}
    imdb = [c for c in by_name.values() if c.task == "imdb"]
    assert {c.objective for c in imdb} == {"vbon", "vbon_l", "kl_rl", "bonbon"}
    # the IMDB runs differ only in their objective (and its options / reference samples)
    shared = {(c.seed, c.steps, c.prompts_per_step, c.group, c.max_new_tokens, c.lr, c.lora_rank, c.temperature) for c in imdb}
    assert len(shared) == 1 and next(iter(shared))[0] == 1
    assert by_name["imdb-bonsft8"].objective_options == {"N": 8, "alpha": 1}
    math = [c for c in by_name.values() if c.task == "math"]
    runs = {("passk", 0), ("mean", 0), ("passk", 3), ("mean", 3), ("bon_rlb", 0)}
    assert {(c.objective, c.seed, c.skip_zero_grad) for c in math} == {r + (skip,) for r in runs for skip in (False, True)}
    assert all(c.name.endswith("-skip") == c.skip_zero_grad for c in math)
    assert all(c.objective_options.get("k", 4) == 4 for c in math)
    # the math runs share one budget and one prompt (task arguments) and differ in objective and seed
    assert len({(c.steps, c.prompts_per_step, c.group, c.max_new_tokens, c.lr, tuple(sorted(c.task_args.items())))
                for c in math}) == 1


def test_the_imdb_sweep_varies_one_setting_per_method(tmp_path: Path, data_dir: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(loop, "train", lambda cfg, on_step=None: seen.append(prepare_training(cfg)) or tmp_path)
    monkeypatch.setenv("BONBENCH_DATA_DIR", str(data_dir))
    base = {c.name: c for c in _prepared(tmp_path, data_dir, seen, "imdb")}
    seen.clear()
    sweep = {c.name: c for c in _prepared(tmp_path, data_dir, seen, "imdb-sweep")}
    assert {n: (c.objective, c.objective_options) for n, c in sweep.items()} == {
        # a changed default (issue 24) is recorded with the value the run trains with
        "imdb-vbon2": ("vbon", {"N": 2, "ties": "uniform"}), "imdb-vbon4": ("vbon", {"N": 4, "ties": "uniform"}),
        "imdb-bonsft2": ("bonbon", {"N": 2, "alpha": 1}), "imdb-bonsft4": ("bonbon", {"N": 4, "alpha": 1}),
        "imdb-klrl-b0.03": ("kl_rl", {"beta": 0.03}), "imdb-klrl-b0.3": ("kl_rl", {"beta": 0.3})}
    # each sweep point is its method's leaderboard run with only N or beta changed (same budget, seed, G)
    twin = {"vbon": "imdb-vbon8", "bonbon": "imdb-bonsft8", "kl_rl": "imdb-klrl-b0.1"}
    for c in sweep.values():
        b = base[twin[c.objective]]
        assert c == dataclasses.replace(b, name=c.name, objective_options=c.objective_options), c.name
    evals = [c for c in _commands(tmp_path, data_dir, "imdb-sweep") if c[0] == "run"]
    assert [e[e.index("--model") + 1].rsplit("/", 1)[1] for e in evals] == list(sweep)


def _prepared(tmp_path: Path, data_dir: Path, seen: list[Any], *stages: str) -> list[Any]:
    for argv in _commands(tmp_path, data_dir, *stages):
        if argv[0] == "train":
            assert cli.main(argv) == 0, argv
    return [p.cfg for p in seen]


@pytest.mark.parametrize("stage,message", [("vbon1", "N must be an integer >= 2"), ("bonsftx", "N must be an integer"),
                                           ("klrl-bfast", "beta must be a number")])
def test_a_bad_sweep_setting_is_a_one_line_error(tmp_path: Path, stage: str, message: str) -> None:
    out = subprocess.run(["bash", str(SCRIPT), stage], capture_output=True, text=True,
                         env={**os.environ, "DRY_RUN": "1", "OUT": str(tmp_path)})
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr == f"error: {stage}: {message}" + out.stderr.split(message, 1)[1]
    assert out.stderr.count("\n") == 1


def test_every_other_command_parses(tmp_path: Path, data_dir: Path) -> None:
    commands = [c for c in _commands(tmp_path, data_dir, "imdb", "math") if c[0] != "train"]
    parser = cli.build_parser()
    for argv in commands:
        parser.parse_args(argv)  # SystemExit on an unknown flag
    evals = [c for c in commands if c[0] == "run" and "--model" in c and "imdb" in c]
    assert len(evals) == 4
    for argv in evals:  # checkpoints are compared with the base's own run, on the base's KL plane
        assert argv[argv.index("--ref-model") + 1] == "gemma-3-270m"
        assert argv[argv.index("--ref-run") + 1].endswith("BASE_RUN")
        assert "kl" in argv[argv.index("--metric") + 1].split(",")


def test_an_unknown_stage_is_a_one_line_error(tmp_path: Path) -> None:
    out = subprocess.run(["bash", str(SCRIPT), "nope"], capture_output=True, text=True,
                         env={**os.environ, "DRY_RUN": "1", "OUT": str(tmp_path)})
    assert out.returncode == 1
    assert out.stderr.startswith("error: unknown stage nope")
