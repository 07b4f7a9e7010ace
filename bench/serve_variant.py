"""The coordinator under another ASGI server set-up, for lease_ops.py.

`agent-coordinator-server serve` runs uvicorn with its defaults ("auto": uvloop and httptools,
both installed with uvicorn[standard]); this serves the same app with, e.g., uvicorn on asyncio
and h11 (with the server's other options, agentc.service.serving), or under granian (a Rust HTTP
server; a dev dependency, for this comparison only), to compare them. The database must exist
and be migrated.

    python bench/serve_variant.py DATABASE PORT LOOP HTTP   (asyncio|uvloop, h11|httptools)
    python bench/serve_variant.py DATABASE PORT granian LOOP   (asyncio|uvloop: granian's loop)

granian runs one worker process (its own supervisor is the parent), with its default single
Rust runtime thread; the app is built in the worker from the settings this process was given.
"""

from __future__ import annotations

import os
import sys

import uvicorn

from agentc.service.app import create_app
from agentc.service.serving import settle_heap, uvicorn_config
from agentc.service.settings import ServerSettings

_ENV = "AGENTC_BENCH_VARIANT"  # "DATABASE PORT", for granian's worker


def _settings(database: str, port: str) -> ServerSettings:
    return ServerSettings(
        database=database,
        public_origin=f"http://127.0.0.1:{port}",
        listen=f"127.0.0.1:{port}",
        allow_insecure_loopback=True,
    )


def granian_app() -> object:
    """The app factory granian's worker calls (settings from the environment)."""
    database, port = os.environ[_ENV].split(" ", 1)
    app = create_app(_settings(database, port))
    settle_heap()  # as `serve` does
    return app


def _granian(database: str, port: str, loop: str) -> None:
    from granian import Granian
    from granian.constants import Interfaces, Loops

    os.environ[_ENV] = f"{database} {port}"
    here = os.path.dirname(os.path.abspath(__file__))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))
    sys.path.insert(0, here)
    Granian(
        "serve_variant:granian_app",
        factory=True,
        address="127.0.0.1",
        port=int(port),
        interface=Interfaces.ASGI,
        workers=1,
        loop=Loops(loop),
        log_level="warning",  # type: ignore[arg-type]
        log_access=False,
    ).serve()


def main() -> None:
    database, port, loop, http = sys.argv[1:5]
    if loop == "granian":
        _granian(database, port, http)
        return
    app = create_app(_settings(database, port))
    settle_heap()  # as `serve` does
    uvicorn.Server(uvicorn_config(app, "127.0.0.1", int(port), loop=loop, http=http)).run()


if __name__ == "__main__":
    main()
