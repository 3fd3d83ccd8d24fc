"""The runs a viewer shows, and the only way it opens their files.

``find_runs`` turns the folders given on the command line into ``RunView``s (every run directory
under them, ``bonbench.core.store.find_run_dirs``, finished or still being written), each named by a
short id that the pages use in their addresses: a URL never carries a file path, so no address can
name a file. ``RunView.file`` is the one door to a run's files: it refuses any path whose real
location (symlinks followed) lies outside the run folders given, so a ``samples.jsonl`` linked to
``/etc/passwd`` reads as missing, with a warning.

A ``RunView`` reads config.json and metrics.json when asked (they may change while a run is
written) and keeps one ``bonbench.core.row_index.RowIndex`` per row file, refreshed on each use.

What it does not do: compute a problem's figures (``problems``) or write anything.
"""

from __future__ import annotations

import hashlib
import json
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bonbench.api.metric.grammar import metric_sort_key
from bonbench.core.cache import cache_dir
from bonbench.core.config import model_slug
from bonbench.core.row_index import RowIndex
from bonbench.core.store import find_run_dirs


@dataclass(frozen=True)
class MetricRow:
    """One dataset metric of a run as metrics.json stores it."""

    name: str
    value: float
    lo: float
    hi: float
    n_problems: int
    verifier: str | None


def _number(x: Any) -> float:
    return math.nan if x is None else float(x)


class RunView:
    """One run directory as the viewer reads it: its JSON files and its row files by key."""

    def __init__(self, run_id: str, path: Path, allowed: Path, cache: Path | None = None) -> None:
        self.id = run_id
        self.path = path
        self.allowed = allowed.resolve()  # the folder given on the command line that holds this run
        self.cache = cache  # where its indexes are kept between starts (``bonbench.apps.viewer.cache``); None: nowhere
        self._indexes: dict[str, RowIndex] = {}
        # problems that got rows since the table last took them (``take_changes``); None: an index was rebuilt
        self._changed: set[str] | None = set()
        self._docs: dict[str, tuple[tuple[int, int], dict[str, Any]]] = {}  # name -> ((mtime, size), doc)

    def file(self, relative: str) -> Path | None:
        """The run's file ``relative`` (config.json, grades/x.jsonl, ...), or None when it does not
        exist or its real path lies outside the folder given (a symlink out): refused with a warning."""
        path = self.path / relative
        if not path.is_file():
            return None
        real = path.resolve()
        if not real.is_relative_to(self.allowed):
            warnings.warn(f"{path} links outside {self.allowed}; the viewer does not read it", stacklevel=2)
            return None
        return real

    def json_file(self, name: str) -> dict[str, Any]:
        """A JSON file of the run, read again only when it changed (the pipeline replaces it whole)."""
        path = self.file(name)
        if path is None:
            return {}
        stat = path.stat()
        stamp = (stat.st_mtime_ns, stat.st_size)
        cached = self._docs.get(name)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            warnings.warn(f"{self.path / name} is not readable JSON; showing the run without it", stacklevel=2)
            doc = {}
        doc = doc if isinstance(doc, dict) else {}
        self._docs[name] = (stamp, doc)
        return doc

    def config_file(self) -> dict[str, Any]:
        return self.json_file("config.json")

    def config(self) -> dict[str, Any]:
        doc = self.config_file()
        inner = doc.get("config", doc)
        return inner if isinstance(inner, dict) else {}

    def curves_file(self) -> dict[str, Any]:
        """curves.json, or an empty dict for a run not scored yet."""
        return self.json_file("curves.json")

    def metrics_file(self) -> dict[str, Any]:
        """metrics.json, or an empty dict for a run not scored yet."""
        return self.json_file("metrics.json")

    @property
    def task(self) -> str:
        return str(self.config().get("task", self.path.parent.parent.name))

    @property
    def model(self) -> str:
        return str(self.config().get("model", self.path.parent.name))

    @property
    def model_slug(self) -> str:
        return model_slug(self.model)

    def metric_rows(self) -> list[MetricRow]:
        """The dataset metrics (breakdown groups too), in the report's order."""
        metrics = self.metrics_file().get("metrics") or {}
        rows = []
        for name in sorted(metrics, key=metric_sort_key):
            m = metrics[name] if isinstance(metrics[name], Mapping) else {}
            lo, hi = (list(m.get("ci95") or []) + [None, None])[:2]
            rows.append(MetricRow(name, _number(m.get("value")), _number(lo), _number(hi), int(m.get("n_problems") or 0),
                                  m.get("verifier")))
        return rows

    def row_files(self, folder: str) -> list[str]:
        """The names of ``grades/`` or ``scores/`` files (without .jsonl), sorted."""
        base = self.path / folder
        return sorted(p.stem for p in base.glob("*.jsonl")) if base.is_dir() else []

    def index(self, relative: str) -> RowIndex | None:
        """The refreshed row index of ``relative`` (samples.jsonl, grades/G.jsonl, scores/V.jsonl), or
        None when the run has no such file (or it links outside)."""
        path = self.file(relative)
        if path is None:
            self._indexes.pop(relative, None)
            return None
        index = self._indexes.get(relative)
        if index is None:
            # samples.jsonl's index keeps each row's n_tokens: the table's mean length parses no completion
            index = self._indexes[relative] = RowIndex(path, number="n_tokens" if relative == "samples.jsonl" else None)
            if self.cache is not None:
                index.load(self.cache / index_name(relative))
        before = (index.identity, index.indexed)
        index.refresh()
        if index.changed is None or self._changed is None:
            self._changed = None
        else:
            self._changed |= index.changed
        if self.cache is not None and (index.identity, index.indexed) != before:
            try:
                self.cache.mkdir(parents=True, exist_ok=True)
                index.save(self.cache / index_name(relative))
            except OSError as exc:
                warnings.warn(f"cannot keep the viewer's index in {self.cache} ({exc.strerror}); it is rebuilt at the "
                              "next start (set BONBENCH_CACHE to a writable folder)", stacklevel=2)
        return index

    def take_changes(self) -> set[str] | None:
        """The problems that got rows in any file since the last call (None: a file was indexed anew)."""
        changed, self._changed = self._changed, set()
        return changed

    def grader(self) -> str | None:
        """The grades file the metrics were computed from (metrics.json's grader), else the first one."""
        found = self.row_files("grades")
        named = self.metrics_file().get("grader")
        return named if named in found else (found[0] if found else None)

    def verifier(self) -> str | None:
        """The scores file bon@k read (metrics.json's verifier, else the run's), else the only verifier
        the run was scored with; None when none or several remain."""
        found = self.row_files("scores")
        for named in (self.metrics_file().get("verifier"), self.config().get("verifier")):
            if named in found:
                return str(named)
        listed = [v for v in self.config_file().get("verifiers") or [] if v in found]
        candidates = listed or found
        return candidates[0] if len(candidates) == 1 else None


def ids_for(paths: Sequence[Path], taken: Sequence[str] = ()) -> list[str]:
    """Short ids for the addresses of these folders: the folder's name (a run's config hash) in
    letters, digits, ``-`` and ``_``, made unique with a suffix, and unlike the ids ``taken``."""
    used = set(taken)
    out = []
    for p in paths:
        base = "".join(c for c in p.name if c.isascii() and (c.isalnum() or c in "-_"))[:24] or "run"
        name, i = base, 1
        while name in used:
            i += 1
            name = f"{base}-{i}"
        used.add(name)
        out.append(name)
    return out


def index_name(relative: str) -> str:
    """The file name under which the index of the run's file ``relative`` is kept."""
    return hashlib.sha256(relative.encode("utf-8")).hexdigest()[:16] + ".index"


def run_cache(run_path: Path) -> Path:
    """The folder kept for the run at ``run_path``: ``$BONBENCH_CACHE/viewer/<hash of its real path>``."""
    return cache_dir("viewer") / hashlib.sha256(str(run_path.resolve()).encode("utf-8")).hexdigest()[:24]


def find_runs(folders: Sequence[Path], keep: bool = True) -> list[RunView]:
    """Every run directory under ``folders`` (each a run directory or a results tree), in order,
    duplicates dropped; ``keep``: their indexes are kept between starts (``run_cache``). A path that
    is not a folder is a one-line BonbenchError."""
    found: list[tuple[Path, Path]] = []
    seen: set[Path] = set()
    for folder in map(Path, folders):
        for run in find_run_dirs(folder):
            if run.resolve() not in seen and run.resolve().is_relative_to(folder.resolve()):
                seen.add(run.resolve())
                found.append((run, folder))
    return [RunView(i, run, folder, run_cache(run) if keep else None)
            for i, (run, folder) in zip(ids_for([r for r, _ in found]), found, strict=True)]
