"""``bonbench sandbox``: run one program file in the sandbox and print the result as one JSON object.

    bonbench sandbox run PROGRAM.py [--stdin FILE] [--timeout S] [--memory-mb M] [--unsafe-no-sandbox]
    bonbench sandbox check

``run`` prints ``{"status", "exit_code", "stdout", "stderr", "wall_s", "signal", ..., "accounting"}`` on stdout
and exits 0 when the status is "ok", 1 otherwise (and 1 with a one-line message on stderr when
bubblewrap is unusable). ``check`` runs the bubblewrap self-check and prints the per-execution
overhead. The bonbench CLI mounts ``run`` as ``bonbench sandbox run`` through
`bonbench_sandbox.arguments.add_arguments` (the run arguments) and `run_from_args`; nothing here
imports bonbench.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time

import bonbench_sandbox.accounting as _acct
from bonbench_sandbox.arguments import add_arguments
from bonbench_sandbox.execution import SandboxUnavailable, accounting_mode, ensure_available, execute


def run_from_args(args: argparse.Namespace) -> int:
    """Execute the parsed command; returns the process exit code."""
    try:
        if getattr(args, "sandbox_command", "run") == "check":
            return _check(args.python)
        _check_limits(args)
        program = args.program.read_text(encoding="utf-8")
        stdin = args.stdin.read_text(encoding="utf-8") if args.stdin is not None else None
        result = execute(program, stdin=stdin, timeout_s=args.timeout, memory_mb=args.memory_mb, cpu_s=args.cpu_s,
                         max_output_bytes=args.max_output_bytes, python=args.python, unsafe=args.unsafe_no_sandbox,
                         accounting=args.accounting)
    except (SandboxUnavailable, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result.to_dict(), ensure_ascii=False))
    return 0 if result.status == "ok" else 1


def _check_limits(args: argparse.Namespace) -> None:
    """Refuse meaningless limits before anything runs (a negative CPU limit would be no limit)."""
    for flag, value, low, strict in (("--timeout", args.timeout, 0, True), ("--memory-mb", args.memory_mb, 16, False),
                                     ("--cpu-s", args.cpu_s, 0, True), ("--max-output-bytes", args.max_output_bytes, 1, False)):
        if value is not None and not (math.isfinite(value) and (value > low if strict else value >= low)):
            raise ValueError(f"{flag} must be {'>' if strict else '>='} {low} (got {value})")


def _check(python: str | None) -> int:
    ensure_available(python)
    walls = []
    for _ in range(10):
        t = time.perf_counter()
        res = execute("pass", python=python)
        walls.append(time.perf_counter() - t)
        if res.status != "ok":
            print(f"error: trivial program failed: {res.status} {res.stderr.strip()[-300:]}", file=sys.stderr)
            return 1
    print(json.dumps({"bwrap": "ok", "accounting": accounting_mode(), "accounting_note": _acct.hierarchy().reason,
                      "trivial_execution_ms_median": round(statistics.median(walls) * 1e3, 1)}))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point: ``python -m bonbench_sandbox.cli run prog.py``."""
    parser = argparse.ArgumentParser(prog="bonbench sandbox", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="sandbox_command", required=True)
    add_arguments(sub.add_parser("run", help="run PROGRAM.py in the sandbox and print the result as JSON"))
    check = sub.add_parser("check", help="verify bubblewrap works here and measure its overhead")
    check.add_argument("--python", default=None, help="interpreter to check (default /usr/bin/python3)")
    return run_from_args(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
