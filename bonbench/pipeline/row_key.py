"""The key that says whether a file computed from a run's rows is still current: the row files'
sizes (by their path in the run) and the grader and verifiers whose rows it read. ``problems.json``
(``bonbench.pipeline.problem_summary``) and ``columns.npz`` (``bonbench.pipeline.run_columns``)
are written with it, and their readers (the run viewer, the recipe) check it with ``is_current``.

The row files are append-only, so equal sizes are taken as equal files: a row appended since (a
regrade, a resumed or merged run, a second scoring) changes a size and the key no longer holds.

What it does not do: read row files, or decide what a reader does when the key does not hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any


def row_files(grader: str | None, verifiers: Iterable[str]) -> list[str]:
    """The row files (paths in the run) of the samples, ``grader``'s grades and each verifier's scores."""
    return ["samples.jsonl", *([f"grades/{grader}.jsonl"] if grader else []), *(f"scores/{v}.jsonl" for v in verifiers)]


def file_sizes(root: Path, names: Iterable[str]) -> dict[str, int]:
    """The size of each of ``names`` (paths in the run ``root``) that is a file now; absent ones are left out."""
    sizes = {}
    for name in names:
        try:
            sizes[name] = (Path(root) / name).stat().st_size
        except OSError:
            continue
    return sizes


def rows_key(sizes: Mapping[str, int], grader: str | None, verifiers: Iterable[str]) -> dict[str, Any]:
    """The key of a file computed from the rows of ``grader`` and ``verifiers``, the row files then
    being ``sizes`` long (by path in the run: ``row_files``; a file absent then is left out)."""
    return {"sizes": dict(sorted(sizes.items())), "grader": grader, "verifiers": sorted(verifiers)}


def is_current(key: Any, sizes: Mapping[str, int], grader: str | None, verifiers: Sequence[str], *,
               exactly: bool = False) -> bool:
    """Whether ``key`` (as written, from any file) was computed from ``grader``'s rows and ``verifiers``'
    (exactly these verifiers with ``exactly``; else these among others), and their row files are now
    the sizes it names (``sizes``: the files' sizes now, absent ones left out, as ``file_sizes`` gives)."""
    if not isinstance(key, Mapping) or key.get("grader") != grader:
        return False
    kept, had = key.get("sizes"), key.get("verifiers")
    if not isinstance(kept, Mapping) or not isinstance(had, list):
        return False
    if sorted(verifiers) != had if exactly else not set(verifiers) <= set(had):
        return False
    return all(sizes.get(name) == kept.get(name) for name in row_files(grader, verifiers))
