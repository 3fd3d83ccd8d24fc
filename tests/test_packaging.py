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


def test_a_wheel_ships_the_report_templates(tmp_path: Path) -> None:
    """A non-editable install finds report.html's templates: a wheel built from the sources carries
    them, and bonbench imported from that wheel alone renders a page with them."""
    import shutil
    import subprocess
    import sys
    import zipfile

    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "bonbench", "tasks", "sandbox"):
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy
        copy(REPO / name, src / name, **({"ignore": shutil.ignore_patterns("__pycache__")} if copy is shutil.copytree else {}))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path),
                    str(src)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("bonbench-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for app in ("analysis", "viewer"):  # report.html's and `bonbench view`'s
        templates = REPO / "bonbench" / "apps" / app / "templates"
        assert {f"bonbench/apps/{app}/templates/{p.name}" for p in templates.iterdir()} <= names
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    # bonbench from the unpacked wheel, not from this checkout (whose editable install a meta path finder serves)
    script = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]; "
              f"sys.path.insert(0, {str(site)!r}); "
              "from bonbench.apps.analysis import htmlparts as h; assert h.__file__.startswith(sys.path[0]), h.__file__; "
              "print(h.page('t', h.render('report.html.j2', n_runs=1, n_checkpoints=0, sections=['<b>'])))")
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True, cwd=tmp_path).stdout
    assert "<h1>bonbench report</h1>" in out and "border-collapse" in out and "&lt;b&gt;" in out
def test_the_version_is_written_once_per_file_and_agrees() -> None:
    """pyproject's version, ``bonbench.__version__`` (what config.json records) and the newest
    CHANGELOG.md release are the same release."""
    import re

    import bonbench

    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    newest = re.search(r"^## \[(\d+\.\d+\.\d+)\]", (REPO / "CHANGELOG.md").read_text(), flags=re.M)
    assert newest is not None and version == bonbench.__version__ == newest.group(1)
