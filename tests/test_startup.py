"""``bonbench --help`` and ``bonbench run --help`` start fast (issue 29): they import none of the
libraries a help text does not need. No timing here (benchmarks/bench_startup.py measures it against
bare Python); a module in this list is what a slow start-up is made of.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

NOT_AT_START = ("torch", "transformers", "datasets", "scipy", "numpy", "rich", "asyncio", "sqlite3",
                "importlib.metadata", "urllib.request", "bonbench.pipeline.readers", "bonbench_sandbox.execution")
PROBE = """
import json, sys
from bonbench.apps.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"]])
def test_help_imports_no_heavy_module(argv: list[str]) -> None:
    res = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "usage: bonbench" in res.stdout
    loaded = set(json.loads(res.stderr.strip().splitlines()[-1]))
    assert "bonbench.apps.cli" in loaded  # the probe saw the command's imports
    assert sorted(loaded & set(NOT_AT_START)) == []
