"""The run directory: paths, append-only JSONL, atomic JSON writes, resume by key.

Layout (see docs/architecture.md)::

    <out>/runs/<task>/<model-slug>/<config-hash>/
        config.json  samples.jsonl  grades/<grader>.jsonl  scores/<verifier>.jsonl
        metrics.json  curves.json

``find_run_dirs`` is the one rule for what counts as a run directory (``is_run_dir``); the CLI's
``report`` and ``list runs`` and every analysis command find runs with it.

Crash safety: rows are appended one ``write`` per line and flushed; a process killed mid-line leaves
at most one torn final line, which readers drop with a warning (and ``_repair_tail`` truncates before
appending again), so a run killed with SIGKILL at any moment and started again ends with every key
exactly once. A bad line anywhere else (not JSON, not UTF-8) is a one-line error naming file and line.
Rows are de-duplicated by key on read (first row wins), so even a duplicate written by two
concurrent writers cannot be double-counted. JSON files are written to a temp file and renamed.
A full disk (or quota) or a read-only folder while writing is a BonbenchError naming the file and the
fix (``bonbench.core.outputs``); what was written before stays, and the rerun resumes from it.

This module knows nothing about models, tasks or metrics.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from bonbench.core import outputs
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Grade, Sample, Score, from_row, to_row


class Keyed(Protocol):
    """A frozen row record keyed by (problem_id, sample_idx): samples, grades, scores, a search's rows."""

    @property
    def key(self) -> tuple[str, int]: ...


R = TypeVar("R", bound=Keyed)


def atomic_write_json(path: Path, obj: Any) -> None:
    """Write JSON to ``path`` atomically (``outputs.write_json``: temp file in the same folder, fsync,
    rename); a read-only folder or a full disk is a one-line BonbenchError and the old file stays."""
    outputs.write_json(path, obj, indent=2)


def read_run_json(path: Path) -> Any:
    """A run directory's JSON file (config.json, metrics.json, ...): ``outputs.read_json`` with the
    run's fixes (a missing one asks whether this is a run directory at all)."""
    if not Path(path).exists():
        raise BonbenchError(f"{path} not found; is this a bonbench run directory? (run `bonbench run ...` first)")
    return outputs.read_json(path, fix="restore it, or delete the run directory and run again")


def _complete_row(line: bytes) -> bool:
    """Whether a final line without its newline is nevertheless a whole row: a JSON object cannot be
    cut short and still parse, so one that parses lost only its newline."""
    try:
        return isinstance(json.loads(line.decode("utf-8")), dict)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False


def _repair_tail(path: Path) -> None:
    """Before appending: end a final line that lacks its newline. A torn row (a writer killed mid-line)
    is truncated, to be redone; a whole row that lost only its newline gets it back."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) == b"\n":
            return
        fh.seek(0)
        data = fh.read()
        cut = data.rfind(b"\n") + 1
        if _complete_row(data[cut:]):
            fh.write(b"\n")
        else:
            fh.truncate(cut)


@dataclass(frozen=True)
class Extent:
    """What this process last saw of a row file, by reading it to its end or appending to it: its
    first ``size`` bytes are ``lines`` newline-ended lines, ``rows`` of them not blank. A file whose
    size is still ``size`` holds exactly those lines (the files are append-only), so a caller can
    tell that a file holds exactly the rows it has in memory without reading it again."""

    size: int
    lines: int
    rows: int


class JsonlTable(Generic[R]):
    """An append-only JSONL file of records keyed by (problem_id, sample_idx).

    ``seen`` (shared by the tables of one ``RunStore``) gets the file's ``Extent`` after each read to
    the end and each append that continues what was seen; an append after another writer's (the
    size is not the one seen) forgets it."""

    def __init__(self, path: Path, cls: type[R], seen: dict[Path, Extent] | None = None) -> None:
        self.path = path
        self.cls: type[R] = cls
        self.seen: dict[Path, Extent] = {} if seen is None else seen

    def rows(self) -> Iterator[dict[str, Any]]:
        """The file's rows in order. A torn final line (no newline, not a whole row: a writer killed
        mid-line) is dropped with a warning, and its key is redone; any other line that is not a JSON
        object in UTF-8 is a one-line BonbenchError naming the file and line."""
        if not self.path.exists():
            self.seen[self.path] = Extent(0, 0, 0)
            return
        size = lines = blank = 0
        with open(self.path, "rb") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.endswith(b"\n"):
                    self.seen[self.path] = Extent(size, lines, lines - blank)  # the unended last line is not counted
                    if _complete_row(line):
                        yield json.loads(line.decode("utf-8"))  # a whole row that lost only its newline
                    elif line.strip():
                        warnings.warn(f"{self.path}:{lineno}: the last line is torn (an interrupted write); "
                                      "ignoring it, its row will be redone", stacklevel=2)
                    return
                size, lines = size + len(line), lines + 1
                if not line.strip():
                    blank += 1
                    continue
                try:
                    row = json.loads(line.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                    what = "is not UTF-8" if isinstance(exc, UnicodeDecodeError) else "is not valid JSON"
                    raise BonbenchError(f"{self.path}:{lineno}: the row {what}; delete that line (its key will be "
                                        "redone) and rerun") from None
                if not isinstance(row, dict):
                    raise BonbenchError(f"{self.path}:{lineno}: the line is not a row (a JSON object); delete that "
                                        "line (its key will be redone) and rerun")
                yield row
        self.seen[self.path] = Extent(size, lines, lines - blank)

    def read(self, where: Callable[[R], bool] | None = None) -> dict[tuple[str, int], R]:
        """Records by key, optionally only those ``where`` accepts; the first accepted row of a key wins."""
        out: dict[tuple[str, int], R] = {}
        for row in self.rows():
            try:
                rec = from_row(self.cls, row)
            except (TypeError, KeyError) as exc:
                raise BonbenchError(f"{self.path}: malformed {self.cls.__name__} row {row!r:.80} ({exc}); "
                                    "delete that line and rerun") from None
            if where is None or where(rec):
                out.setdefault(rec.key, rec)
        return out

    def append(self, records: Iterable[R]) -> int:
        """Append records, one write+flush per line; returns how many were written.

        A full disk midway raises BonbenchError; the rows before it stay, and a torn last line is
        dropped by readers and truncated by the next append."""
        count = written = 0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _repair_tail(self.path)
            start = self.path.stat().st_size if self.path.exists() else 0
            with open(self.path, "a", encoding="utf-8") as fh:
                for rec in records:
                    line = json.dumps(to_row(rec), ensure_ascii=False) + "\n"
                    fh.write(line)
                    fh.flush()
                    count += 1
                    written += len(line) if line.isascii() else len(line.encode("utf-8"))
                os.fsync(fh.fileno())
        except OSError as exc:
            self.seen.pop(self.path, None)
            raise outputs.write_error(self.path, exc) from None
        self._count_appended(start, written, count)
        return count

    def _count_appended(self, start: int, written: int, count: int) -> None:
        """Carry the seen ``Extent`` over ``count`` lines (``written`` bytes) appended at ``start``; a
        start that is not where this process last saw the file end (another writer's rows, a torn
        line cut) makes the file unseen."""
        before = self.seen.get(self.path, Extent(0, 0, 0) if start == 0 else None)
        if before is None or before.size != start:
            self.seen.pop(self.path, None)
        else:
            self.seen[self.path] = Extent(start + written, before.lines + count, before.rows + count)


class RunStore:
    """One run directory."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._seen: dict[Path, Extent] = {}  # each row file's Extent, as this store's tables last saw it

    @staticmethod
    def path_for(out: Path, task: str, model_slug: str, config_hash: str) -> Path:
        return Path(out) / "runs" / task / model_slug / config_hash

    @property
    def results_root(self) -> Path:
        """The ``<out>`` this run directory lives under (``<out>/runs/<task>/<model>/<hash>``)."""
        if len(self.root.parts) < 4 or self.root.parents[2].name != "runs":
            raise BonbenchError(f"{self.root} is not laid out as <out>/runs/<task>/<model>/<hash>; "
                                "pass the run directory bonbench printed")
        return self.root.parents[3]

    @property
    def config_path(self) -> Path:
        return self.root / "config.json"

    @property
    def metrics_path(self) -> Path:
        return self.root / "metrics.json"

    @property
    def curves_path(self) -> Path:
        return self.root / "curves.json"

    @property
    def samples(self) -> JsonlTable[Sample]:
        return JsonlTable(self.root / "samples.jsonl", Sample, self._seen)

    def grades(self, grader: str) -> JsonlTable[Grade]:
        return JsonlTable(self.root / "grades" / f"{grader}.jsonl", Grade, self._seen)

    def scores(self, verifier: str) -> JsonlTable[Score]:
        return JsonlTable(self.root / "scores" / f"{verifier}.jsonl", Score, self._seen)

    def extents(self) -> dict[str, Extent]:
        """Each row file's ``Extent`` as this store's tables last saw it, by its path in the run
        (samples.jsonl, grades/G.jsonl, scores/V.jsonl); a file not read to its end since is absent."""
        return {path.relative_to(self.root).as_posix(): e for path, e in self._seen.items()}

    def exists(self) -> bool:
        return self.config_path.exists()

    def read_config(self) -> dict[str, Any]:
        return read_run_json(self.config_path)

    def write_config(self, config: dict[str, Any]) -> None:
        atomic_write_json(self.config_path, config)

    def write_metrics(self, metrics: dict[str, Any]) -> None:
        atomic_write_json(self.metrics_path, metrics)

    def write_curves(self, curves: dict[str, Any]) -> None:
        atomic_write_json(self.curves_path, curves)


def is_run_dir(path: Path | str, scored: bool = False) -> bool:
    """Whether ``path`` is a run directory: its ``config.json`` and the output of a stage.

    The stage output is ``samples.jsonl`` or ``metrics.json`` (a run whose sampling has started, or
    one scored from rows written elsewhere); ``scored`` requires ``metrics.json``. A ``config.json``
    alone does not count: model folders have one too.
    """
    path = Path(path)
    if not (path / "config.json").is_file():
        return False
    if (path / "metrics.json").is_file():
        return True
    return not scored and (path / "samples.jsonl").is_file()


def find_run_dirs(root: Path | str, scored: bool = False) -> list[Path]:
    """``root`` itself if it is a run directory (``is_run_dir``), else every run directory under it, sorted.

    ``scored`` keeps only runs with ``metrics.json`` (what reports and analyses read). Raises
    BonbenchError when ``root`` is not a directory, so that a mistyped path is not an empty list.
    """
    root = Path(root)
    if not root.is_dir():
        raise BonbenchError(f"{root} is not a directory; pass a run directory or a results tree (default: results)")
    if is_run_dir(root, scored):
        return [root]
    return sorted(p.parent for p in root.rglob("config.json") if is_run_dir(p.parent, scored))
