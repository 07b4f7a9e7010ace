"""The coordinator under uvicorn: one set of server options, for ``serve`` (one process or
forked workers) and for the benchmarks that serve the same app another way
(``bench/serve_variant.py``)."""

from __future__ import annotations

from typing import Any

import uvicorn


def uvicorn_config(app: Any, host: str, port: int, **options: Any) -> uvicorn.Config:
    """The app at ``host:port``: warnings only, no access log, no proxy headers (the service
    reads its one trusted header itself), no Server or Date header. ``options`` are further
    uvicorn options (a benchmark's event loop and HTTP parser)."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        proxy_headers=False,
        server_header=False,
        date_header=False,
        **options,
    )
