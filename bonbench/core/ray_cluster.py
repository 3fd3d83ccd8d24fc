"""Joining a Ray cluster for ``--ray``: the options, a bounded connect, and what the cluster holds.

``--ray`` with no value starts a local Ray (``ray.init()``, this machine only); ``--ray auto`` joins
the cluster this machine belongs to (``ray start`` ran here, or ``$RAY_ADDRESS``); ``--ray HOST:PORT``
joins the cluster whose head's GCS listens there. ``ray.init(address=...)`` on an address where
nothing listens retries for minutes (measured: still waiting after 2 min), so an explicit address is
first probed with a plain TCP connect bounded by ``connect_timeout_s``; what does not answer is a
one-line ``BonbenchError`` naming the fix.

The Ray options change where work runs, never what it produces (samples are keyed and seeded per
key, executions are deterministic), so they are recorded in config.json but not hashed into the run id.

Ray is imported here lazily, only when a run asks for it. This module does not schedule work
(``bonbench.plugins.samplers.ray_backend`` and ``bonbench.plugins.graders.ray_sandbox`` do).
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from dataclasses import dataclass
from typing import Any

from bonbench.core.errors import BonbenchError

LOCAL = "local"  # --ray with no value
AUTO = "auto"


@dataclass(frozen=True)
class RayOptions:
    """``address``: ``local`` (start one here), ``auto`` or ``HOST:PORT``; ``workers``: sampling actors
    (None: one per GPU, or one per node on a cluster without GPUs); ``connect_timeout_s``: how long an
    explicit address may take to answer."""

    address: str = LOCAL
    workers: int | None = None
    connect_timeout_s: float = 10.0

    def recorded(self) -> dict[str, Any]:
        """What config.json records under ``ray`` (provenance only: not hashed)."""
        return {"address": self.address, "workers": self.workers}


def ray_options(address: str | None, workers: int | None = None) -> RayOptions | None:
    """The options of ``--ray [ADDRESS]`` / ``--ray-workers N`` (None: no Ray)."""
    if address is None:
        if workers is not None:
            raise BonbenchError("--ray-workers needs --ray (a local Ray, `auto` or HOST:PORT)")
        return None
    if workers is not None and workers < 1:
        raise BonbenchError(f"--ray-workers must be at least 1 (got {workers})")
    text = address.strip() or LOCAL
    if text not in (LOCAL, AUTO):
        _host_port(text)  # a malformed address fails now, before any model loads
    return RayOptions(address=text, workers=workers)


def _host_port(address: str) -> tuple[str, int]:
    text = address[len("ray://"):] if address.startswith("ray://") else address
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise BonbenchError(f"--ray {address!r} is not HOST:PORT: give the head's address (e.g. 10.0.0.5:6379), "
                            "`auto`, or no value for a local Ray")
    return host, int(port)


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise BonbenchError("--ray needs the ray package: pip install 'bonbench[ray]' (or drop --ray)") from None
    return ray


def _no_answer(address: str) -> BonbenchError:
    return BonbenchError(f"no Ray cluster answers at {address}: start one with `ray start --head` or drop --ray")


def connect(options: RayOptions) -> Any:
    """Join (or start) the cluster of ``options`` once per process and return the ``ray`` module.

    Already connected (a second run in one process, or a caller that called ``ray.init`` itself):
    the existing connection is used.
    """
    ray = _ray()
    if ray.is_initialized():
        return ray
    common: dict[str, Any] = dict(logging_level=logging.WARNING, configure_logging=True)
    if options.address == LOCAL:
        # workers inherit this process's environment (PYTHONPATH included), so they import bonbench as it does
        ray.init(include_dashboard=False, **common)
        return ray
    # `auto` with $RAY_ADDRESS set means that address; without it Ray looks for a head started on this
    # machine and fails at once when there is none
    probe = os.environ.get("RAY_ADDRESS", "") if options.address == AUTO else options.address
    if probe and probe != AUTO:
        host, port = _host_port(probe)
        try:
            socket.create_connection((host, port), timeout=options.connect_timeout_s).close()
        except OSError:
            raise _no_answer(probe) from None
    try:
        ray.init(address=options.address, **common)
    except ConnectionError as exc:  # `auto` with a stale address file, or a head that went away since the probe
        raise _no_answer(options.address) from exc
    return ray


def shutdown() -> None:
    """Leave the cluster (a local Ray is stopped with it)."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def alive_nodes(ray: Any) -> list[dict[str, Any]]:
    """The cluster's live nodes (``ray.nodes()`` entries), head first as Ray lists them."""
    return [n for n in ray.nodes() if n.get("Alive")]


def cluster_gpus(ray: Any) -> int:
    return int(ray.cluster_resources().get("GPU", 0))
