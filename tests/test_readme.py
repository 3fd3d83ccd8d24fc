"""The README's and the docs' commands work as written, and the README stays a front page.

Every ``bonbench`` command in a shell block of the README or of a page under docs/ must parse with
bonbench's own parser (a misspelt flag or subcommand fails here). Shell blocks are those fenced
with no language or as bash, sh, shell, console or yaml (a CI workflow's steps); blocks that show
output are fenced ``text`` and code is fenced ``python``, so neither is read for commands. A
command is found where a shell would run it: at the start of a line, after ``-m`` (``torchrun ...
-m bonbench train``), after a wrapper (``python -m ...cpu_preload bonbench run``), inside ``$(...)``
and inside a quoted script (``sbatch --wrap '...'``). Placeholders (``<run-dir>``, ``$RUN_DIR``,
``${{ vars.X }}``) are filled, ``a|b|c`` alternatives expanded, a synopsis's ``[optional]`` parts
parsed both left out and written in, and an elided tail (``train ...``) given its required flags.

The slow test runs, for real, the commands that need neither the hub, a GPU nor a model, against
the main job's run directory (which the README's set-up command makes): ``list``, ``report``,
``sandbox``, ``gate``, ``plot`` and ``leaderboard`` of runs, ``score`` of a run, and the main job
itself (resumed). Every other command is only parsed; ``why_only_parsed`` says why for each:
it samples from a model (``run`` other than the main job), trains or scores with a model (``train``,
``train-verifier``, ``eval-verifier``, ``--ref-model``), needs a cluster, a server or shards
(``--ray``, ``--endpoint``, ``merge``), imports a samples file the docs do not ship (``--samples``),
is a synopsis, is run through another launcher (``torchrun``, ``accelerate``, ``sbatch``, a CI
workflow's variables), or names a run, model or file this test does not make.

It also checks that the README is a front page (at most 200 lines, ten commands in its tour, its
links and its picture resolving to files), that every file path the README and the docs name as an
input exists, and that the site's navigation (mkdocs.yml) lists every page under docs/.
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
import yaml

from bonbench.apps.cli import build_parser
from bonbench.core import settings_file
from bonbench.core.errors import BonbenchError

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
BONBENCH = Path(sys.executable).with_name("bonbench")

SHELL_FENCES = {"", "bash", "sh", "shell", "console", "yaml"}
FENCE = re.compile(r"^([ \t]*)```([\w-]*)\n(.*?)^\1```", re.S | re.M)
# a line that runs bonbench somewhere (not a path such as bonbench/core/...)
MENTIONS_BONBENCH = re.compile(r"(?:^|[\s'\"(])(?:\.venv/bin/)?bonbench(?:\s|$)")

# What an elided command ("... train --task imdb --objective mean ...") leaves out that its parser requires.
ELIDED_REQUIRED = {"train": [("--task", "math"), ("--objective", "mean"), ("--name", "elided")]}

# Placeholders the docs write in angle brackets, and shell variables and substitutions: what stands in for them.
PLACEHOLDER = re.compile(r"<[^<>]+>")
SHELL_VARIABLE = re.compile(r"\$\{\{[^}]*\}\}|\$\{[^}]*\}|\$\w+")
SUBSTITUTION = re.compile(r"\$\(([^()]*)\)")
OPERATORS = {"|", "||", "&&", ";", "&"}


def shell_commands(text: str) -> list[str]:
    """Every line of a page's shell blocks that runs bonbench (continuations joined, comments and
    console prompts cut)."""
    commands: list[str] = []
    for _indent, lang, block in FENCE.findall(text):
        if lang not in SHELL_FENCES:
            continue
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.strip().removeprefix("$ ")
            if not line or line.startswith("#"):
                continue
            if " #" in line:  # a trailing comment; no shown command has a quoted " #"
                line = line[: line.index(" #")].rstrip()
            if MENTIONS_BONBENCH.search(line):
                commands.append(line)
            elif line.startswith("[") and commands and "[" in commands[-1]:  # a synopsis goes on
                commands[-1] += " " + line
    return commands


def readme_commands(text: str | None = None) -> list[str]:
    """The README's bonbench command lines."""
    return shell_commands(README.read_text(encoding="utf-8") if text is None else text)


def invocations(line: str) -> list[list[str]]:
    """The words after ``bonbench`` of every bonbench invocation in one shell line, those inside
    ``$(...)`` and quoted scripts included; placeholders and variables read ``PLACEHOLDER``."""
    found: list[list[str]] = []
    for inner in SUBSTITUTION.findall(line):
        found += invocations(inner)
    line = SUBSTITUTION.sub("PLACEHOLDER", line)
    line = PLACEHOLDER.sub("PLACEHOLDER", SHELL_VARIABLE.sub("PLACEHOLDER", line))
    words = shlex.split(line)
    for word in words:
        if " " in word:  # a quoted script: sbatch --wrap '...', bash -c '...'
            found += invocations(word)
    for i, word in enumerate(words):
        if word in OPERATORS or re.match(r"\d?>", word):
            words = words[:i]
            break
    for i, word in enumerate(words):
        if word in ("bonbench", ".venv/bin/bonbench"):
            return found + [words[i + 1 :]]
        if word == "-m" and words[i + 1 : i + 2] == ["bonbench"]:
            return found + [words[i + 2 :]]
    return found


METAVAR = re.compile(r"[A-Z][A-Z0-9_]*")


def expand(rest: list[str]) -> list[list[str]]:
    """One argv per reading of a shown command: a synopsis's [optional] parts left out and written
    in (a metavar such as `--timeout S` given the value 1, which every int, float or str flag takes),
    `a|b|c` alternatives one by one, an elided tail given its required flags."""
    if any(w.startswith("[") for w in rest):
        without, within, depth = [], [], 0
        for word in rest:
            depth += word.count("[")
            inner = word.strip("[]")
            if depth == 0:
                without.append(word)
            if inner and inner != "...":
                metavar = depth > 0 and METAVAR.fullmatch(inner) and within and within[-1].startswith("--")
                within.append("1" if metavar else inner)
            depth -= word.count("]")
        return expand(without) + expand(within)
    if "..." in rest:  # an elided tail ("train --objective mean ..."): fill the required flags it lacks
        rest = rest[: rest.index("...")]
        for flag, value in ELIDED_REQUIRED.get(rest[0] if rest else "", []):
            if flag not in rest:
                rest += [flag, value]
    alternatives = [i for i, w in enumerate(rest) if "|" in w]
    if alternatives:
        i = alternatives[0]
        return [rest[:i] + [choice] + rest[i + 1 :] for choice in rest[i].split("|")]
    return [rest]


def bonbench_argvs(commands: list[str]) -> list[list[str]]:
    """The argv of each bonbench invocation in these command lines."""
    return [argv for command in commands for rest in invocations(command) for argv in expand(rest)]


def rejected(argvs: list[list[str]]) -> list[str]:
    """The argvs that bonbench's parser refuses, parsed as ``main`` does: a ``--config FILE`` (a
    repository path, read from the repository root) first sets the flags' defaults."""
    bad: list[str] = []
    here = Path.cwd()
    os.chdir(REPO)
    try:
        for argv in argvs:
            parser = build_parser()
            try:
                settings_file.apply(parser, argv)
                parser.parse_args(argv)
            except (SystemExit, BonbenchError):
                bad.append(" ".join(argv))
    finally:
        os.chdir(here)
    return bad


def test_readme_has_the_two_setup_commands() -> None:
    text = README.read_text(encoding="utf-8")
    blocks = [block for _indent, lang, block in FENCE.findall(text) if lang == "bash"]
    lines = [line.split(" #")[0].strip() for block in blocks for line in block.splitlines()]
    assert "bash scripts/install.sh --data-dir ../shared/data" in lines
    assert ".venv/bin/python -m pytest -q" in lines


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_shown_bonbench_command_parses(page: Path) -> None:
    argvs = bonbench_argvs(shell_commands(page.read_text(encoding="utf-8")))
    bad = rejected(argvs)
    assert not bad, f"{page.name}: commands that bonbench's parser rejects: {bad}"


def test_the_commands_were_found() -> None:
    readme = bonbench_argvs(readme_commands())
    docs = [argv for page in PAGES[1:] for argv in bonbench_argvs(shell_commands(page.read_text(encoding="utf-8")))]
    assert len(readme) >= 10, "the README's commands were not found"
    assert len(docs) >= 100, f"only {len(docs)} commands found in docs/"


def test_the_parse_check_can_fail() -> None:
    # the check above is only worth something if a misspelt flag is caught, wherever the command is
    assert rejected(bonbench_argvs(["bonbench run --task math --metrik bon@4"]))
    assert rejected(bonbench_argvs(["sbatch --wrap 'bonbench merge \"$(bonbench run --tsak math | tail -n 1)\"'"]))
    assert rejected(bonbench_argvs(["bonbench gate --run RUN_DIR [--alpa 0.05]"]))
    assert rejected(bonbench_argvs(["torchrun --nproc-per-node 2 -m bonbench train --objectvie mean ..."]))


def test_commands_are_found_where_a_shell_runs_them() -> None:
    text = "```bash\nRAY_AUTH_TOKEN=$T bonbench run --task math --ray auto | tee out.txt   # a comment\n```\n" \
        "```text\nbonbench hf backend 225.3 tok/s\n```\n" \
        "```\n$ bonbench list tasks|verifiers\n```\n"
    assert bonbench_argvs(shell_commands(text)) \
        == [["run", "--task", "math", "--ray", "auto"], ["list", "tasks"], ["list", "verifiers"]]
    wrapped = "jobid=$(sbatch x); sbatch --wrap 'bonbench merge \"$(bonbench run --task math --dry-run | tail -n 1)\"'"
    assert bonbench_argvs([wrapped]) == [["run", "--task", "math", "--dry-run"], ["merge", "PLACEHOLDER"]]
    assert bonbench_argvs(["bonbench gate --run RUN_DIR [--out F.json] [--metric M ...]"]) \
        == [["gate", "--run", "RUN_DIR"], ["gate", "--run", "RUN_DIR", "--out", "F.json", "--metric", "1"]]
    assert bonbench_argvs(shell_commands("```\nbonbench sandbox run P.py [--timeout S]\n    [--accounting auto|rlimit]\n```\n")) \
        == [["sandbox", "run", "P.py"], ["sandbox", "run", "P.py", "--timeout", "1", "--accounting", "auto"],
            ["sandbox", "run", "P.py", "--timeout", "1", "--accounting", "rlimit"]]
    assert bonbench_argvs(["accelerate launch --multi_gpu -m bonbench train --task imdb ..."]) \
        == [["train", "--task", "imdb", "--objective", "mean", "--name", "elided"]]


# -- the README is a front page ------------------------------------------------------------------

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def test_readme_is_a_front_page() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200, "the README is a front page: move the detail to a page under docs/"
    tour = text.split("## A tour in ten commands", 1)[1].split("\n## ", 1)[0]
    assert len(bonbench_argvs(shell_commands(tour))) == 10


def test_readme_links_and_picture_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    targets = [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]
    missing = [t for t in targets if not (REPO / t.split("#")[0]).is_file()]
    assert not missing, f"README links to files that do not exist: {missing}"
    pages = {t.split("#")[0] for t in targets if t.startswith("docs/") and t.endswith(".md")}
    assert len(pages) >= 20, pages
    pictures = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text)
    assert pictures, "the README shows no picture"
    for picture in pictures:
        assert (REPO / picture).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{picture} is not a PNG"


def test_every_docs_page_is_in_the_site_navigation() -> None:
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))

    def pages(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, dict):
            return [p for value in node.values() for p in pages(value)]
        if isinstance(node, list):
            return [p for item in node for p in pages(item)]
        return []

    in_nav = pages(config["nav"])
    on_disk = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(set(in_nav)) == on_disk, f"not in the nav: {set(on_disk) - set(in_nav)}; missing: {set(in_nav) - set(on_disk)}"
    assert config["theme"]["font"] is False, "the built site would load Google Fonts"


# -- files named as inputs exist -----------------------------------------------------------------

INPUT_PATH = re.compile(r"(?<![\w/.-])((?:docs|scripts|benchmarks|tests|results/baselines|results/verifiers)/[\w./-]+)")


def named_inputs(text: str) -> set[str]:
    """Repository paths a page names as inputs: not inside output blocks, not what a shown command
    writes (after --out, --json or --plot), not a file-name prefix (``docs/img/bandit_tang_``)."""
    text = FENCE.sub(lambda m: "" if m.group(2) == "text" else m.group(0), text)
    made = {m.group(1) for m in re.finditer(r"--(?:out|json|plot) ([^\s\]]+)", text)}
    return {p for p in (m.group(1) for m in INPUT_PATH.finditer(text)) if p not in made and not p.endswith("_")}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_input_paths_exist(page: Path) -> None:
    """Files a page tells a user to read or pass in (docs, scripts, baselines, verifiers, tests)."""
    missing = [p for p in sorted(named_inputs(page.read_text(encoding="utf-8"))) if not (REPO / p.rstrip(".")).exists()]
    assert not missing, f"{page.name} names files that do not exist: {missing}"


def test_input_path_check_can_fail() -> None:
    assert named_inputs("see `docs/no-such-page.md` and `tests/gone.py`") == {"docs/no-such-page.md", "tests/gone.py"}
    assert named_inputs("bonbench gate --save-baseline --out results/baselines/x.json\n```text\nscripts/made.sh\n```\n") == set()


# -- the commands that can run here, run ---------------------------------------------------------

MAIN_JOB = ["run", "--task", "math", "--metric", "bon@32", "--limit", "2"]
OFFLINE = {"list", "report", "sandbox", "gate", "plot", "score", "leaderboard", "recipe"}
# placeholders that stand for the main job's run (a math run); any other names a run, model or file
# this test does not make
MATH_RUN = {"<run-dir>", "<run-dir or sweep.json>", "<base-run-dir>", "<checkpoint-run-dir>", "<hash>", "RUN_DIR", "NEW_RUN_DIR"}
UPPER_PLACEHOLDER = re.compile(r"(?<![\w/.-])[A-Z][A-Z0-9_]+(?:\.\.\.)?(?![\w/.-])")


def why_only_parsed(command: str, work: Path | None = None) -> str | None:
    """None when the slow test runs this shown command; else why it is only parsed."""
    words = command.split()
    if not words or words[0] not in ("bonbench", ".venv/bin/bonbench"):
        return "run through a launcher, a wrapper or a shell variable"
    if "[" in command:
        return "a synopsis"
    argv = bonbench_argvs([command])[0]  # alternatives (list tasks|metrics) share their subcommand
    sub = argv[0] if argv else ""
    if sub == "run":
        if [w for i, w in enumerate(argv) if w != "--data-dir" and argv[i - 1] != "--data-dir"] == MAIN_JOB:
            return None
        return "samples from a model"
    if sub in ("train", "train-verifier", "eval-verifier"):
        return "trains or scores with a model"
    if sub == "merge" or "--ray" in argv or "--endpoint" in argv:
        return "needs shards, a cluster or a server"
    if "--samples" in argv:
        return "imports a samples file the docs do not ship"
    if "--ref-model" in argv or "--reward-model" in argv:
        return "scores with a reward or reference model"
    if sub not in OFFLINE or "checkpoints" in command:
        return "needs a training checkpoint"
    others = [p for p in PLACEHOLDER.findall(command.replace("math/gemma-3-270m/<hash>", "")) + UPPER_PLACEHOLDER.findall(command)
              if p not in MATH_RUN]
    if others:
        return f"names {', '.join(others)}, which this test does not make"
    first_flag = next((i for i, w in enumerate(argv) if w.startswith("-")), len(argv))
    elsewhere = [w for w in argv[1:first_flag]
                 if w.startswith("/tmp/") or (work is not None and "PLACEHOLDER" not in w and not (work / w).exists())]
    if sub == "recipe" and elsewhere:  # a recipe of runs made elsewhere or by a run the docs only show (its RESULTS)
        return f"names {elsewhere[0]}, which this test does not make"
    other_run = re.search(r"results/runs/(?!math/gemma-3-270m/<hash>)\S*<hash>", command)
    if other_run:  # <hash> stands for the main job's run only under its own task and model
        return f"names {other_run.group()}, which this test does not make"
    base = argv[argv.index("--base") + 1] if "--base" in argv[:-1] else None
    if base is not None and base != "gemma-3-270m":  # the main job's model is the one model this test runs
        return f"compares with {base}, whose runs this test does not make"
    if work is not None:
        runs = [w for w in argv if w.startswith("results/runs/") and "PLACEHOLDER" not in w and not (work / w).exists()]
        if runs:
            return f"names {runs[0]}, which this test does not make"
    return None


def test_the_run_rule_can_tell() -> None:
    assert why_only_parsed("bonbench report results/") is None
    assert why_only_parsed("bonbench gate --baseline results/baselines/math--gemma-3-270m.json --run <run-dir>") is None
    assert why_only_parsed(".venv/bin/bonbench run --task math --metric bon@32 --limit 2 --data-dir ../shared/data") is None
    assert why_only_parsed("bonbench run --task math --metric bon@32") == "samples from a model"
    assert why_only_parsed("bonbench leaderboard results/ --base Qwen/Qwen2.5-1.5B --task math") == (
        "compares with Qwen/Qwen2.5-1.5B, whose runs this test does not make")
    assert why_only_parsed("bonbench leaderboard results/ --base gemma-3-270m") is None
    assert why_only_parsed("bonbench score <imdb run> --metric kl") is not None
    assert why_only_parsed("bonbench score RUN_DIR --metric maj@4") is None
    assert why_only_parsed("bonbench run --task math --model MY_MODEL") == "samples from a model"
    assert why_only_parsed("bonbench plot results/checkpoints/x") == "needs a training checkpoint"
    assert why_only_parsed("bonbench report results/runs/functional_math", Path("/nonexistent")) is not None
    assert why_only_parsed("bonbench report results/runs/math/Qwen--Qwen2.5-1.5B/<hash> --per-problem") is not None
    assert why_only_parsed("bonbench report results/runs/math/gemma-3-270m/<hash> --per-problem") is None
    assert why_only_parsed("bonbench recipe <run-dir> --budget 1000,4000") is None
    assert why_only_parsed("bonbench recipe /tmp/elsewhere/results --budget 400 --out /tmp/r") is not None
    assert why_only_parsed("bonbench recipe results --budget 400", REPO) is None
    assert why_only_parsed("bonbench recipe results/adaptive-k4 --budget 400", REPO) is not None


def shown_commands() -> list[tuple[str, str]]:
    """(page, command line) of every bonbench command line the README and the docs show."""
    return [(page.name, command) for page in PAGES for command in shell_commands(page.read_text(encoding="utf-8"))]


def test_the_slow_test_has_work() -> None:
    runnable = [c for _page, c in shown_commands() if why_only_parsed(c) is None]
    subs = {bonbench_argvs([c])[0][0] for c in runnable}
    assert {"gate", "score", "plot", "report", "list", "sandbox", "leaderboard", "run", "recipe"} <= subs, subs


@pytest.mark.slow
def test_offline_commands_run_for_real(tmp_path: Path, data_dir: Path) -> None:
    """The README's and the docs' commands that need neither the hub, a GPU nor a model, run as
    written (placeholders filled with the main job's run directory) from a copy of the
    repository's committed results."""
    env = {**os.environ, "BONBENCH_DATA_DIR": str(data_dir)}
    work = tmp_path / "repo"
    work.mkdir()
    shutil.copytree(REPO / "results", work / "results")
    main_job = [str(BONBENCH), *MAIN_JOB, "--data-dir", str(data_dir)]
    done = subprocess.run(main_job, cwd=work, env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-2000:]
    run_dir = done.stdout.strip().splitlines()[-1]
    assert (work / run_dir / "metrics.json").exists() or Path(run_dir, "metrics.json").exists()
    (work / "prog.py").write_text("print(input()[::-1])\n")
    (work / "in.txt").write_text("abc\n")

    runnable = [(page, c) for page, c in shown_commands() if why_only_parsed(c, work) is None]
    assert any(c.startswith("bonbench gate") for _page, c in runnable), runnable
    # the gates read the run as the main job left it, before any command rescores it (page order kept:
    # a baseline is saved before the gate that reads it)
    runnable.sort(key=lambda pc: pc[1].split()[1:2] != ["gate"])
    failures = []
    for page, command in runnable:
        filled = command.replace("results/runs/math/gemma-3-270m/<hash>", run_dir).replace("../shared/data", str(data_dir))
        filled = re.sub(r"\$\{?(\w+)\}?", lambda m: run_dir if m.group(1) in MATH_RUN else m.group(0), filled)
        filled = PLACEHOLDER.sub(run_dir, filled)
        filled = UPPER_PLACEHOLDER.sub(lambda m: run_dir if m.group(0).rstrip(".") in MATH_RUN else m.group(0), filled)
        for argv in bonbench_argvs([filled]):
            out = subprocess.run([str(BONBENCH), *argv], cwd=work, env=env, capture_output=True, text=True, timeout=600)
            if out.returncode != 0:
                failures.append(f"{page}: {' '.join(argv)} -> {out.returncode}: {out.stderr.strip()[-300:]}")
    assert not failures, "\n".join(failures)
