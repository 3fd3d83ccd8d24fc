"""What the viewer keeps between starts, outside the run: each run's problems table.

A run of 5,000 problems x 256 samples takes seconds to index and its table longer to compute;
both are kept under ``$BONBENCH_CACHE/viewer`` (``~/.cache/bonbench/viewer``), one folder per run
(``bonbench.apps.viewer.runs.run_cache``: the indexes are kept there by ``RunView.index``), so the
next start reads them in a fraction of a second. Nothing is written into a run directory. A kept
index is used only for the same file (device and inode) not shorter than it was, and a kept table
only with the index states and the grading and scoring it was computed from
(``bonbench.apps.viewer.problems.Sources.key``); anything else is computed again. Rows appended since are indexed
and their problems recomputed (the ``changed`` problems of ``bonbench.core.row_index.RowIndex``).

A cache that cannot be written (a read-only home) costs only the speed: one warning, and the
viewer computes as if there were none.

What it does not do: compute a table (``problems``) or decide when to (``site``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bonbench.apps.viewer.problems import ProblemRow

_FORMAT = 3


def _jsonable(x: Any) -> Any:
    return None if isinstance(x, float) and not math.isfinite(x) else x


def _float(x: Any) -> float:
    return math.nan if x is None else float(x)


def save_table(folder: Path, key: Mapping[str, Any], rows: Mapping[str, ProblemRow]) -> None:
    """Keep ``rows`` (problem -> its table row) with the ``key`` they were computed under."""
    doc = {"format": _FORMAT, "key": key,
           "rows": [{k: _jsonable(v) for k, v in dataclasses.asdict(r).items()} for r in rows.values()]}
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / "table.json.tmp"
        tmp.write_text(json.dumps(doc), encoding="utf-8")
        os.replace(tmp, folder / "table.json")
    except OSError as exc:
        warnings.warn(f"cannot keep the viewer's cache in {folder} ({exc.strerror}); big runs will be indexed again "
                      "at the next start (set BONBENCH_CACHE to a writable folder)", stacklevel=2)


def load_table(folder: Path, key: Mapping[str, Any]) -> dict[str, ProblemRow] | None:
    """The rows kept under ``key`` exactly, or None."""
    try:
        doc = json.loads((folder / "table.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT or doc.get("key") != json.loads(json.dumps(key)):
        return None
    try:
        floats = ("pass_rate", "pick_score", "mean_tokens", "best", "pick_value")  # JSON keeps NaN as null
        rows = [ProblemRow(**{**r, **{k: _float(r[k]) for k in floats}}) for r in doc["rows"]]
    except (KeyError, TypeError):
        return None
    return {r.problem_id: r for r in rows}
