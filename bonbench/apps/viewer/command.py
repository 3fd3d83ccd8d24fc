"""``bonbench view``'s handler: find the runs, then serve them or write the bundle.

What it does not do: render (``site``, ``pages``) or speak HTTP (``server``).
"""

from __future__ import annotations

import argparse
import sys

from bonbench.apps.viewer.bundle import write_bundle
from bonbench.apps.viewer.checkpoints import CheckpointView, find_checkpoints
from bonbench.apps.viewer.prompts import TaskTexts
from bonbench.apps.viewer.runs import RunView, find_runs
from bonbench.apps.viewer.server import bind, check_host, serve, url_of
from bonbench.apps.viewer.shards import find_sharded
from bonbench.apps.viewer.site import Site
from bonbench.apps.viewer.viewer_flags import ViewRequest
from bonbench.core import settings
from bonbench.core.errors import BonbenchError


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def selected(request: ViewRequest) -> tuple[list[RunView], list[CheckpointView]]:
    """The runs and checkpoints under ``request.paths`` that pass ``--task`` / ``--model`` (a
    checkpoint: its task); a folder with neither, or nothing left, is a one-line error."""
    runs = find_runs(request.paths, keep=not request.no_cache)
    checkpoints = find_checkpoints(request.paths, taken=[r.id for r in runs])
    for folder in request.paths:
        if not any(x.allowed == folder.resolve() for x in [*runs, *checkpoints]) and not find_sharded([folder]):
            raise BonbenchError(f"no runs under {folder}; pass a run directory, a results tree that holds "
                                "runs/<task>/<model>/<hash>/ (written by `bonbench run`), or a checkpoint folder")
    keep = [r for r in runs if (not request.tasks or r.task in request.tasks)
            and (not request.models or r.model in request.models or r.model_slug in request.models)]
    kept_checkpoints = [c for c in checkpoints if not request.tasks or c.train_config().get("task") in request.tasks]
    if not keep and not kept_checkpoints and (runs or checkpoints):
        have = sorted({f"{r.task} / {r.model}" for r in runs})
        raise BonbenchError(f"no run matches --task / --model (the runs: {', '.join(have)[:300]})")
    return keep, kept_checkpoints


def view(request: ViewRequest) -> int:
    """Serve the runs ``request`` names until Ctrl-C, or write them as a bundle (``--static``)."""
    runs, checkpoints = selected(request)
    sharded = [r for r in find_sharded(request.paths) if not request.tasks or r.task in request.tasks]
    site = Site(runs, TaskTexts(request.data_dir), report=_stderr, limit=request.limit, checkpoints=checkpoints,
                progressive=request.static is None, sharded=sharded)
    if request.static is not None:
        pages, size = write_bundle(site, request.static, int(request.max_mb * 1e6))
        print(f"{pages} pages ({size / 1e6:.1f} MB): open {request.static / 'index.html'}")
        return 0
    if request.limit is not None:
        raise BonbenchError("--limit applies to --static bundles; the server shows every problem")
    sock = bind(check_host(request.host), request.port)
    what = (f"{len(runs)} run(s)" + (f" and {len(checkpoints)} checkpoint(s)" if checkpoints else "")
            + (f" ({len(sharded)} sharded run(s) not merged yet: listed with `bonbench merge`)" if sharded else ""))
    print(f"serving {what} at {url_of(sock)} (read-only; Ctrl-C stops)", flush=True)
    try:
        serve(site, sock)
    except KeyboardInterrupt:
        pass  # uvicorn has stopped and closed its connections; it re-raises the signal it caught
    finally:
        sock.close()
    _stderr("viewer stopped")
    return 0


def cmd_view(args: argparse.Namespace) -> int:
    return view(settings.from_args(ViewRequest, args))
