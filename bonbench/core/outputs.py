"""Writing output files so that nothing already there is lost, and reading JSON files with one-line errors.

Writers (``write_text``, ``write_bytes``, ``write_json``) write a temp file in the target's folder,
fsync it and rename it over the target, so a failure at any point (read-only folder, full disk,
quota, a name that is a folder) leaves the old file byte-for-byte as it was and raises a
``BonbenchError`` naming the path and the fix (``write_error``). ``staged_dir`` does the same for a
folder of outputs (``bonbench plot``, ``bonbench leaderboard``): everything is written into a
hidden sibling folder first and moved into place only when all of it was written.

Readers (``read_text``, ``read_json``, ``read_jsonl_log``) turn a missing file, bytes that are not
UTF-8 and JSON that does not parse into one-line ``BonbenchError`` messages naming the file (and
the line) and what to do. ``read_jsonl_log`` reads a log bonbench appends to, which a kill may have
torn; a data file of the mirror, which must be whole, is ``bonbench.core.data.read_jsonl``'s.
``os_error_message`` words an ``OSError`` that escaped elsewhere the same way, for the CLI's last line of defence.

This module knows nothing about runs, metrics or models; ``bonbench.core.store`` builds on it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bonbench.core.errors import BonbenchError

FULL = (errno.ENOSPC, errno.EDQUOT)
DENIED = (errno.EACCES, errno.EPERM, errno.EROFS)


def os_error_message(path: Path | str, exc: OSError, what: str = "writing") -> str | None:
    """One line for an OSError a user can fix (permissions, full disk, a folder where a file goes),
    naming ``path`` and the fix; None for any other error (a bug, shown as such)."""
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    if exc.errno in FULL:
        return (f"no space left {what} {path} ({reason}): free space on that filesystem and rerun the same command; "
                "files written before are kept")
    if exc.errno in DENIED:
        return (f"cannot write {path} ({reason}): make that folder writable, or choose an output path that is"
                if what == "writing" else f"cannot read {path} ({reason}): fix its permissions")
    if exc.errno == errno.EISDIR:
        return f"{path} is a folder, not a file: name a file (inside it, or elsewhere)"
    if exc.errno == errno.ENOTDIR:
        return f"a file stands where a folder is needed in {path}: move that file or choose another path"
    if exc.errno == errno.ENAMETOOLONG:
        return f"the path {str(path)[:80]}... is too long for the filesystem: choose a shorter one"
    return None


def write_error(path: Path | str, exc: OSError) -> BaseException:
    """``exc`` as a one-line BonbenchError when the user can fix it, else ``exc`` itself (re-raise it)."""
    message = os_error_message(path, exc)  # the user's path, not the temp file that failed
    return BonbenchError(message) if message else exc


def ensure_dir(path: Path | str) -> Path:
    """``mkdir -p path``; a file in the way, a read-only parent or a full disk is a one-line error."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise BonbenchError(f"{path} is a file, but a folder is needed there: move it or choose another path")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(path, exc) from None
    return path


def _probe(folder: Path, named: Path) -> None:
    """Make and remove a temp file in ``folder``; an error names ``named`` (what will be written)."""
    ensure_dir(folder)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".bonbench-check.", suffix=".tmp", dir=folder)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise write_error(named, exc) from None


def check_writable_dir(path: Path | str) -> Path:
    """Fail now, before long work, if files could not be written into the folder ``path`` later: it
    is created if needed, and a temp file is made and removed in it."""
    _probe(Path(path), Path(path))
    return Path(path)


def check_writable(path: Path | str) -> Path:
    """``check_writable_dir`` for the file ``path``'s folder; a folder at ``path`` is an error too."""
    path = Path(path)
    if path.is_dir():
        raise BonbenchError(f"{path} is a folder, not a file: name a file inside it")
    _probe(path.parent, path)
    return path


def write_bytes(path: Path | str, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically: temp file in the same folder, fsync, rename. On any error
    the old file (if any) is untouched and the temp file is removed."""
    path = Path(path)
    if path.is_dir():
        raise BonbenchError(f"{path} is a folder, not a file: name a file inside it")
    ensure_dir(path.parent)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
    try:
        # os.open with 0o666 applies the umask, so the file gets a new file's usual mode (mkstemp's is 0600)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as exc:
        raise write_error(path, exc) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)  # the rename never happened: the old file is as it was
        if isinstance(exc, OSError):
            raise write_error(path, exc) from None
        raise
    return path


def write_text(path: Path | str, text: str) -> Path:
    """``write_bytes`` of UTF-8 text."""
    return write_bytes(path, text.encode("utf-8"))


def write_json(path: Path | str, obj: Any, indent: int | None = 2) -> Path:
    """``write_bytes`` of ``obj`` as JSON (non-JSON values by ``str``), with a final newline."""
    return write_text(path, json.dumps(obj, indent=indent, default=str) + "\n")


@contextlib.contextmanager
def staged_dir(out: Path | str) -> Iterator[Path]:
    """A hidden folder inside ``out`` (so on its filesystem, and writable when ``out`` is) to write a
    set of outputs into; when the block ends without an error its files are moved into ``out`` one
    rename each (replacing files of the same name, keeping the others), else it is removed and the
    files already in ``out`` are untouched."""
    out = ensure_dir(out)
    try:
        stage = Path(tempfile.mkdtemp(prefix=".bonbench-staging.", suffix=".tmp", dir=out))
    except OSError as exc:
        raise write_error(out, exc) from None
    try:
        yield stage
        for src in sorted(stage.rglob("*")):
            dst = out / src.relative_to(stage)
            if src.is_dir():
                ensure_dir(dst)
            else:
                os.replace(src, dst)
    except OSError as exc:
        raise write_error(out, exc) from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _read_bytes(path: Path) -> bytes:
    """The bytes of ``path``; missing or unreadable is a one-line error."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise BonbenchError(f"{path} not found") from None
    except OSError as exc:
        raise BonbenchError(os_error_message(path, exc, what="reading") or f"cannot read {path}: {exc}") from None


def read_text(path: Path | str, fix: str = "restore it from a copy or delete it") -> str:
    """The UTF-8 text of ``path``; missing, unreadable or non-UTF-8 is a one-line error ending in ``fix``."""
    path = Path(path)
    data = _read_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BonbenchError(f"{path} is not UTF-8 text (byte {exc.start}: {data[exc.start:exc.start + 1]!r}); "
                            f"{fix}") from None


def read_json(path: Path | str, fix: str = "restore it from a copy or delete it") -> Any:
    """The JSON document in ``path``; missing, non-UTF-8, empty or malformed is a one-line error."""
    text = read_text(path, fix)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BonbenchError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); "
                            f"{fix}") from None


def read_jsonl_log(path: Path | str, fix: str = "delete that line and rerun", *, skip_torn: bool = False) -> list[Any]:
    """Every JSON line of the log ``path`` (blank lines skipped). A final line without its newline that does
    not parse is an interrupted write and is dropped; so is any UTF-8 line that is not JSON when
    ``skip_torn`` (logs appended to again after a killed run, without repair). Any other bad line
    (bytes that are not UTF-8 anywhere) is a one-line error naming the file and line."""
    path = Path(path)
    lines = _read_bytes(path).split(b"\n")
    rows: list[Any] = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        torn = lineno == len(lines)  # no newline after it: the writer may have been killed mid-line
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            if torn:
                break
            raise BonbenchError(f"{path}:{lineno}: the line is not UTF-8 text; {fix}") from None
        try:
            rows.append(json.loads(text))
        except json.JSONDecodeError:
            if torn or skip_torn:
                continue
            raise BonbenchError(f"{path}:{lineno}: the line is not valid JSON; {fix}") from None
    return rows
