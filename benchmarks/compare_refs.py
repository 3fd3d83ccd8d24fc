"""Before and after: the same benchmark scripts run against an older commit and the working tree, in
turns, in one run, so that load from other processes hits both alike.

    python benchmarks/compare_refs.py --base 754b5ae [--rounds 2] -- bench_estimators.py --problems 2000

The base commit is checked out into a temporary git worktree. Each side runs its *own* copy of the
benchmark script (the scripts may have changed with the code) with its own ``bonbench``,
``bonbench_tasks`` and ``bonbench_sandbox`` first on ``PYTHONPATH`` (a folder of links, because
tasks/ and sandbox/ are imported under other names), in the same interpreter and environment. Every
line either side prints is shown, prefixed by its side and round; the lines that carry a figure
(a ratio ``1.23x``, a time ``4.5 s``, a rate ``/s``) are then printed once more side by side, so that
the before and after of each figure can be read off one table. It measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIGURE = re.compile(r"\d(\.\d+)?\s*(x|×|s\b|ms\b|/s|tok/s|exec/s|samples/s)")
PACKAGES = {"bonbench": "bonbench", "bonbench_tasks": "tasks", "bonbench_sandbox": "sandbox"}


def link_folder(tree: Path, into: Path) -> Path:
    """A folder whose entries are the tree's three packages under their import names."""
    into.mkdir(parents=True, exist_ok=True)
    for name, folder in PACKAGES.items():
        (into / name).symlink_to(tree / folder, target_is_directory=True)
    return into


def run_side(tree: Path, path_dir: Path, script_argv: list[str]) -> list[str]:
    """One run of the benchmark script of ``tree``; its output lines (stdout, then stderr's last lines on failure)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(path_dir), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    script = tree / "benchmarks" / script_argv[0]
    probe = "import bonbench, bonbench_tasks; print(f'bonbench {bonbench.__version__} from {bonbench.__file__}')"
    which = subprocess.run([sys.executable, "-c", probe], cwd=tree, env=env, capture_output=True, text=True, check=False)
    print(f"  ({(which.stdout or which.stderr).strip().splitlines()[-1]})", flush=True)
    res = subprocess.run([sys.executable, str(script), *script_argv[1:]], cwd=tree, env=env,
                         capture_output=True, text=True, check=False)
    lines = res.stdout.splitlines()
    if res.returncode != 0:
        lines += [f"(exit {res.returncode})"] + res.stderr.splitlines()[-15:]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the commit (or any git ref) to compare the working tree against")
    ap.add_argument("--rounds", type=int, default=1, help="turns of base, then the working tree")
    ap.add_argument("script", nargs=argparse.REMAINDER, help="-- SCRIPT.py [ARGS...] (a file in benchmarks/)")
    args = ap.parse_args(argv)
    script_argv = args.script[1:] if args.script[:1] == ["--"] else args.script
    if not script_argv or not (REPO / "benchmarks" / script_argv[0]).is_file():
        ap.error("name a benchmark script of benchmarks/ after --, e.g. -- bench_estimators.py")
    with tempfile.TemporaryDirectory(prefix="bonbench-compare-") as tmp:
        base_tree = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(base_tree), args.base], check=True)
        try:
            sides = {f"base {args.base}": (base_tree, link_folder(base_tree, Path(tmp) / "path-base")),
                     "working tree": (REPO, link_folder(REPO, Path(tmp) / "path-new"))}
            figures: dict[str, list[str]] = {side: [] for side in sides}
            for r in range(1, args.rounds + 1):
                for side, (tree, path_dir) in sides.items():
                    print(f"== round {r}, {side}: {' '.join(script_argv)}", flush=True)
                    lines = run_side(tree, path_dir, script_argv)
                    for line in lines:
                        print(f"  {line}", flush=True)
                    figures[side] += [f"r{r}: {line.strip()}" for line in lines if FIGURE.search(line)]
            print("\n== figures, side by side")
            for side, lines in figures.items():
                print(f"-- {side}")
                for line in lines:
                    print(f"  {line}")
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base_tree)], check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
