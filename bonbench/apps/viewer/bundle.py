"""``bonbench view --static OUT``: the site as a folder of pages that opens from ``file://``.

The bundle holds exactly the pages the server would answer (``Site.addresses``), with the same
relative links, inline style and inline script, so it needs no server and loads nothing from the
network: open ``OUT/index.html``. It is written into a staging folder and moved into ``OUT`` only
once whole (``bonbench.core.outputs.staged_dir``). Past ``max_bytes`` it stops before moving
anything, with one line saying how to cut it: fewer problems per run (``--limit``) or fewer runs
(``--task``, ``--model``, or one run directory instead of a tree).

What it does not do: decide what a page shows (``site``, ``pages``).
"""

from __future__ import annotations

from pathlib import Path

from bonbench.apps.viewer.site import Site
from bonbench.core import outputs
from bonbench.core.errors import BonbenchError


def write_bundle(site: Site, out: Path, max_bytes: int) -> tuple[int, int]:
    """Write every page of ``site`` under ``out``; returns (pages, bytes)."""
    if out.exists() and not out.is_dir():
        raise BonbenchError(f"--static {out} is a file; name a folder for the bundle")
    total = 0
    addresses = site.addresses()
    with outputs.staged_dir(out) as stage:
        for address in addresses:
            body = site.render(address)
            assert body is not None, f"the site lists {address} but has no page there"
            data = body.encode("utf-8")
            total += len(data)
            if total > max_bytes:
                raise BonbenchError(
                    f"the bundle would pass {max_bytes / 1e6:g} MB ({len(addresses)} pages); keep fewer problems per run "
                    "with --limit N, fewer runs with --task / --model (or one run directory), or raise --max-mb")
            path = stage / address
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    return len(addresses), total
