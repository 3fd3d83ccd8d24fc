"""``bonbench view``'s server: the site's pages over HTTP on this machine only, read-only.

Built on Starlette and served by uvicorn (both already in the tree through vLLM, now declared). The
app answers GET and HEAD of the site's addresses (``Site.render``) and nothing else: any other
method is 405, an unknown address 404. It binds a loopback address only (127.0.0.1 by default;
``check_host`` refuses any other: reach it from another machine through an SSH tunnel), and it
answers only requests whose Host header names this machine, so a web page elsewhere cannot reach it
by DNS rebinding. Every answer carries the pages' Content-Security-Policy and is not cached.

``bind`` opens the socket before the server starts, so a port in use is one line naming ``--port``;
``serve`` runs until Ctrl-C and returns.

What it does not do: decide what a page shows (``site``, ``pages``) or write anything.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import threading

import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from bonbench.apps.viewer.pages import csp
from bonbench.apps.viewer.site import Site
from bonbench.core.errors import BonbenchError

HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
           "Cache-Control": "no-store"}


def check_host(host: str) -> str:
    """``host`` when it is a loopback address (or ``localhost``); anything else is a one-line error."""
    if host == "localhost":
        return host
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise BonbenchError(f"--host {host}: the viewer serves on this machine only (127.0.0.1 or ::1); from another "
                            "machine use an SSH tunnel (ssh -L 7580:127.0.0.1:7580 HOST), or share a --static bundle")
    return host


def app(site: Site) -> Starlette:
    """The ASGI app serving ``site``."""
    lock = threading.Lock()  # pages are rendered in a thread pool; the site's caches are not thread-safe

    def view(request: Request) -> Response:
        address = request.path_params["address"]
        with lock:
            body = site.render(address)
        headers = {**HEADERS, "Content-Security-Policy": csp()}
        if body is None:
            return PlainTextResponse("no such page in the runs this viewer was given\n", status_code=404, headers=headers)
        return HTMLResponse(body, headers=headers)

    hosts = ["127.0.0.1", "localhost", "[::1]", "::1"]
    return Starlette(routes=[Route("/{address:path}", view, methods=["GET", "HEAD"])],
                     middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=hosts)])


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port`` (port 0: one the system picks)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise BonbenchError(f"port {port} is in use on {host}; choose another with --port (--port 0 picks a free "
                                "one)") from None
        raise BonbenchError(f"cannot listen on {host}:{port} ({exc.strerror}); choose another --port") from None
    sock.listen(128)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def serve(site: Site, sock: socket.socket) -> None:
    """Serve ``site`` on ``sock`` until Ctrl-C (uvicorn stops cleanly and returns)."""
    config = uvicorn.Config(app(site), log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])
