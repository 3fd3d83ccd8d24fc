"""pyproject's explicit package list covers every package folder (a non-editable install would
silently drop a subpackage the list forgets)."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed() -> None:
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(cfg["packages"])
    dirs = {name: Path(path) for name, path in cfg["package-dir"].items()}
    found = set()
    for top, root in dirs.items():
        for init in (REPO / root).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / root)
            found.add(".".join((top, *rel.parts)))
    assert found - listed == set(), f"add these to [tool.setuptools] packages: {sorted(found - listed)}"


def test_the_version_is_written_once_per_file_and_agrees() -> None:
    """pyproject's version, ``bonbench.__version__`` (what config.json records) and the newest
    CHANGELOG.md release are the same release."""
    import re

    import bonbench

    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    newest = re.search(r"^## \[(\d+\.\d+\.\d+)\]", (REPO / "CHANGELOG.md").read_text(), flags=re.M)
    assert newest is not None and version == bonbench.__version__ == newest.group(1)
