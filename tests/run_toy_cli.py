"""Run the bonbench CLI with the toy plugin and a slow scripted sampler (used by the resume test).

Usage: python tests/run_toy_cli.py DELAY -- <bonbench args>
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import toy_plugin

import bonbench.core.models
import bonbench.plugins.samplers.select
from bonbench.apps import cli


def main() -> int:
    delay = float(sys.argv[1])
    args = sys.argv[sys.argv.index("--") + 1:]
    bonbench.core.models.resolve_model = lambda name: bonbench.core.models.ResolvedModel(
        name="toy-model", path="toy-model", is_chat=False, fingerprint="toy", revision=None)
    bonbench.plugins.samplers.select.get_sampler = lambda *a, **k: toy_plugin.SlowScripted(delay)
    return cli.main(args)


if __name__ == "__main__":
    sys.exit(main())
