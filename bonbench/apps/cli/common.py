"""What the ``bonbench`` subcommands share: the parser whose usage errors are one line, progress
bars on stderr, output-path helpers, the default results root.

No subcommand lives here and nothing here reads a run or a model.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path
from typing import Any

from bonbench.pipeline.progress import ProgressLines, label

DEFAULT_OUT = "results"  # the results root when neither --out nor $BONBENCH_OUT names one


class Parser(argparse.ArgumentParser):
    """argparse with its usage errors on one line (``error: ...``, exit 2), like every other error."""

    def error(self, message: str) -> Any:
        self.exit(2, f"error: {message} (see `{self.prog} --help`)\n")


def file_in(path: str, default_name: str) -> Path:
    """An output path: a file path as given; an existing folder (or a path ending in /) gets
    ``default_name`` inside it, as lm-eval's ``--output_path`` does."""
    out = Path(path)
    return out / default_name if out.is_dir() or path.endswith(("/", os.sep)) else out


def _stderr_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Progress:
    """Progress on stderr, per stage: a rich bar on a terminal, created on first use; elsewhere (a
    log file, CI, where a bar shows only its end) plain lines with counts, rate and ETA
    (``bonbench.pipeline.progress.ProgressLines``), and, while the ``with`` block runs, a timer
    thread that has them ``tick``: a stage between two chunks of rows still shows a line (a bar
    shows its elapsed time itself)."""

    def __init__(self) -> None:
        self.tasks: dict[str, Any] = {}
        self.prefix = ""
        self.lines: ProgressLines | None = None
        self.progress: Any = None
        self.stop = threading.Event()
        self.timer: threading.Thread | None = None
        if not sys.stderr.isatty():
            self.lines = ProgressLines(_stderr_line)
            return
        # imported here: rich costs a noticeable share of `bonbench --help`'s start-up
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
        from rich.progress import Progress as RichProgress

        self.progress = RichProgress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), TimeRemainingColumn(), console=Console(stderr=True),
                                     transient=False)

    def __enter__(self) -> Progress:
        if self.progress is not None:
            self.progress.__enter__()
        if self.lines is not None:
            self.timer = threading.Thread(target=self._ticks, args=(self.lines,), name="progress-ticks", daemon=True)
            self.timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.progress is not None:
            self.progress.__exit__(*exc)
        if self.timer is not None:
            self.stop.set()
            self.timer.join()

    def _ticks(self, lines: ProgressLines) -> None:
        # wake often enough that a silent stage's line is at most a tenth of its heartbeat late
        while not self.stop.wait(lines.heartbeat_s() / 10):
            lines.tick()

    def __call__(self, stage: str, advance: int, total: int) -> None:
        key = self.prefix + stage
        if self.lines is not None:
            self.lines(f"{stage} {self.prefix}".strip(), advance, total)
            return
        if key not in self.tasks:
            self.tasks[key] = self.progress.add_task(f"{label(stage)} {self.prefix}".strip(), total=total)
        self.progress.update(self.tasks[key], advance=advance)
