"""The progress callback every stage takes: ``progress(stage, advance, total)``.

A stage calls it with ``advance = 0`` when it starts (``total`` is its number of rows) and with the
rows it finished since; the CLI draws bars from it, the library default (``no_progress``) does
nothing. This module defines the type only; it draws nothing.
"""

from __future__ import annotations

from typing import Callable

Progress = Callable[[str, int, int], None]  # (stage, advance, total)


def no_progress(stage: str, advance: int, total: int) -> None:
    """The default callback: report nothing."""
    return None
