"""``nicbench serve``: the archive in a browser."""

from __future__ import annotations

from pathlib import Path

import click

from ..web.server import serve as run_server
from .options import store_location, store_option


@click.command("serve")
@store_option
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; anything but loopback exposes the archive (a warning says so).")
@click.option("--port", type=click.IntRange(0, 65535), default=8787, show_default=True,
              help="Port (0: any free one; the URL is printed).")
@click.option("--allow-host", "allow_hosts", multiple=True,
              help="Another name browsers may use for this server (the Host header check refuses others).")
@click.option("--cache", type=click.Path(path_type=Path), default=None,
              help="Where rendered reports are cached (default: $XDG_CACHE_HOME/nicbench/reports).")
def serve(store: str | None, host: str, port: int, allow_hosts: tuple[str, ...], cache: Path | None) -> None:
    """Serve the dashboard: runs, run reports, live runs, compare, trend."""
    run_server(store_location(store), host=host, port=port, allow_hosts=allow_hosts, cache_root=cache)
