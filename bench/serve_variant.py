"""The coordinator under uvicorn with a chosen event loop and HTTP parser, for lease_ops.py.

`agent-coordinator-server serve` runs uvicorn with its defaults ("auto": uvloop and httptools,
both installed with uvicorn[standard]); this serves the same app with, e.g., asyncio and h11,
to compare them, with the server's other options (agentc.service.serving). The database must
exist and be migrated.

    python bench/serve_variant.py DATABASE PORT LOOP HTTP   (asyncio|uvloop, h11|httptools)
"""

from __future__ import annotations

import sys

import uvicorn

from agentc.service.app import create_app
from agentc.service.serving import uvicorn_config
from agentc.service.settings import ServerSettings


def main() -> None:
    database, port, loop, http = sys.argv[1:5]
    origin = f"http://127.0.0.1:{port}"
    settings = ServerSettings(
        database=database,
        public_origin=origin,
        listen=f"127.0.0.1:{port}",
        allow_insecure_loopback=True,
    )
    app = create_app(settings)
    uvicorn.Server(uvicorn_config(app, "127.0.0.1", int(port), loop=loop, http=http)).run()


if __name__ == "__main__":
    main()
