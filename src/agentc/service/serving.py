"""The coordinator under uvicorn: one set of server options, for ``serve`` (one process or
forked workers) and for the benchmarks that serve the same app another way
(``bench/serve_variant.py``)."""

from __future__ import annotations

import gc
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


def settle_heap() -> None:
    """Take what is alive now (the imported modules, the app, its routes and models: nearly
    all of the process's objects) out of the garbage collector's view, just before serving.

    A full collection scans every tracked object while holding the GIL, so every request
    waits for it: with the startup heap in view one took about 100 ms, several times a
    minute under load, and set the latency's tail; afterwards about 4 ms
    (docs/benchmarks.md). The startup heap holds no garbage to find. In forked workers the
    master's frozen objects are also never written by a child's collector, so their pages
    stay shared."""
    gc.collect()
    gc.freeze()
