"""Run ``bonbench train`` with the tiny trainer plugin registered (used by the SIGKILL resume test).

Usage: python tests/run_train_cli.py -- <bonbench train args>
       torchrun --nproc-per-node 2 tests/run_train_cli.py train ...   (torchrun drops the "--")
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import trainer_plugin  # noqa: F401  (registers tiny_train)

from bonbench.apps import cli

if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(cli.main(args[args.index("--") + 1:] if "--" in args else args))
