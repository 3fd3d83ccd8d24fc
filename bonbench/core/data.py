"""Where task data comes from: the hub when online, a local mirror directory when offline.

Resolution order for the local directory: the ``data_dir`` argument (``--data-dir``), then the
``BONBENCH_DATA_DIR`` environment variable. With a local directory, loaders read files with the
hub's field names from it; without one, they ask ``datasets.load_dataset`` for the hub id. Either way
the rows come back as plain dicts, and ``fingerprint()`` names exactly which bytes were read.

This module does not know any task's schema; ``tasks/`` does.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterator

from bonbench.core.errors import BonbenchError

ENV_DATA_DIR = "BONBENCH_DATA_DIR"


def resolve_data_dir(data_dir: str | os.PathLike[str] | None) -> Path | None:
    """The local mirror root, or None to use the hub. Raises if a named directory does not exist."""
    raw = data_dir if data_dir not in (None, "") else os.environ.get(ENV_DATA_DIR) or None
    if raw is None:
        return None
    path = Path(raw).expanduser()
    if not path.is_dir():
        raise BonbenchError(f"data directory {str(path)!r} does not exist; pass --data-dir (or set {ENV_DATA_DIR}) "
                            "to a local mirror such as ../shared/data")
    return path


def local_file(root: Path, relative: str, what: str) -> Path:
    """``root/relative``, or a one-line error naming the missing file and the fix."""
    path = root / relative
    if not path.is_file():
        raise BonbenchError(f"{what}: {str(path)!r} not found; point --data-dir at a mirror that has {relative} "
                            "(see ../shared/data/README.md)")
    return path


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a .jsonl or .jsonl.gz file; a malformed line is an error naming file and line."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise BonbenchError(f"{path}:{lineno}: malformed JSON row ({exc.msg}); fix or remove that line") from None


def file_fingerprint(*paths: Path) -> str:
    """sha256 over the name and bytes of each given file (in order), first 16 hex chars. Reward caches key
    on it; imported sample files use ``readers.samples_fingerprint`` (content only) instead."""
    h = hashlib.sha256()
    for path in paths:
        h.update(path.name.encode())
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return "sha256:" + h.hexdigest()[:16]


def load_hub(hub_id: str, split: str, config: str | None = None) -> tuple[list[dict[str, Any]], str]:
    """Rows of a hub dataset split and its fingerprint; a one-line error when the hub is unreachable."""
    try:
        import datasets

        ds = datasets.load_dataset(hub_id, config, split=split) if config else datasets.load_dataset(hub_id, split=split)
    except Exception as exc:  # noqa: BLE001  offline, unknown id, auth: all fixed the same way
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BonbenchError(
            f"could not load {hub_id!r} ({split}) from the hub ({first[:160]}); "
            f"pass --data-dir (or set {ENV_DATA_DIR}) to a local mirror"
        ) from None
    return [dict(r) for r in ds], f"hub:{hub_id}:{config or ''}:{split}:{getattr(ds, '_fingerprint', '')}"
