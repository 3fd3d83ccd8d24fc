"""Lint and types as rules that can fail: every ``# noqa`` and ``# type: ignore`` in the tree names its
codes and says why, pyproject holds the ruff and mypy configuration CI runs, and ruff leaves nothing
that ``ruff check --fix`` cannot repair. The mypy run itself is CI's (``.ci/run``): a cold run takes
most of a minute."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
import tokenize
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("bonbench", "tasks", "sandbox", "tests", "benchmarks", "scripts")
# a directive names its codes, then says why after them on the same line (a word at least)
_NOQA = re.compile(r"#\s*noqa\b(?P<rest>.*)", re.I)
_NOQA_OK = re.compile(r":\s*[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*(?P<why>.*)")
_IGNORE = re.compile(r"#\s*type:\s*ignore\b(?P<rest>.*)")
_IGNORE_OK = re.compile(r"\[[a-z-]+(?:\s*,\s*[a-z-]+)*\](?P<why>.*)")
_WORD = re.compile(r"[A-Za-z]{2,}")


def bare_directives(source: str) -> list[tuple[int, str]]:
    """(line, comment) of each noqa / type: ignore comment in ``source`` without codes or a reason.
    Only comments count (tokenize), not text in strings that mentions them."""
    bare = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        for pattern, ok in ((_NOQA, _NOQA_OK), (_IGNORE, _IGNORE_OK)):
            m = pattern.search(tok.string)
            if m is None:
                continue
            named = ok.match(m.group("rest"))
            if named is None or not _WORD.search(named.group("why")):
                bare.append((tok.start[0], tok.string))
    return bare


def test_the_checker_tells_a_reason_from_none() -> None:
    src = ("import os  # noqa: F401  (re-exported for plugins)\n"
           "import re  # noqa: F401\n"
           "import sys  # noqa\n"
           "import json  # noqa: E402 - a reason after a dash\n"
           "import ast  # noqa: F401,E402\n"
           "x = 1  # type: ignore[assignment]  # transformers' annotation is wrong\n"
           "y = 2  # type: ignore[assignment]\n"
           "z = 3  # type: ignore\n"
           "w = '# noqa'  # a string that mentions it is no directive\n")
    assert [line for line, _ in bare_directives(src)] == [2, 3, 5, 7, 8]


def test_every_noqa_and_type_ignore_says_why() -> None:
    bare = [f"{path.relative_to(REPO)}:{line}: {comment}"
            for folder in FOLDERS for path in sorted((REPO / folder).rglob("*.py"))
            for line, comment in bare_directives(path.read_text(encoding="utf-8"))]
    assert not bare, "name the codes and say why after them:\n" + "\n".join(bare)


def test_pyproject_configures_ruff_and_mypy() -> None:
    doc = tomllib.loads((REPO / "pyproject.toml").read_text())
    ruff, mypy = doc["tool"]["ruff"], doc["tool"]["mypy"]
    assert ruff["target-version"] == "py311" and ruff["line-length"] <= 130
    assert {"E", "W", "F", "I", "B", "UP", "RUF100", "PGH003", "PGH004"} <= set(ruff["lint"]["select"])
    assert mypy["python_version"] == "3.11"
    assert set(mypy["packages"]) == {"bonbench", "bonbench_tasks", "bonbench_sandbox"}
    for flag in ("disallow_untyped_defs", "disallow_incomplete_defs", "check_untyped_defs", "warn_unused_ignores",
                 "warn_redundant_casts", "no_implicit_optional"):
        assert mypy[flag] is True, flag
    # mypy finds tasks/ and sandbox/ under their package names through these links
    for name, folder in (("bonbench_tasks", "tasks"), ("bonbench_sandbox", "sandbox")):
        link = REPO / mypy["mypy_path"] / name
        assert link.is_symlink() and link.resolve() == (REPO / folder).resolve(), link
    # the versions CI runs are pinned: a new release must not fail CI on unchanged code
    dev = doc["project"]["optional-dependencies"]["dev"]
    assert any(re.fullmatch(r"ruff==[0-9.]+", d) for d in dev) and any(re.fullmatch(r"mypy==[0-9.]+", d) for d in dev)


def _ruff() -> str | None:
    here = Path(sys.executable).with_name("ruff")
    return str(here) if here.exists() else shutil.which("ruff")


def test_ruff_leaves_only_what_its_fix_repairs() -> None:
    """Whatever ruff still reports (import order, typing -> collections.abc imports, unused noqa) has
    a safe fix; a finding without one is a real violation. After `ruff check --fix` nothing is left."""
    ruff = _ruff()
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    out = subprocess.run([ruff, "check", "--output-format", "json", "--exit-zero", "."], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    unfixable = [f"{Path(d['filename']).relative_to(REPO)}:{d['location']['row']}: {d['code']} {d['message']}"
                 for d in json.loads(out) if (d.get("fix") or {}).get("applicability") != "safe"]
    assert not unfixable, "\n".join(unfixable)
