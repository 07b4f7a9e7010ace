"""Hostile local programs against the egress proxy's connection slots (issue 25).

A local program once held 530 idle connections to the proxy from many 127/8 sources, and every
launch's next connection was refused (503). Now the proxy listens only on a Unix socket: the
kernel names each connection's account, and a connection must name its launch before it holds
a slot. Each test plays the hostile program for real while a launch's connection, relayed by a
real host half (``HostRelay``, which names the launch), still gets through. The resolver and
connector are the kit's (nothing leaves loopback).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentc.egress import egress_command
from agentc.egress.addresses import endpoint
from agentc.egress.egress_policy import launch_line
from agentc.egress.host_relay import HostRelay
from agentc.egress.pipe import Streams
from tests.egress.kit import HELLO, LAUNCH, ask, connect, open_as, run_proxy

# Another account's program: opens N connections to the proxy at once, sends nothing, and
# counts those the proxy closed (it waits up to a minute for each).
OTHER_ACCOUNT = """
import socket, sys
path, n = sys.argv[1], int(sys.argv[2])
held = []
for _ in range(n):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)  # blocking: waits while the proxy's accept queue is full
    s.settimeout(60)
    held.append(s)
closed = 0
for s in held:
    try:
        closed += s.recv(1) == b""
    except ConnectionResetError:
        closed += 1
    except TimeoutError:
        pass
print(closed, n)
"""


# An account the proxy serves (host mode's role account, ``--allow-user``): names a launch,
# asks for a tunnel, sends a ClientHello and prints what the upstream greeted it with.
SERVED_ACCOUNT = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(60)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"CONNECT allowed.test:443 HTTP/1.1\\r\\n\\r\\n")
answer = s.makefile("rb")
print(answer.readline().decode().strip())
answer.readline()  # the blank line ending the head
s.sendall(bytes.fromhex(sys.argv[3]))
print(answer.readline().decode().strip())
"""


@pytest.fixture
def net_dir() -> Iterator[Path]:
    """Where the launch's host half puts its sockets (short: they must fit sun_path)."""
    where = Path(tempfile.mkdtemp(prefix="egh", dir="/tmp"))
    yield where / "net"
    shutil.rmtree(where, ignore_errors=True)


def relay_to(path: str, net: Path, launch: str = LAUNCH) -> HostRelay:
    """A launch's host half relaying ``proxy`` to the proxy's socket, naming ``launch``."""
    return HostRelay(net, [endpoint("proxy", "127.0.0.1:3128", f"unix:{path}", launch=launch)])


async def through_relay(relay: HostRelay) -> tuple[str, bytes]:
    """CONNECT allowed.test as the harness does, through the relay; the status and what the
    upstream answered to a ClientHello."""
    reader, writer = await asyncio.open_unix_connection(str(relay.socket_path("proxy")))
    writer.write(connect("allowed.test"))
    status = (await reader.readline()).decode().rstrip("\r\n")
    while (await reader.readline()) not in (b"\r\n", b""):
        pass
    greeting = b""
    if status.endswith(" 200 Connection Established"):
        writer.write(HELLO)
        greeting = await reader.readline()
    writer.close()
    await writer.wait_closed()
    return status, greeting


@pytest.mark.root
def test_another_account_is_closed_at_once_and_holds_nothing(net_dir: Path) -> None:
    """Host mode's shape (socket 0666 in a directory anyone may traverse, so role accounts can
    connect): another account's 300 connections are each closed at once, unread and unlogged,
    while the launch's relayed connection gets through with the proxy's 4 slots."""
    got: dict[str, Any] = {}

    async def scenario(path: str, _resolver: Any, _connector: Any, log: Any) -> None:
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        hostile = await asyncio.create_subprocess_exec(
            *argv, "/usr/bin/python3", "-c", OTHER_ACCOUNT, path, "300",
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        with relay_to(path, net_dir) as relay:
            got["relayed"] = await through_relay(relay)
        out, err = await hostile.communicate()
        got["hostile"] = (hostile.returncode, out.decode().split(), err.decode())

    # A minute to name a launch: only the account check can close the hostile ones sooner.
    _, _, log = run_proxy(
        scenario, with_upstream=True, mode=0o666, max_clients=4, identify_timeout=600
    )
    assert got["hostile"] == (0, ["300", "300"], ""), got["hostile"]
    assert got["relayed"] == ("HTTP/1.1 200 Connection Established", b"hi\n")
    assert [line["decision"] for line in log] == ["allow"]  # the account's tries: not logged
    assert log[0]["launch"] == LAUNCH and log[0]["client"].startswith("uid 0 ")


@pytest.mark.root
def test_an_account_named_with_allow_user_is_served() -> None:
    """``--allow-user nobody`` adds that account's uid; its relay's connection is served."""
    got: dict[str, str] = {}
    accounts = egress_command.served_accounts(["nobody"])
    assert accounts == {0, os.geteuid(), 65534}

    async def scenario(path: str, *_args: Any) -> None:
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        line = launch_line(LAUNCH).decode()
        served = await asyncio.create_subprocess_exec(
            *argv, "/usr/bin/python3", "-c", SERVED_ACCOUNT, path, line, HELLO.hex(),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        out, err = await served.communicate()
        got["out"], got["err"] = out.decode(), err.decode()

    _, _, log = run_proxy(scenario, with_upstream=True, mode=0o666, accounts=accounts)
    assert got == {"out": "HTTP/1.1 200 Connection Established\nhi\n", "err": ""}
    [line] = log
    assert line["decision"] == "allow" and line["launch"] == LAUNCH
    assert line["client"].startswith("uid 65534 ")


def test_connections_that_never_name_a_launch_or_sit_at_a_cap_starve_no_launch(
    net_dir: Path,
) -> None:
    """The same account's program holds 300 connections that never name a launch, 20 that name
    it halfway (a slow identification), and another launch's whole per-launch cap of open
    tunnels; with 4 slots in all, the launch's relayed connection still gets through."""
    got: dict[str, Any] = {}
    squatted = str(uuid.uuid4())

    async def scenario(path: str, _resolver: Any, _connector: Any, log: Any) -> None:
        silent: list[Streams] = [await open_as(path, None) for _ in range(300)]
        halfway: list[Streams] = []
        for _ in range(20):
            reader, writer = await open_as(path, None)
            writer.write(b"agentc-launch 1234")
            halfway.append((reader, writer))
        squatters = [await ask(path, connect("allowed.test"), squatted) for _ in range(2)]
        for _, _, (_reader, writer) in squatters:
            writer.write(HELLO)
        got["squatters"] = [status for status, _, _ in squatters]
        got["over the cap"], _, refused = await ask(path, connect("allowed.test"), squatted)
        with relay_to(path, net_dir) as relay:
            got["relayed"] = await through_relay(relay)
        got["logged"] = [(line["status"], line["launch"]) for line in log]
        for _, writer in [*silent, *halfway, *(s[2] for s in squatters), refused]:
            writer.close()
            await writer.wait_closed()

    run_proxy(scenario, with_upstream=True, max_clients=4, max_per_launch=2, identify_timeout=600)
    assert got["squatters"] == ["HTTP/1.1 200 Connection Established"] * 2
    assert got["over the cap"].startswith("HTTP/1.1 503 ")
    assert got["relayed"] == ("HTTP/1.1 200 Connection Established", b"hi\n")
    # The 320 unnamed connections were all still waiting: they never held a slot.
    assert got["logged"] == [(200, squatted)] * 2 + [(503, squatted), (200, LAUNCH)]


@pytest.mark.parametrize(
    ("first", "status", "reason"),
    [
        (b"", 408, "did not name its launch in time"),
        (b"agentc-launch " + LAUNCH.encode(), 408, "in time"),  # no newline: still unnamed
        (b"CONNECT allowed.test:443 HTTP/1.1\r\n\r\n", 400, "not a launch's relay"),
        (b"agentc-launch not-a-uuid\n", 400, "not a launch's relay"),
        (b"agentc-launch " + LAUNCH.upper().encode() + b"\n", 400, "not a launch's relay"),
        (b"x" * 9000, 400, "not a launch's relay"),  # no newline within the head limit
    ],
    ids=["silent", "unfinished", "plain request", "not a uuid", "upper case", "oversized"],
)
def test_a_connection_that_does_not_name_its_launch_is_refused(
    first: bytes, status: int, reason: str
) -> None:
    got: dict[str, Any] = {}

    async def scenario(path: str, *_args: Any) -> None:
        reader, writer = await open_as(path, None)
        writer.write(first)
        got["answer"] = await reader.read()
        writer.close()

    _, connector, log = run_proxy(scenario, identify_timeout=0.3)
    assert got["answer"].startswith(f"HTTP/1.1 {status} ".encode())
    assert reason.encode() in got["answer"]
    assert connector.calls == []
    [line] = log
    assert (line["status"], line["launch"], line["method"]) == (status, None, None)
    assert reason in line["reason"]
