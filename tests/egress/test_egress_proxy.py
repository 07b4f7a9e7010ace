"""The egress proxy end to end on its Unix socket.

The resolver is a table (no real name is ever resolved), the address policy treats only
127.0.0.1 as public on top of the real policy, and the connector refuses anything but
127.0.0.1, recording every attempt: refused cases assert it was never called, so even a
broken check could not connect anywhere off this machine (``tests.egress.kit``). Clients name their
launch first, as the relay's host half does (``agentc-launch <id>``); the hostile local
programs that do not, or that are another account, are in ``test_egress_hostile.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from ipaddress import ip_address
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agentc.egress import egress, egress_command
from agentc.files.launchlog import LaunchLogs, ensure_directory, read_log
from tests.egress.kit import (
    HELLO,
    LAUNCH,
    Connector,
    Resolver,
    ask,
    client_hello,
    connect,
    refused,
    run_proxy,
)


async def _tunnel_hello(path: str, host: str = "Allowed.Test") -> None:
    """One tunnel to ``host``: the ClientHello and "hello" up, the upstream's echo down."""
    status, _head, (reader, writer) = await ask(path, connect(host))
    assert status == "HTTP/1.1 200 Connection Established"
    writer.write(HELLO + b"hello")
    assert await reader.readline() == b"hi\n"
    writer.write_eof()
    assert await reader.read() == b"up:" + HELLO + b"hello"
    writer.close()
    await writer.wait_closed()


def test_allowed_connect_tunnels_both_ways() -> None:
    async def scenario(path: str, resolver: Resolver, connector: Connector, log: Any) -> None:
        await _tunnel_hello(path)

    resolver, connector, log = run_proxy(scenario, with_upstream=True)
    assert resolver.calls == [("allowed.test", 443)]
    assert connector.calls == [("127.0.0.1", 443)]
    [line] = log
    assert line["decision"] == "allow" and line["allowed"] is True and line["status"] == 200
    assert line["host"] == "allowed.test" and line["port"] == 443
    assert line["address"] == "127.0.0.1"
    assert line["client"] == f"uid {os.geteuid()} pid {os.getpid()}"
    assert line["launch"] == LAUNCH
    assert line["time"].endswith("Z")
    json.dumps(line)  # one JSON line


def test_many_concurrent_tunnels() -> None:
    async def one(path: str, i: int) -> bool:
        status, _, (reader, writer) = await ask(path, connect(f"h{i}.suffix.test"))
        assert status.endswith("200 Connection Established")
        hello = client_hello(f"h{i}.suffix.test")
        writer.write(hello)
        await reader.readline()
        writer.write(b"%d" % i)
        writer.write_eof()
        data = await reader.read()
        writer.close()
        await writer.wait_closed()
        return data == b"up:" + hello + b"%d" % i

    async def scenario(path: str, *_: Any) -> None:
        replies = await asyncio.gather(*(one(path, i) for i in range(50)))
        assert replies == [True] * 50

    table = {f"h{i}.suffix.test": ["127.0.0.1"] for i in range(50)}
    _, connector, log = run_proxy(scenario, table, with_upstream=True)
    assert len(connector.calls) == 50 and len(log) == 50


REFUSALS = [
    # (name, request, resolver answers, status, reason fragment, logged address, resolved?)
    ("unlisted host", connect("evil.test"), None, 403, "not on the allowlist", None, False),
    ("apex of suffix", connect("suffix.test"), None, 403, "not on the allowlist", None, False),
    ("port 80", connect("allowed.test", 80), None, 403, "port 80", None, False),
    ("port 8443", connect("allowed.test", 8443), None, 403, "only 443", None, False),
    ("private", connect("allowed.test"), ["10.0.0.1"], 403, "(private)", "10.0.0.1", True),
    (
        "metadata",
        connect("allowed.test"),
        ["169.254.169.254"],
        403,
        "(link-local)",
        "169.254.169.254",
        True,
    ),
    (
        "v4-mapped loopback",
        connect("allowed.test"),
        ["::ffff:127.0.0.1"],
        403,
        "ipv4-mapped loopback",
        "::ffff:127.0.0.1",
        True,
    ),
    ("cgnat", connect("allowed.test"), ["100.64.0.1"], 403, "(cgnat)", "100.64.0.1", True),
    ("ipv6 ula", connect("allowed.test"), ["fd00::1"], 403, "unique-local", "fd00::1", True),
    (
        "one bad answer spoils all",
        connect("allowed.test"),
        ["127.0.0.1", "10.1.2.3"],
        403,
        "(private)",
        "10.1.2.3",
        True,
    ),
    ("ip literal", connect("127.0.0.1"), None, 403, "not a DNS name", None, False),
    ("ipv6 literal", connect("[::1]"), None, 403, "not a DNS name", None, False),
    ("get", b"GET http://allowed.test/ HTTP/1.1\r\n\r\n", None, 405, "only CONNECT", None, False),
    ("post", b"POST / HTTP/1.1\r\n\r\n", None, 405, "only CONNECT", None, False),
    ("no port", b"CONNECT allowed.test HTTP/1.1\r\n\r\n", None, 400, "host:port", None, False),
    (
        "bad version",
        b"CONNECT allowed.test:443 HTTP/2\r\n\r\n",
        None,
        400,
        "malformed",
        None,
        False,
    ),
    ("not ascii", b"CONNECT \xff:443 HTTP/1.1\r\n\r\n", None, 400, "not ASCII", None, False),
    ("nxdomain", connect("allowed.test"), "missing", 502, "cannot resolve", None, True),
    ("empty answer", connect("allowed.test"), [], 502, "no addresses", None, True),
]


@pytest.mark.parametrize(
    ("request_bytes", "answers", "status", "reason", "address", "resolved"),
    [r[1:] for r in REFUSALS],
    ids=[r[0] for r in REFUSALS],
)
def test_refusals(
    request_bytes: bytes,
    answers: list[str] | str | None,
    status: int,
    reason: str,
    address: str | None,
    resolved: bool,
) -> None:
    got: dict[str, Any] = {}

    async def scenario(path: str, *_: Any) -> None:
        got["status"], got["rest"] = await refused(path, request_bytes)

    table: dict[str, Any] = {} if answers in (None, "missing") else {"allowed.test": answers}
    resolver, connector, log = run_proxy(scenario, table)
    assert got["status"].startswith(f"HTTP/1.1 {status} ")
    assert reason in got["rest"].decode()
    assert b"Connection: close" in got["rest"]
    if status == 405:
        assert b"Allow: CONNECT" in got["rest"]
    assert connector.calls == []  # never connected anywhere
    assert bool(resolver.calls) == resolved  # unlisted names are never even resolved
    [line] = log
    assert line["decision"] == "refuse" and line["allowed"] is False
    assert line["status"] == status
    assert reason in line["reason"]
    assert line["address"] == (address and str(ip_address(address)))


def test_connects_to_the_checked_address_without_re_resolving() -> None:
    """A rebinding resolver (public first, private later) cannot redirect the connection."""

    async def scenario(path: str, *_args: Any) -> None:
        status, _, (reader, writer) = await ask(path, connect("allowed.test"))
        assert status.endswith("200 Connection Established")
        writer.close()
        await writer.wait_closed()

    table = {"allowed.test": [["127.0.0.1"], ["10.0.0.1"]]}
    resolver, connector, _ = run_proxy(scenario, table, with_upstream=True)
    assert resolver.calls == [("allowed.test", 443)]
    assert connector.calls == [("127.0.0.1", 443)]


def test_upstream_connect_failure_is_502_and_logged() -> None:
    got: dict[str, Any] = {}

    async def scenario(path: str, *_args: Any) -> None:
        got["status"], _ = await refused(path, connect("allowed.test"))

    _, connector, log = run_proxy(scenario)  # no upstream: the connector refuses
    assert got["status"] == "HTTP/1.1 502 Bad Gateway"
    assert connector.calls == [("127.0.0.1", 443)]
    assert log[0]["status"] == 502 and log[0]["address"] == "127.0.0.1"


def test_oversized_and_slow_heads() -> None:
    got: dict[str, Any] = {}

    async def scenario(path: str, *_args: Any) -> None:
        got["big"], _ = await refused(
            path, b"CONNECT allowed.test:443 HTTP/1.1\r\nX: " + b"a" * 9000
        )
        # Never finishes its head: answered with 408 once the (short, injected) limit passes.
        got["slow"], _ = await refused(path, b"CONNECT allowed.test:443 HTTP/1.1\r\n")

    _, connector, log = run_proxy(scenario, head_timeout=0.2)
    assert got["big"].startswith("HTTP/1.1 431 ")
    assert got["slow"].startswith("HTTP/1.1 408 ")
    assert connector.calls == []
    assert [line["status"] for line in log] == [431, 408]


def test_connection_limit() -> None:
    got: dict[str, Any] = {}

    async def scenario(path: str, *_args: Any) -> None:
        _, _, (reader, writer) = await ask(path, connect("allowed.test"))
        got["second"], _ = await refused(path, connect("allowed.test"))
        writer.close()
        await writer.wait_closed()

    _, connector, log = run_proxy(scenario, with_upstream=True, max_clients=1)
    assert got["second"].startswith("HTTP/1.1 503 ")
    assert len(connector.calls) == 1


# The TLS server name ---------------------------------------------------------------------


def _tunnel_outcome(
    sent: bytes, host: str = "allowed.test", **options: Any
) -> tuple[bytes, list[dict[str, Any]]]:
    """CONNECT ``host``, send ``sent`` after the 200, EOF; what came back and the log."""
    got: dict[str, bytes] = {}

    async def scenario(path: str, *_args: Any) -> None:
        status, _, (reader, writer) = await ask(path, connect(host))
        assert status.endswith("200 Connection Established")
        writer.write(bytes(sent))
        await writer.drain()
        if sent:
            writer.write_eof()
        got["back"] = await reader.read()
        writer.close()
        await writer.wait_closed()

    table = {host: ["127.0.0.1"]}
    _, _, log = run_proxy(scenario, table, with_upstream=True, **options)
    return got["back"], log


def _records(message: bytes, split: int) -> bytes:
    """A handshake message as two TLS records, split at ``split`` bytes."""
    parts = (message[:split], message[split:])
    return b"".join(b"\x16\x03\x01" + len(p).to_bytes(2, "big") + p for p in parts)


def test_a_matching_server_name_in_two_records_passes() -> None:
    hello = client_hello("allowed.test")
    split = _records(hello[5:], 40)
    back, log = _tunnel_outcome(split)
    assert back == b"hi\nup:" + split  # forwarded unchanged, the upstream's greeting first
    assert [line["decision"] for line in log] == ["allow"]


@pytest.mark.parametrize(
    ("sent", "host", "reason"),
    [
        (client_hello("other.test"), "allowed.test", "differs from the CONNECT host"),
        (client_hello("b.suffix.test"), "a.suffix.test", "differs from the CONNECT host"),
        (client_hello(None), "allowed.test", "no server name"),
        (client_hello("127.0.0.1"), "allowed.test", "no server name"),  # IPs are never SNI
        (b"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "allowed.test", "TLS handshake"),
        (b"\x16\x03\x01\x00\x05\x02\x00\x00\x01\x00", "allowed.test", "not a ClientHello"),
    ],
    ids=["other host", "other allowed host", "no sni", "ip sni", "plain http", "server hello"],
)
def test_a_tunnel_whose_server_name_differs_is_closed(sent: bytes, host: str, reason: str) -> None:
    back, log = _tunnel_outcome(sent, host)
    assert back == egress.TLS_ALERT_UNRECOGNIZED_NAME  # nothing of the upstream's
    [line] = log
    assert line["decision"] == "refuse" and line["status"] == 403
    assert reason in line["reason"], line


def test_a_tunnel_without_a_hello_in_time_is_closed() -> None:
    back, log = _tunnel_outcome(b"", hello_timeout=0.2)
    assert back == egress.TLS_ALERT_UNRECOGNIZED_NAME
    assert [(line["status"], line["decision"]) for line in log] == [(408, "refuse")]


# The per-launch cap ----------------------------------------------------------------------


def test_one_launch_cannot_take_the_whole_client_budget() -> None:
    got: dict[str, Any] = {}

    async def scenario(path: str, *_args: Any) -> None:
        held = [await ask(path, connect("allowed.test")) for _ in range(2)]
        assert all(status.endswith(" 200 Connection Established") for status, _, _ in held)
        got["third"], got["body"] = await refused(path, connect("allowed.test"))
        _, _, (reader, writer) = held.pop()
        writer.close()
        await writer.wait_closed()
        await asyncio.sleep(0.1)  # the proxy notices the close
        status, _, (_reader, again) = await ask(path, connect("allowed.test"))
        got["after"] = status
        for writer in [again, *(streams[1] for _, _, streams in held)]:
            writer.close()

    _, connector, log = run_proxy(scenario, with_upstream=True, max_per_launch=2)
    assert got["third"].startswith("HTTP/1.1 503 ")
    assert b"from this launch" in got["body"]
    assert got["after"].endswith(" 200 Connection Established")  # a closed one frees its slot


def test_other_launches_keep_their_budget() -> None:
    """Launches told apart by the launch each connection names: one at its cap (here from
    many connections of one process) does not refuse another."""
    got: list[str] = []
    other = str(uuid.uuid4())

    async def scenario(path: str, *_args: Any) -> None:
        names = [LAUNCH, LAUNCH, other, other, other]
        conns = [await ask(path, connect("allowed.test"), launch) for launch in names]
        got.extend(status.split(" ")[1] for status, _, _ in conns)
        for _, _, (_r, w) in conns:
            w.close()

    run_proxy(scenario, with_upstream=True, max_per_launch=2)
    assert got == ["200", "200", "200", "200", "503"]


def test_an_idle_tunnel_is_closed() -> None:
    """No byte either way for ``idle_timeout``: both sides are dropped and the slot freed."""
    got: dict[str, Any] = {}

    async def scenario(path: str, *_args: Any) -> None:
        status, _, (reader, writer) = await ask(path, connect("allowed.test"))
        assert status.endswith("200 Connection Established")
        writer.write(HELLO)
        assert await reader.readline() == b"hi\n"  # the tunnel works, then falls silent
        got["after idle"] = await asyncio.wait_for(reader.read(), 30)
        writer.close()
        await asyncio.sleep(0.1)  # the proxy's handler finishes with the closed tunnel
        again = await ask(path, connect("allowed.test"))  # the only slot is free again
        got["again"] = again[0]
        again[2][1].close()

    run_proxy(scenario, with_upstream=True, idle_timeout=0.3, max_per_launch=1)
    assert got["after idle"] == b""  # closed by the proxy, nothing more came through
    assert got["again"].endswith("200 Connection Established")


# The CLI ------------------------------------------------------------------------------------


def _short_dir(mode: int = 0o700) -> Path:
    where = Path(tempfile.mkdtemp(prefix="egc", dir="/tmp"))
    os.chmod(where, mode)
    return where


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--listen", "127.0.0.1:3128"], "No such option '--listen'"),  # no TCP port, ever
        (["--socket", "relative.sock"], "is not absolute"),
        (["--socket", "/run/" + "d" * 30 + "/" + "n" * 90], "longer than 107 bytes"),
        (["--allow", "*.example.com"], "allowlist entry"),
        (["--allow-user", "no-such-account-xyz"], "no such account"),
        (["--idle-timeout", "0"], "--idle-timeout"),
    ],
)
def test_cli_refuses_bad_settings(args: list[str], why: str) -> None:
    result = CliRunner().invoke(egress_command.command, args)
    assert result.exit_code in (1, 2), result.output
    assert why in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("mode", "owner", "why"),
    [
        (0o777, 0, "has mode 0777: another account could replace the socket"),
        (0o1777, 0, "has mode 1777"),  # even sticky: /tmp itself is no place for it
        (0o700, 65534, "is owned by uid 65534"),
    ],
)
@pytest.mark.root
def test_cli_refuses_a_directory_another_account_could_write(
    mode: int, owner: int, why: str
) -> None:
    where = _short_dir(mode)
    try:
        os.chown(where, owner, owner)
        os.chmod(where, mode)
        result = CliRunner().invoke(egress_command.command, ["--socket", f"{where}/p.sock"])
        assert result.exit_code == 1, result.output
        assert why in result.output and "Traceback" not in result.output
        assert list(where.iterdir()) == []  # nothing bound
    finally:
        shutil.rmtree(where)


def _inet_sockets(pid: int) -> list[str]:
    """The TCP and UDP sockets process ``pid`` holds, any address family (bound or not)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target.removeprefix("socket:[").removesuffix("]"))
    found = []
    for table in ("tcp", "tcp6", "udp", "udp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:
                found.append(f"{table} {fields[1]}")
    return found


def test_cli_process_refuses_without_resolving(tmp_path: Any) -> None:
    """The real command: refusals decided before any DNS (unlisted host, port 80); it holds no
    TCP or UDP socket a local program could flood from 127/8 sources, only its Unix socket,
    which is 0600 and removed when it stops."""
    where = _short_dir()
    path = str(where / "proxy.sock")
    log_path = tmp_path / "egress.jsonl"
    argv = [sys.executable, "-m", "agentc.egress.egress_command", "--socket", path]
    try:
        with subprocess.Popen([*argv, "--log", str(log_path)], stderr=subprocess.PIPE) as proc:
            try:

                async def scenario() -> list[str]:
                    for _ in range(500):  # wait until it listens
                        try:
                            _reader, writer = await asyncio.open_unix_connection(path)
                            writer.close()
                            await writer.wait_closed()
                            break
                        except OSError:
                            await asyncio.sleep(0.02)
                    return [
                        (await refused(path, connect("blocked.invalid")))[0],
                        (await refused(path, connect("github.com", 80)))[0],
                    ]

                statuses = asyncio.run(scenario())
                assert oct(os.stat(path).st_mode & 0o777) == "0o600"
                assert _inet_sockets(proc.pid) == []
            finally:
                proc.terminate()
                proc.wait(timeout=30)
        assert not os.path.lexists(path)
    finally:
        shutil.rmtree(where)
    assert statuses == ["HTTP/1.1 403 Forbidden"] * 2
    assert oct(os.stat(log_path).st_mode & 0o777) == "0o600"
    lines = [json.loads(x) for x in log_path.read_text().splitlines()]
    assert [(x["host"], x["port"], x["decision"], x["launch"]) for x in lines] == [
        ("blocked.invalid", 443, "refuse", LAUNCH),
        ("github.com", 80, "refuse", LAUNCH),
    ]


def test_direct_connector_takes_only_numeric_addresses() -> None:
    async def main() -> bytes:
        async def hello(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(b"ok")
            writer.close()

        server = await asyncio.start_server(hello, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            with pytest.raises(ValueError):
                await egress.direct_connector("localhost", port)
            reader, writer = await egress.direct_connector("127.0.0.1", port)
            data = await reader.read()
            writer.close()
            await writer.wait_closed()
            return data
        finally:
            server.close()
            await server.wait_closed()

    assert asyncio.run(main()) == b"ok"


def test_each_launch_gets_its_connections_and_bytes_in_its_event_log(tmp_path: Path) -> None:
    directory = ensure_directory(tmp_path / "launch-logs")

    async def scenario(path: str, *_: Any) -> None:
        await _tunnel_hello(path, "allowed.test")
        assert (await refused(path, connect("evil.test")))[0] == "HTTP/1.1 403 Forbidden"

    run_proxy(scenario, with_upstream=True, launch_logs=LaunchLogs(directory, "egress"))
    read = read_log(directory, LAUNCH)
    assert read.problems == []
    kinds = [(e["source"], e["event"], e["host"], e.get("allowed")) for e in read.events]
    assert kinds == [
        ("egress", "connection", "allowed.test", True),
        ("egress", "connection_closed", "allowed.test", None),
        ("egress", "connection", "evil.test", False),
    ]
    closed = read.events[1]
    # Up: the ClientHello and "hello"; down: "hi\n" and the echo of everything sent.
    assert closed["bytes_up"] == len(HELLO) + 5
    assert closed["bytes_down"] == 3 + len(b"up:" + HELLO + b"hello")
    assert read.events[2]["reason"] == "host is not on the allowlist"
