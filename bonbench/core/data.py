"""Where task data comes from: the hub when online, a local mirror directory when offline.

Resolution order for the local directory: the ``data_dir`` argument (``--data-dir``), then the
``BONBENCH_DATA_DIR`` environment variable. With a local directory, loaders read files with the
hub's field names from it; without one, they ask ``datasets.load_dataset`` for the hub id. Either way
the rows come back as plain dicts, and ``fingerprint()`` names exactly which bytes were read.

Offline, the hub libraries would retry each request five times with back-off (half a minute, or
minutes where connections hang) before failing. So before the first hub load, one TCP connection
to the hub's endpoint (``$HF_ENDPOINT``, or the HTTPS proxy when one is set) gets ``HUB_PROBE_S``
seconds; when it fails, the process goes offline as ``HF_HUB_OFFLINE=1`` would have made it: a
dataset in the local Hugging Face cache still loads, any other is one line naming ``--data-dir``
within seconds. ``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE`` set by the user skip the probe.

This module does not know any task's schema; ``tasks/`` does.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import socket
import sys
import threading
import urllib.parse
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bonbench.core.errors import BonbenchError

ENV_DATA_DIR = "BONBENCH_DATA_DIR"
HUB_ENDPOINT = "https://huggingface.co"  # the hub libraries' default ($HF_ENDPOINT overrides it)
HUB_PROBE_S = 2.0  # how long the one connection that decides "offline" may take, name lookup included
_OFFLINE_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")


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
    """Rows of a data file of the mirror (.jsonl or .jsonl.gz), streamed. A mirror file must be whole:
    a line that is not UTF-8 or not JSON (a final line cut short included) and a damaged gzip stream
    are one-line errors naming the file (and line), never a row silently dropped, since that would
    change the problem set. (Files bonbench appends to, which a kill may tear, are read by
    ``bonbench.core.outputs.read_jsonl_log`` and ``bonbench.core.store``.)"""
    fix = "fix or remove that line, or copy the file from the mirror again"
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                if not raw.strip():
                    continue
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise BonbenchError(f"{path}:{lineno}: the line is not UTF-8 text; {fix}") from None
                try:
                    yield json.loads(text)
                except json.JSONDecodeError as exc:
                    cut = "" if raw.endswith(b"\n") else ", the file ends inside it"
                    raise BonbenchError(f"{path}:{lineno}: malformed JSON row ({exc.msg}{cut}); {fix}") from None
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise BonbenchError(f"{path}: cannot read it ({exc}); copy the file from the mirror again") from None


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


def _env(name: str) -> str:
    return os.environ.get(name.lower()) or os.environ.get(name.upper()) or ""


def _proxy_for(scheme: str, host: str) -> str:
    """The proxy a request to ``host`` goes through, as requests and httpx read the environment
    (``<SCHEME>_PROXY``, ``ALL_PROXY``; ``NO_PROXY``: ``*`` or host suffixes); "" for none.
    (urllib.request has this, at ~10 ms of import for every task module.)"""
    for entry in _env("no_proxy").split(","):
        entry = entry.strip().lower().lstrip(".")
        if entry == "*" or entry and (host == entry or host.endswith("." + entry)):
            return ""
    return _env(f"{scheme}_proxy") or _env("all_proxy")


def hub_address() -> tuple[str, int]:
    """The host and port a hub request first connects to: the proxy for the hub's endpoint when
    one applies, else the endpoint itself."""
    url = urllib.parse.urlsplit(os.environ.get("HF_ENDPOINT") or HUB_ENDPOINT)
    host = (url.hostname or "huggingface.co").lower()
    proxy = _proxy_for(url.scheme or "https", host)
    if proxy:
        purl = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        return purl.hostname or host, purl.port or (443 if purl.scheme == "https" else 80)
    return host, url.port or (80 if url.scheme == "http" else 443)


def hub_reachable(timeout: float = HUB_PROBE_S) -> bool:
    """Whether one TCP connection to ``hub_address()`` opens within ``timeout`` seconds (the name
    lookup runs in a thread of its own: a resolver that hangs cannot hold the caller longer)."""
    opened: list[bool] = []

    def connect() -> None:
        try:
            socket.create_connection(hub_address(), timeout=timeout).close()
            opened.append(True)
        except (OSError, ValueError):
            pass

    probe = threading.Thread(target=connect, name="bonbench-hub-probe", daemon=True)
    probe.start()
    probe.join(timeout)
    return bool(opened)


def _offline_asked() -> bool:
    return any(os.environ.get(name, "").strip().upper() in ("1", "ON", "YES", "TRUE") for name in _OFFLINE_VARS)


def _go_offline() -> None:
    """What ``HF_HUB_OFFLINE=1`` does, for this process: the hub libraries read their local cache
    and send no request. Set in the environment for libraries not imported yet, and in the
    settings they read at import time for those that are."""
    os.environ["HF_HUB_OFFLINE"] = os.environ["HF_DATASETS_OFFLINE"] = "1"
    hub_constants = sys.modules.get("huggingface_hub.constants")
    if hub_constants is not None:
        hub_constants.HF_HUB_OFFLINE = True  # type: ignore[attr-defined]  # sys.modules holds plain ModuleTypes
    datasets_config = sys.modules.get("datasets.config")
    if datasets_config is not None:
        datasets_config.HF_HUB_OFFLINE = datasets_config.HF_DATASETS_OFFLINE = True  # type: ignore[attr-defined]  # as above


_probed: list[bool] = []  # the probe's answer, once per process (a run loads several splits)


def load_hub(hub_id: str, split: str, config: str | None = None) -> tuple[list[dict[str, Any]], str]:
    """Rows of a hub dataset split and its fingerprint; a one-line error within seconds when the hub
    is unreachable and the dataset is not in the local cache (see the module docstring)."""
    if not _probed and not _offline_asked():
        _probed.append(hub_reachable())
    unreachable = _probed == [False]
    if unreachable:
        _go_offline()
    try:
        import datasets

        ds = datasets.load_dataset(hub_id, config, split=split) if config else datasets.load_dataset(hub_id, split=split)
    except Exception as exc:  # noqa: BLE001  offline, unknown id, auth: all fixed the same way
        if unreachable:
            host, port = hub_address()
            raise BonbenchError(
                f"cannot reach the hub ({host}:{port}) and {hub_id!r} is not in the local Hugging Face cache; pass "
                f"--data-dir DIR (or set {ENV_DATA_DIR}) to a local mirror of the task data") from None
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BonbenchError(
            f"could not load {hub_id!r} ({split}) from the hub ({first[:160]}); pass --data-dir DIR (or set "
            f"{ENV_DATA_DIR}) to a local mirror"
        ) from None
    return [dict(r) for r in ds], f"hub:{hub_id}:{config or ''}:{split}:{getattr(ds, '_fingerprint', '')}"
