"""The coordinator under uvicorn with a chosen event loop and HTTP parser, for lease_ops.py.

`agent-coordinator-server serve` runs uvicorn with its defaults ("auto": uvloop and httptools,
both installed with uvicorn[standard]); this serves the same app with, e.g., asyncio and h11,
to compare them. The database must exist and be migrated.

    python bench/serve_variant.py DATABASE PORT LOOP HTTP   (asyncio|uvloop, h11|httptools)
"""

from __future__ import annotations

import sys

import uvicorn

from agentc.service.app import create_app
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
    uvicorn.run(
        create_app(settings),
        host="127.0.0.1",
        port=int(port),
        loop=loop,
        http=http,
        log_level="warning",
        access_log=False,
        server_header=False,
        date_header=False,
    )


if __name__ == "__main__":
    main()
