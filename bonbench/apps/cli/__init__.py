"""The ``bonbench`` command: the subcommands' parsers, one handler call, errors as one line.

Subcommands: run, score, merge, report, list (``evaluation``), sandbox, leaderboard, gate, plot, recipe
(``bonbench.apps.analysis.analysis_flags``), train (``bonbench.apps.trainer.train_flags``), train-verifier and
eval-verifier (``verifiers``), view (``bonbench.apps.viewer.viewer_flags``). The flags of every command but
``sandbox run`` are the fields of its settings dataclasses (``bonbench.core.settings``), and every command takes
``--config FILE.toml`` (``bonbench.core.settings_file``: the file's values under the flags given). Progress goes to stderr, the
final metrics table to stdout, and the run directory is the last line printed. Exit codes: 0
success, 1 a user error (one line naming the fix; ``--debug`` shows the traceback), 2 bad usage.
Defaults can come from ``BONBENCH_*`` environment variables (``BONBENCH_DATA_DIR``, ``BONBENCH_OUT``,
``BONBENCH_MODEL``, ``BONBENCH_BACKEND``).

A command's handler is named ``"module:function"`` where importing its module loads heavy
libraries (torch, the pipeline, scipy): it is imported when that command runs, so that
``bonbench --help`` and ``bonbench run --help`` load none of them. This package computes nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable, Sequence

from bonbench import __version__
from bonbench.apps.analysis import analysis_flags as analysis_cli
from bonbench.apps.cli import evaluation, verifiers
from bonbench.apps.cli.common import Parser
from bonbench.apps.trainer import train_flags as trainer_cli
from bonbench.apps.viewer import viewer_flags
from bonbench.core import outputs, settings_file
from bonbench.core.errors import BonbenchError
from bonbench.core.registry import load_target
from bonbench_sandbox import arguments as sandbox_arguments

Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="bonbench", description="Exact pass@k / bon@k / maj@k evaluation for every k <= n.")
    parser.add_argument("--version", action="version", version=f"bonbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    evaluation.register(sub)
    sb = sub.add_parser("sandbox", help="run a program in the sandbox and print a JSON result")
    sb_sub = sb.add_subparsers(dest="sandbox_command", required=True)
    sb_run = sb_sub.add_parser("run", help="run PROGRAM.py isolated")
    sandbox_arguments.add_arguments(sb_run)
    sb_run.set_defaults(handler="bonbench_sandbox.command_line:run_from_args")
    analysis_cli.register(sub)
    verifiers.register(sub)
    trainer_cli.register(sub)
    viewer_flags.register(sub)
    settings_file.add_debug_flags(parser)
    settings_file.add_config_flags(parser)
    return parser


def handler_of(args: argparse.Namespace) -> Handler:
    """The parsed command's handler: a function, or one named ``"module:function"`` (imported now)."""
    return args.handler if callable(args.handler) else load_target(str(args.handler))


def _one_line_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                      line: str | None = None) -> str:
    return f"warning: {message}\n"


def main(argv: Sequence[str] | None = None) -> int:
    warnings.formatwarning = _one_line_warning
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        settings_file.apply(parser, argv)  # the command's --config FILE: its values become the flags' defaults
    except BonbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2  # a usage error, like a flag argparse refuses (and never gate's 1, "regression")
    args = parser.parse_args(argv)
    debug = getattr(args, "debug", False)
    if debug:
        os.environ["BONBENCH_DEBUG"] = "1"  # engines show their own output (bonbench.plugins.samplers.engine_log)
    try:
        code = int(handler_of(args)(args) or 0)
        sys.stdout.flush()  # inside the try: a reader gone from a piped stdout fails here, not at exit
        return code
    except BonbenchError as exc:
        if debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # stdout's reader left (`bonbench list metrics | head -1`): stop quietly, as Unix tools do on SIGPIPE
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:
        # the last line of defence: a read-only folder or a full disk met where no writer translated it
        message = outputs.os_error_message(exc.filename, exc) if exc.filename else None
        if message is None or debug:
            raise
        print(f"error: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: finished samples are saved; rerun the same command to resume", file=sys.stderr)
        return 130


__all__ = ["build_parser", "handler_of", "main"]

if __name__ == "__main__":
    sys.exit(main())
