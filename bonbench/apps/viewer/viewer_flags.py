"""The flags of ``bonbench view`` (the fields of ``ViewRequest``) and their registration.

The handler is ``bonbench.apps.viewer.command:cmd_view``, imported only when the command runs (it
loads Starlette and uvicorn). No viewer logic lives here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bonbench.core import flags, settings
from bonbench.core.settings import setting

HANDLER = "bonbench.apps.viewer.command:cmd_view"


@dataclass(frozen=True)
class ViewRequest:
    """The flags of ``bonbench view`` as values."""

    paths: tuple[Path, ...] = setting(positional=True, help="run directories or results trees (every run under them)")
    port: int = setting(7580, range=(0, 65535, True, True), help="port on 127.0.0.1 (0: a free one; default 7580)")
    host: str = setting("127.0.0.1", help="loopback address to serve on (127.0.0.1 or ::1; the viewer serves this "
                                          "machine only)")
    tasks: tuple[str, ...] = setting((), flag="--task", help="only runs of this task; repeatable")
    models: tuple[str, ...] = setting((), flag="--model", help="only runs of this model (id or slug); repeatable")
    data_dir: str | None = setting(None, help="the tasks' data, for prompts and gold answers (default: "
                                              "$BONBENCH_DATA_DIR)")
    no_cache: bool = setting(False, help="keep no index or table of the runs under $BONBENCH_CACHE/viewer (a read-only "
                                         "home); big runs are then indexed at every start")
    static: Path | None = setting(None, metavar="OUT", help="write a self-contained bundle (a folder of pages that "
                                                            "opens from file://) to OUT instead of serving")
    limit: int | None = setting(None, range=flags.AT_LEAST_1, help="with --static: only the first N problems of each run")
    max_mb: float = setting(200.0, range=flags.POSITIVE, help="with --static: refuse a bundle past this size in MB "
                                                               "(default 200)")


def register(subparsers: Any) -> None:
    """Add ``view`` to the ``bonbench`` subcommand parser."""
    view = subparsers.add_parser("view", help="browse runs, problems and samples on 127.0.0.1 (or write --static)")
    settings.add_flags(view, ViewRequest)
    view.set_defaults(handler=HANDLER)
