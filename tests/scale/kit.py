"""Kit for the several-hosts test: supervisor "hosts" in network namespaces of their own, each
reaching the service through a veth pair, and a PostgreSQL that can be restarted in place."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.kit import pg

RELAY = [sys.executable, "-m", "tests.scale.relay"]
REPO = Path(__file__).resolve().parents[2]
NS_PORT = 18080  # the service's port as seen from inside each host's namespace


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


def _wait_listening(proc: subprocess.Popen[bytes], what: str) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if b"listening" not in line:
        raise RuntimeError(f"{what} did not start: {line!r}")


@dataclass
class Host:
    """One network namespace joined to the root namespace by a veth pair (10.231.N.0/30): a
    forwarder on the root side's address to the service processes, and one on the namespace's
    loopback to the root side, so the loop inside sees the service on loopback."""

    index: int
    tag: str
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def netns(self) -> str:
        return f"agc{self.tag}h{self.index}"

    @property
    def outer(self) -> str:
        return f"agc{self.tag}{self.index}a"

    @property
    def inner(self) -> str:
        return f"agc{self.tag}{self.index}b"

    @property
    def outer_address(self) -> str:
        return f"10.231.{self.index}.1"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{NS_PORT}"

    def exec(self) -> list[str]:
        return ["ip", "netns", "exec", self.netns]

    def up(self, service_ports: list[int]) -> None:
        sh("ip", "netns", "add", self.netns)
        sh("ip", "link", "add", self.outer, "type", "veth", "peer", "name", self.inner)
        sh("ip", "link", "set", self.inner, "netns", self.netns)
        sh("ip", "addr", "add", f"{self.outer_address}/30", "dev", self.outer)
        sh("ip", "link", "set", self.outer, "up")
        inside = self.exec()
        sh(*inside, "ip", "addr", "add", f"10.231.{self.index}.2/30", "dev", self.inner)
        sh(*inside, "ip", "link", "set", self.inner, "up")
        sh(*inside, "ip", "link", "set", "lo", "up")
        targets = [f"127.0.0.1:{p}" for p in service_ports]
        self._relay([], f"{self.outer_address}:{NS_PORT}", *targets)
        self._relay(inside, f"127.0.0.1:{NS_PORT}", f"{self.outer_address}:{NS_PORT}")

    def _relay(self, prefix: list[str], *args: str) -> None:
        proc = subprocess.Popen(
            [*prefix, *RELAY, *args],
            stdout=subprocess.PIPE,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        self.processes.append(proc)
        _wait_listening(proc, f"relay {args}")

    def cut(self) -> None:
        sh("ip", "link", "set", self.outer, "down")

    def mend(self) -> None:
        sh("ip", "link", "set", self.outer, "up")

    def down(self) -> None:
        for proc in self.processes:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        subprocess.run(["ip", "link", "del", self.outer], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True)


def restart_pg(server: pg.PgServer) -> None:
    """Stop PostgreSQL abruptly (every connection is cut) and start it again on its port."""
    pg.halt(server)
    pg.resume(server)
