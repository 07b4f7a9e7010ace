"""The model gateway ``agentc up`` runs for a real harness (docs/gateway.md).

The harness's credential (found by :mod:`agentc.up.harnesses`) is copied to
``<state>/gateway/credentials/<upstream>`` (0600); the gateway listens on a free loopback port
and its control socket is ``<state>/gateway/control.sock`` however long that path is (it is
bound and reached through its directory, never moved to a shared directory another account
could create first). The supervisor relays each launch's ``127.0.0.1:8788`` to it and hands
the harness a per-launch sentinel, never the credential. Ledger and vendor state are in
``<state>/gateway``.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

from agentc.files import write_atomic
from agentc.files.toml import dump_toml
from agentc.up.harnesses import ModelAccess
from agentc.up.layout import Layout

INNER = "127.0.0.1:8788"  # the gateway's address inside every launch


@dataclass(frozen=True)
class GatewaySetup:
    config: Path
    address: str
    control: Path
    ledger: Path
    vendors: Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def write_gateway(layout: Layout, access: ModelAccess) -> GatewaySetup:
    root = layout.root.resolve() / "gateway"
    (root / "credentials").mkdir(mode=0o700, parents=True, exist_ok=True)
    credential = root / "credentials" / access.upstream
    write_atomic(credential, (access.secret + "\n").encode(), mode=0o600)
    port = free_port()
    setup = GatewaySetup(
        root / "gateway.toml",
        f"127.0.0.1:{port}",
        root / "control.sock",
        root / "ledger.jsonl",
        root / "vendors.json",
    )
    tables: dict[tuple[str, ...], dict[str, object]] = {
        (): {
            "host": "127.0.0.1",
            "port": port,
            "control_socket": setup.control,
            "ledger": setup.ledger,
            "vendors": setup.vendors,
            "log": root / "gateway.jsonl",
            "launch_logs": layout.launch_logs.resolve(),
        },
        ("upstreams", access.upstream): {
            "api": access.api,
            "base_url": access.base_url,
            "credential_file": credential,
        },
    }
    write_atomic(setup.config, dump_toml(tables), mode=0o600)
    return setup
