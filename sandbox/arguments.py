"""The arguments of ``bonbench sandbox run`` (the program file and its limits), apart from the code
that runs it (``bonbench_sandbox.cli``): building the ``bonbench`` parser (every ``--help``) then
imports no execution machinery. Nothing here runs anything or imports bonbench.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``run`` (PROGRAM.py and the limits) to ``parser``.

    The bonbench CLI calls this on its ``sandbox run`` parser; `bonbench_sandbox.cli.main` does the
    same for the stand-alone command and adds ``check`` next to it.
    """
    parser.add_argument("program", type=Path, help="Python file to run (as main.py in the sandbox)")
    parser.add_argument("--stdin", type=Path, default=None, help="file whose contents are fed on stdin")
    parser.add_argument("--timeout", type=float, default=10.0, help="wall-clock limit in seconds (default 10)")
    parser.add_argument("--memory-mb", type=int, default=1024, help="memory limit in MiB (default 1024): the cgroup's memory.max "
                        "(shared memory and kernel objects included) where accounting applies, and the address-space rlimit")
    parser.add_argument("--cpu-s", type=float, default=None, help="CPU-seconds limit (default: timeout + 1)")
    parser.add_argument("--max-output-bytes", type=int, default=1 << 20, help="bytes kept per stream (default 1 MiB)")
    parser.add_argument("--python", default=None, help="interpreter to run inside (default /usr/bin/python3)")
    parser.add_argument("--accounting", choices=("auto", "rlimit"), default="auto",
                        help="auto: a cgroup leaf (memory incl. shared memory and kernel objects, pids) and an "
                             "inode-capped work dir where the machine allows; rlimit: rlimits only. The mode used "
                             "is the result's 'accounting' field")
    parser.add_argument("--unsafe-no-sandbox", action="store_true",
                        help="no namespaces: only rlimits, uid 65534, a temp dir and a process-group kill")
