"""Running the dashboard: bind the socket first (a port in use is one line,
not a traceback), then hand it to uvicorn."""

from __future__ import annotations

import errno
import ipaddress
import secrets
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

import uvicorn

from ..core.errors import InputError, PreflightError
from ..store.archive import Archive
from ..store.location import StoreLocation
from .app import create_app

LOOPBACK_NAMES = ("127.0.0.1", "localhost")


def bind(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise InputError(f"cannot resolve {host!r}: {e.strerror}", where="--host", hint="an address such as "
                                                                                        "127.0.0.1") from None
    family, _, _, _, addr = infos[0]
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(addr)
        s.listen(128)
    except OSError as e:
        s.close()
        if e.errno == errno.EADDRINUSE:
            raise PreflightError(f"port {port} is in use", where=f"{host}:{port}",
                                 hint="pick another with --port (0: any free port)") from None
        if e.errno in (errno.EACCES, errno.EPERM):
            raise PreflightError(f"not allowed to listen on port {port}", where=f"{host}:{port}",
                                 hint="use a port above 1023") from None
        raise PreflightError(f"cannot listen: {e.strerror}", where=f"{host}:{port}") from None
    s.set_inheritable(True)
    return s


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(loc: StoreLocation, *, host: str = "127.0.0.1", port: int = 8787, allow_hosts: Sequence[str] = (),
          cache_root: Path | None = None, token: str | None = None) -> None:
    """Serve the archive at ``loc`` until interrupted."""
    Archive.open(loc, create=False).close()          # a bad store is one line before anything listens
    sock = bind(host, port)
    port = sock.getsockname()[1]
    token = token or secrets.token_urlsafe(24)
    names = list(dict.fromkeys([*LOOPBACK_NAMES, *([host] if host not in ("0.0.0.0", "::") else []),
                                *allow_hosts]))
    if not is_loopback(host):
        print(f"nicbench: warning: serving on {host}: anyone who can reach this machine can read the archive; "
              f"requests must name one of: {', '.join(names)} (--allow-host adds names)", file=sys.stderr)
    app = create_app(loc, token=token, allowed_hosts=names, cache_root=cache_root)
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    print(f"nicbench: serving {loc.display} on http://{shown}:{port}/", flush=True)
    print(f"nicbench: token for changes (tagging runs): {token}", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=2,
                            lifespan="off")
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
