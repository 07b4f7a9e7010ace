"""A TCP forwarder run as its own process: ``python -m tests.scale.relay LISTEN TARGET...``.

Each accepted connection goes to the first target that accepts it, in turn from a rotating
start (so two service processes share the load, and a dead one is skipped); bytes are copied
both ways until either side closes. Used on both ends of a host's veth pair: in the root
namespace on the veth address (to the service processes' loopback ports), and inside the
host's namespace on its loopback (to the root side's veth address)."""

from __future__ import annotations

import asyncio
import itertools
import sys


def _split(address: str) -> tuple[str, int]:
    host, port = address.rsplit(":", 1)
    return host, int(port)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def main(listen: str, targets: list[tuple[str, int]]) -> None:
    turn = itertools.count()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        start = next(turn)
        for i in range(len(targets)):
            host, port = targets[(start + i) % len(targets)]
            try:
                up_reader, up_writer = await asyncio.wait_for(
                    asyncio.open_connection(host, port), timeout=5
                )
            except (OSError, TimeoutError):
                continue
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            return
        writer.close()

    host, port = _split(listen)
    server = await asyncio.start_server(handle, host, port, reuse_address=True)
    print("listening", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], [_split(t) for t in sys.argv[2:]]))
