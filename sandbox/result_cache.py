"""Persistent, thread-safe cache of execution results, so that re-scoring never re-executes.

A result is stored under `job_key()`: sha256 over the program, stdin, extra files, every resolved
limit, the interpreter's identity (real path, size, mtime), the isolation mode and
`SANDBOX_VERSION`. Anything that could change the outcome changes the key; nothing else does.

Storage is one SQLite file (WAL mode), usable from many threads of one process (one connection
behind a lock) and from several processes at once (SQLite's file locking).

Not cached: "sandbox_error" results, which describe the host rather than the program. Cached on
purpose: "timeout" results, because a re-score must reproduce the first score; delete the file
(or use a new path) to re-run after changing machines.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path

from bonbench_sandbox.execution import SANDBOX_VERSION, Interpreter, Limits
from bonbench_sandbox.supervise import ExecResult


def job_key(program: str, stdin: str | None, files: dict[str, str], limits: Limits, interpreter: Interpreter,
            unsafe: bool, accounting: str = "rlimit") -> str:
    """The cache key of one execution (hex sha256); ``accounting`` is the mode it runs under (a
    memory limit the kernel enforces can turn "ok" into "memory")."""
    payload = {
        "v": SANDBOX_VERSION,
        "program": program,
        "stdin": stdin,
        "files": sorted(files.items()),
        "limits": [limits.timeout_s, limits.memory_mb, limits.cpu_s, limits.max_output_bytes, limits.max_procs,
                   limits.max_file_mb, limits.max_open_files, limits.tmpfs_mb],
        "python": interpreter.identity,
        "unsafe": unsafe,
        "accounting": accounting,
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResultCache:
    """``key -> ExecResult`` in a SQLite file; ``hits``/``misses`` count lookups since opening."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), timeout=60.0, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        # Losing the last few rows on power loss only costs a re-execution; fsync per row costs more.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, result TEXT NOT NULL)")
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> ExecResult | None:
        with self._lock:
            row = self._db.execute("SELECT result FROM results WHERE key = ?", (key,)).fetchone()
            if row is None:
                self.misses += 1
                return None
            self.hits += 1
        return ExecResult.from_dict(json.loads(row[0]))

    def put(self, key: str, result: ExecResult) -> None:
        if result.status == "sandbox_error":
            return
        blob = json.dumps(result.to_dict(), ensure_ascii=False)
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO results (key, result) VALUES (?, ?)", (key, blob))

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM results").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> ResultCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
