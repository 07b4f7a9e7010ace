"""The relay end to end: host half in this process, namespace half in a real network namespace.

Everything binds or connects to loopback only, in this host's namespace or in namespaces the
tests create (`unshare --net`, `bwrap --unshare-net`), so nothing can leave the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agentc.core.errors import SupervisorError
from agentc.supervisor.relay import HostRelay, endpoint, start_host_relays

PY = sys.executable
RELAY = [PY, "-m", "agentc.supervisor.relay"]
IS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not IS_ROOT, reason="needs root to create network namespaces")
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed")
NS_PORT = 4000  # the relayed port inside the namespace; the host service is elsewhere

# Runs inside the namespace as the relay's command: talks to the relayed port, tries the host
# service's port directly, and reports as JSON. Exits with argv[3] to test status passthrough.
CLIENT = r"""
import hashlib, json, os, socket, sys, time
from concurrent.futures import ThreadPoolExecutor
ns_port, host_port, exit_code = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
relay_fds = f"/proc/{os.getppid()}/fd"
def talk(payload):
    with socket.create_connection(("127.0.0.1", ns_port), timeout=30) as c:
        c.sendall(payload)
        c.shutdown(socket.SHUT_WR)
        chunks = []
        while data := c.recv(65536):
            chunks.append(data)
    return b"".join(chunks)
out = {"interfaces": [n for _, n in socket.if_nameindex()]}
baseline = len(os.listdir(relay_fds))
out["hello"] = talk(b"hello").decode()
big = os.urandom(1 << 20)
out["big_ok"] = talk(big) == b"host:" + big
with ThreadPoolExecutor(50) as pool:
    replies = list(pool.map(lambda i: talk(b"n%d" % i), range(200)))
out["many_ok"] = replies == [b"host:n%d" % i for i in range(200)]
for _ in range(500):  # the relay closes its side asynchronously; no wall-clock assertion
    out["fds_after"] = len(os.listdir(relay_fds))
    if out["fds_after"] <= baseline:
        break
    time.sleep(0.01)
out["fds_before"] = baseline
try:
    socket.create_connection(("127.0.0.1", host_port), timeout=5).close()
    out["direct"] = "connected"
except OSError as exc:
    out["direct"] = type(exc).__name__
print(json.dumps(out), flush=True)
sys.exit(exit_code)
"""


class EchoServer:
    """Host-side loopback service: reads to EOF, answers `host:` + the bytes, closes."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(256)
        self.port: int = self.sock.getsockname()[1]
        self.accepted = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    @staticmethod
    def _answer(conn: socket.socket) -> None:
        with conn:
            chunks = []
            while data := conn.recv(65536):
                chunks.append(data)
            conn.sendall(b"host:" + b"".join(chunks))

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self._thread.join()


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.close()


@pytest.fixture
def run_dir() -> Iterator[Path]:
    # Short path: Unix socket paths must fit in 107 bytes.
    path = Path(tempfile.mkdtemp(prefix="agentc-relay-"))
    yield path
    shutil.rmtree(path)


def _talk_unix(path: Path, payload: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as c:
        c.settimeout(30)
        c.connect(str(path))
        c.sendall(payload)
        c.shutdown(socket.SHUT_WR)
        chunks = []
        while data := c.recv(65536):
            chunks.append(data)
    return b"".join(chunks)


def _fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


# Host half, in process ------------------------------------------------------------------------


def test_host_relay_forwards_with_half_close_and_no_fd_leak(
    echo: EchoServer, run_dir: Path
) -> None:
    baseline = _fd_count()
    with HostRelay(
        run_dir / "net", [endpoint("proxy", "127.0.0.1:3128", f"127.0.0.1:{echo.port}")]
    ) as r:
        sock_path = r.socket_path("proxy")
        assert stat.S_IMODE((run_dir / "net").stat().st_mode) == 0o700
        assert stat.S_ISSOCK(sock_path.lstat().st_mode)
        assert stat.S_IMODE(sock_path.lstat().st_mode) == 0o600
        assert r.netns_args() == ["--listen", f"127.0.0.1:3128={sock_path}"]
        assert _talk_unix(sock_path, b"ping") == b"host:ping"
        with ThreadPoolExecutor(32) as pool:
            replies = list(pool.map(lambda i: _talk_unix(sock_path, b"%d" % i), range(300)))
        assert replies == [b"host:%d" % i for i in range(300)]
    assert not sock_path.exists()
    assert _fd_count() == baseline


def test_start_host_relays_mapping(echo: EchoServer, run_dir: Path) -> None:
    relay = start_host_relays(
        run_dir,
        {"proxy": ("127.0.0.1:3128", f"127.0.0.1:{echo.port}"), "coordinator": "127.0.0.1:18080"},
    )
    try:
        assert sorted(os.listdir(run_dir / "net")) == ["coordinator.sock", "proxy.sock"]
        assert _talk_unix(run_dir / "net" / "proxy.sock", b"x") == b"host:x"
    finally:
        relay.close()
    assert os.listdir(run_dir / "net") == []


def test_host_relay_unreachable_service_closes_client(run_dir: Path) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    reports: list[str] = []
    eps = [endpoint("gateway", "127.0.0.1:4000", f"127.0.0.1:{port}")]
    with HostRelay(run_dir / "net", eps, report=reports.append) as r:
        try:
            reply = _talk_unix(r.socket_path("gateway"), b"x")
        except (BrokenPipeError, ConnectionResetError):
            reply = b""  # the relay may close before the client has even sent
        assert reply == b""
    assert len(reports) == 1
    assert f"127.0.0.1:{port}" in reports[0]
    assert "cannot connect" in reports[0]


def test_host_relay_refuses_to_replace_a_file(run_dir: Path) -> None:
    (run_dir / "net").mkdir(mode=0o700)
    planted = run_dir / "net" / "proxy.sock"
    planted.write_text("keep")
    with pytest.raises(SupervisorError, match="not a socket"):
        HostRelay(run_dir / "net", [endpoint("proxy", "127.0.0.1:3128")]).start()
    assert planted.read_text() == "keep"


def test_host_relay_refuses_a_symlinked_net_dir(run_dir: Path) -> None:
    (run_dir / "elsewhere").mkdir()
    (run_dir / "net").symlink_to(run_dir / "elsewhere")
    with pytest.raises(SupervisorError, match="not a directory"):
        HostRelay(run_dir / "net", [endpoint("proxy", "127.0.0.1:3128")]).start()


def test_host_relay_refuses_duplicates(run_dir: Path) -> None:
    with pytest.raises(SupervisorError, match="duplicate"):
        HostRelay(
            run_dir, [endpoint("proxy", "127.0.0.1:3128"), endpoint("proxy", "127.0.0.1:4000")]
        )
    with pytest.raises(SupervisorError, match="same address"):
        HostRelay(run_dir, [endpoint("a", "127.0.0.1:3128"), endpoint("b", "127.0.0.1:3128")])


# Namespace half as a process --------------------------------------------------------------


def test_relay_bad_address_exit_2_without_traceback() -> None:
    for bad in (
        "127.1:3128=/r/p.sock",
        "user@127.0.0.1:3128=/r/p.sock",
        "[::1]:3128=/r/p.sock",
        "127.0.0.1:80=/r/p.sock",
    ):
        proc = subprocess.run(
            [*RELAY, "--relay", bad, "--", "/bin/true"], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 2, proc.stderr
        assert "Invalid value for '--listen'" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_relay_bind_failure_exits_125_and_never_runs_the_command(
    echo: EchoServer, run_dir: Path
) -> None:
    # In this (host) namespace the echo server already holds the port.
    marker = run_dir / "ran"
    proc = subprocess.run(
        [*RELAY, "--listen", f"127.0.0.1:{echo.port}={run_dir}/p.sock", "--", "touch", str(marker)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 125
    assert f"cannot listen on 127.0.0.1:{echo.port}" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not marker.exists()


def _unshare(*argv: str) -> list[str]:
    return ["unshare", "--net", "--", *argv]


def _bwrap(run_dir: Path, *argv: str, launch_flags: bool = False) -> list[str]:
    flags = ["--unshare-net", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    if launch_flags:  # what the implementer launch adds around the relay
        flags = [
            "--unshare-user",
            "--disable-userns",
            "--assert-userns-disabled",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--new-session",
            "--die-with-parent",
            "--cap-drop",
            "ALL",
            *flags,
        ]
    return ["bwrap", *flags, "--bind", str(run_dir), str(run_dir), "--", *argv]


def _relay_argv(relay: HostRelay, *command: str) -> list[str]:
    return [*RELAY, *relay.netns_args(), "--", *command]


@needs_root
@pytest.mark.root
@pytest.mark.parametrize("sandbox", ["unshare", "bwrap", "bwrap-launch-flags"])
def test_relay_in_namespace_reaches_host_service_only_through_relay(
    sandbox: str, echo: EchoServer, run_dir: Path
) -> None:
    if sandbox.startswith("bwrap") and shutil.which("bwrap") is None:
        pytest.skip("bwrap not installed")
    eps = [endpoint("proxy", f"127.0.0.1:{NS_PORT}", f"127.0.0.1:{echo.port}")]
    client = run_dir / "client.py"
    client.write_text(CLIENT)
    with HostRelay(run_dir / "net", eps) as relay:
        inner = _relay_argv(relay, PY, str(client), str(NS_PORT), str(echo.port), "7")
        if sandbox == "unshare":
            argv = _unshare(*inner)
        else:
            argv = _bwrap(run_dir, *inner, launch_flags=sandbox == "bwrap-launch-flags")
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 7, proc.stderr  # the command's status, passed through
    out = json.loads(proc.stdout)
    assert out["interfaces"] == ["lo"]
    assert out["hello"] == "host:hello"
    assert out["big_ok"] and out["many_ok"]
    assert out["direct"] == "ConnectionRefusedError"  # the host port does not exist in here
    assert out["fds_after"] <= out["fds_before"]
    assert echo.accepted == 202


@needs_root
@pytest.mark.root
def test_relay_missing_socket_drops_connection_and_keeps_running(run_dir: Path) -> None:
    code = (
        "import socket\n"
        f"c = socket.create_connection(('127.0.0.1', {NS_PORT}), timeout=10)\n"
        "print(repr(c.recv(10)))\n"
    )
    argv = _unshare(
        *RELAY, "--listen", f"127.0.0.1:{NS_PORT}={run_dir}/none.sock", "--", PY, "-c", code
    )
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() in ("b''", "")
    assert f"{run_dir}/none.sock: cannot connect" in proc.stderr


@needs_root
@pytest.mark.root
def test_relay_exit_status_for_signals_and_missing_command(run_dir: Path) -> None:
    spec = f"127.0.0.1:{NS_PORT}={run_dir}/p.sock"
    kill_self = "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"
    proc = subprocess.run(_unshare(*RELAY, "--listen", spec, "--", PY, "-c", kill_self), timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    proc = subprocess.run(
        _unshare(*RELAY, "--listen", spec, "--", "/nonexistent/cmd"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 127
    assert "command not found" in proc.stderr
    proc = subprocess.run(_unshare(*RELAY, "--", "/bin/sh", "-c", "exit 3"), timeout=60)
    assert proc.returncode == 3  # no relays at all is allowed


@needs_root
@pytest.mark.root
def test_relay_forwards_signals_to_the_command(run_dir: Path) -> None:
    code = (
        "import signal, sys\n"
        "signal.signal(signal.SIGUSR1, lambda *a: print('usr1', flush=True))\n"
        "signal.signal(signal.SIGTERM, lambda *a: (print('term', flush=True), sys.exit(5)))\n"
        "print('ready', flush=True)\n"
        "while True: signal.pause()\n"
    )
    spec = f"127.0.0.1:{NS_PORT}={run_dir}/p.sock"
    # unshare without --fork execs the relay, so this pid is the relay's.
    with subprocess.Popen(
        _unshare(*RELAY, "--listen", spec, "--", PY, "-c", code), stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGUSR1)
        assert proc.stdout.readline() == "usr1\n"
        proc.send_signal(signal.SIGTERM)
        assert proc.stdout.readline() == "term\n"
        assert proc.wait(timeout=60) == 5


PROXY_CLIENT = r"""
import socket, sys
port = int(sys.argv[1])
def connect(host):
    c = socket.create_connection(("127.0.0.1", port), timeout=30)
    c.sendall(f"CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += c.recv(1)
    return c, head.split(b"\r\n")[0].decode()
c, blocked = connect("blocked.invalid")
c.close()
c, allowed = connect("allowed.test")
c.sendall(b"client hello")
c.shutdown(socket.SHUT_WR)
reply = b""
while data := c.recv(65536):
    reply += data
print(blocked)
print(allowed)
print(reply.decode())
"""


@needs_root
@pytest.mark.root
def test_launch_reaches_the_egress_proxy_through_the_relay(echo: EchoServer, run_dir: Path) -> None:
    """The whole path: namespace client -> netns-relay -> socket -> host relay -> proxy -> service.

    The proxy's resolver, policy and connector are injected: `allowed.test` is 127.0.0.1, which
    only this test treats as public, and the connector goes only to the echo server.
    """
    from ipaddress import IPv4Address

    from agentc.supervisor.egress import Allowlist, EgressProxy, IPAddress, address_refusal
    from agentc.supervisor.netpipe import LoopThread, Streams, open_tcp

    async def resolve(host: str, port: int) -> list[str]:
        return {"allowed.test": ["127.0.0.1"]}[host]

    def policy(ip: IPAddress) -> str | None:
        return None if ip == IPv4Address("127.0.0.1") else address_refusal(ip)

    connects: list[tuple[str, int]] = []

    async def connector(address: str, port: int) -> Streams:
        connects.append((address, port))
        assert (address, port) == ("127.0.0.1", 443)
        return await open_tcp("127.0.0.1", echo.port)

    log: list[dict[str, object]] = []
    proxy = EgressProxy(
        Allowlist.parse(["allowed.test"]),
        resolver=resolve,
        policy=policy,
        connector=connector,
        log=log.append,
    )
    proxy_sock = socket.socket()
    proxy_sock.bind(("127.0.0.1", 0))
    proxy_sock.listen()
    proxy_port = proxy_sock.getsockname()[1]
    loop = LoopThread("test-egress")
    loop.start()
    try:
        loop.serve(proxy_sock, proxy.handle)
        client = run_dir / "client.py"
        client.write_text(PROXY_CLIENT)
        eps = [endpoint("proxy", "127.0.0.1:3128", f"127.0.0.1:{proxy_port}")]
        with HostRelay(run_dir / "net", eps) as relay:
            argv = _bwrap(run_dir, *_relay_argv(relay, PY, str(client), "3128"), launch_flags=True)
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    finally:
        loop.stop()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "HTTP/1.1 403 Forbidden",
        "HTTP/1.1 200 Connection Established",
        "host:client hello",
    ]
    assert connects == [("127.0.0.1", 443)]
    assert [(x["host"], x["decision"]) for x in log] == [
        ("blocked.invalid", "refuse"),
        ("allowed.test", "allow"),
    ]
