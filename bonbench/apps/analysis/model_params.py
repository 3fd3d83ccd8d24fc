"""Parameter counts for FLOP costs (``bonbench recipe --cost flops``): ``--params NAME=COUNT``
values, and counts read from a model's or verifier's weights where they are on this machine
(safetensors headers: shapes only, no weight is loaded).

What it does not do: download or convert a model (the embedded model counts only once converted),
or guess a count from a name.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

from bonbench.core.errors import BonbenchError
from bonbench.core.models import EMBEDDED_FOLDER, EMBEDDED_MODEL, cache_root
from bonbench.plugins.verifiers.manifest import MANIFEST, VERIFIERS_DIR


def parse_params(values: Sequence[str]) -> dict[str, float]:
    """``--params NAME=COUNT`` values (``gemma-3-270m=2.68e8``) as a mapping; one line on a bad one."""
    out: dict[str, float] = {}
    for item in values:
        name, sep, count = item.rpartition("=")
        try:
            value = float(count)
        except ValueError:
            value = math.nan
        if not sep or not name or not value > 0 or not math.isfinite(value):
            raise BonbenchError(f"--params {item!r}: expected NAME=COUNT with a positive count, e.g. gemma-3-270m=2.68e8")
        out[name] = value
    return out


def safetensors_params(folder: Path) -> int | None:
    """The parameters stored in ``folder``'s safetensors files, from their headers (no weight is
    read); None when it has none."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for f in files:
        with open(f, "rb") as fh:
            header = json.loads(fh.read(int.from_bytes(fh.read(8), "little")))
        total += sum(math.prod(t["shape"]) for key, t in header.items() if key != "__metadata__")
    return total


def known_params(name: str, roots: Sequence[Path] = ()) -> float | None:
    """A model's or verifier's parameter count from its files, None when they are not here: a model
    folder, the embedded model's converted folder (never converted for this), a learned verifier
    (``learned:NAME``, its folder as given or under ``<root>/verifiers/``) as its backbone (the
    manifest's base) plus its head."""
    if not name:
        return None
    if name.startswith("learned:"):
        rest = Path(name.removeprefix("learned:"))
        for folder in [rest, *(Path(r) / VERIFIERS_DIR / rest.name for r in roots)]:
            if (folder / MANIFEST).is_file():
                base = json.loads((folder / MANIFEST).read_text(encoding="utf-8")).get("base") or {}
                backbone = known_params(str(base.get("path") or ""), roots) or known_params(str(base.get("name") or ""))
                return None if backbone is None else backbone + (safetensors_params(folder) or 0)
        return None
    folder = cache_root() / EMBEDDED_FOLDER if name == EMBEDDED_MODEL else Path(name)
    count = safetensors_params(folder) if folder.is_dir() else None
    return None if count is None else float(count)
