"""The README's commands work as written.

Every ``bonbench`` command in the README's fenced code blocks must parse with bonbench's own parser
(a misspelt flag or subcommand fails here), every repository path the README names as an input
must exist, and the commands that can run on this machine without a hub or a GPU run for real
(the slow test), against the main job's run directory that the README's set-up command makes.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bonbench.apps.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
BONBENCH = Path(sys.executable).with_name("bonbench")

# What an elided command ("... train --task imdb --objective mean ...") leaves out that its parser requires.
ELIDED_REQUIRED = {"train": ["--name", "elided"]}

# Placeholders the README writes in angle brackets, and what stands in for them when parsing.
PLACEHOLDER = re.compile(r"<[^<>]+>")


def readme_commands(text: str | None = None) -> list[str]:
    """Every command line of the README's fenced code blocks (continuations joined, comments cut)."""
    text = README.read_text(encoding="utf-8") if text is None else text
    commands: list[str] = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if " #" in line:  # a trailing comment; no README command has a quoted " #"
                line = line[: line.index(" #")].rstrip()
            commands.append(line)
    return commands


def bonbench_argvs(commands: list[str]) -> list[list[str]]:
    """The argv of each bonbench invocation, placeholders filled, `a|b|c` alternatives expanded."""
    argvs: list[list[str]] = []
    for command in commands:
        words = shlex.split(PLACEHOLDER.sub("PLACEHOLDER", command))
        if not words:
            continue
        if words[0] in ("bonbench", ".venv/bin/bonbench"):
            rest = words[1:]
        elif (words[:2] == ["-m", "bonbench"]
              or "-m" in words and words[words.index("-m") + 1 : words.index("-m") + 2] == ["bonbench"]):
            rest = words[words.index("-m") + 2 :]
        else:
            continue
        if "..." in rest:  # an elided tail ("train --objective mean ..."): fill the required flags
            rest = rest[: rest.index("...")] + ELIDED_REQUIRED.get(rest[0], [])
        alternatives = [i for i, w in enumerate(rest) if "|" in w]
        if alternatives:
            i = alternatives[0]
            for choice in rest[i].split("|"):
                argvs.append(rest[:i] + [choice] + rest[i + 1 :])
        else:
            argvs.append(rest)
    return argvs


def test_readme_has_the_two_setup_commands() -> None:
    commands = readme_commands()
    assert "bash scripts/install.sh --data-dir ../shared/data" in commands
    assert ".venv/bin/python -m pytest -q" in commands


def test_every_readme_bonbench_command_parses() -> None:
    argvs = bonbench_argvs(readme_commands())
    assert len(argvs) >= 20, "the README's commands were not found"
    parser = build_parser()
    bad: list[str] = []
    for argv in argvs:
        try:
            parser.parse_args(argv)
        except SystemExit:
            bad.append(" ".join(argv))
    assert not bad, f"README commands that bonbench's parser rejects: {bad}"


def test_the_parse_check_can_fail() -> None:
    # the check above is only worth something if a misspelt flag is caught
    argv = bonbench_argvs(["bonbench run --task math --metrik bon@4"])[0]
    with pytest.raises(SystemExit):
        build_parser().parse_args(argv)


def test_readme_input_paths_exist() -> None:
    """Files the README tells a user to read or pass in (docs, scripts, baselines, verifiers, tests)."""
    text = README.read_text(encoding="utf-8")
    pattern = re.compile(r"(?<![\w/.-])((?:docs|scripts|benchmarks|tests|results/baselines|results/verifiers)/[\w./-]+)")
    # a path written after --out is what a command makes, not an input
    paths = {m.group(1) for m in pattern.finditer(text) if not text[: m.start()].endswith("--out ")}
    missing = [p for p in sorted(paths) if not (REPO / p.rstrip(".")).exists()]
    assert paths, "no paths found in the README"
    assert not missing, f"README names files that do not exist: {missing}"


@pytest.mark.slow
def test_offline_readme_commands_run_for_real(tmp_path: Path, data_dir: Path) -> None:
    """The README's commands that need neither the hub nor a GPU, run as written (placeholders filled
    with the main job's run directory) from a copy of the repository's committed results."""
    env = {**os.environ, "BONBENCH_DATA_DIR": str(data_dir)}
    work = tmp_path / "repo"
    work.mkdir()
    shutil.copytree(REPO / "results", work / "results")
    main_job = [str(BONBENCH), "run", "--task", "math", "--metric", "bon@32", "--limit", "2", "--data-dir", str(data_dir)]
    done = subprocess.run(main_job, cwd=work, env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-2000:]
    run_dir = done.stdout.strip().splitlines()[-1]
    assert (work / run_dir / "metrics.json").exists() or Path(run_dir, "metrics.json").exists()
    (work / "prog.py").write_text("print(input()[::-1])\n")
    (work / "in.txt").write_text("abc\n")

    runnable = []
    # placeholders a math run stands for; a command naming another kind of run (<imdb run>,
    # <humaneval-run-dir>, ...) is only parsed (above)
    math_run = ("<run-dir>", "<run-dir or sweep.json>", "<base-run-dir>", "<checkpoint-run-dir>")
    for command in readme_commands():
        words = command.split()
        if not words or words[0] != "bonbench":
            continue
        sub = words[1]
        offline = sub in ("list", "report", "sandbox", "gate") or (sub == "score" and "--samples" not in words) \
            or (sub == "plot" and "checkpoints" not in command)
        if offline and all(p in math_run for p in PLACEHOLDER.findall(command.replace("math/gemma-3-270m/<hash>", ""))):
            runnable.append(command)
    assert any(c.startswith("bonbench gate") for c in runnable), runnable
    # the gate reads the run as the main job left it, before any command rescores it
    runnable.sort(key=lambda c: not c.startswith("bonbench gate"))
    failures = []
    for command in runnable:
        filled = command.replace("results/runs/math/gemma-3-270m/<hash>", run_dir)
        filled = PLACEHOLDER.sub(run_dir, filled)
        for argv in bonbench_argvs([filled]):
            out = subprocess.run([str(BONBENCH), *argv], cwd=work, env=env, capture_output=True, text=True, timeout=600)
            if out.returncode != 0:
                failures.append(f"{' '.join(argv)} -> {out.returncode}: {out.stderr.strip()[-300:]}")
    assert not failures, "\n".join(failures)
