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
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agentc.core.errors import SupervisorError
from agentc.egress.addresses import endpoint
from agentc.egress.host_relay import HostRelay, start_host_relays

PY = sys.executable
RELAY = [PY, "-m", "agentc.supervisor.cli", "netns-relay"]  # as a launch starts it
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
    """Host-side service on loopback, or on the Unix socket `unix`: reads to EOF, answers
    `host:` + the bytes, closes."""

    def __init__(self, unix: Path | None = None) -> None:
        if unix is None:
            self.sock = socket.socket()
            self.sock.bind(("127.0.0.1", 0))
            self.port: int = self.sock.getsockname()[1]
        else:
            self.sock = socket.socket(socket.AF_UNIX)
            self.sock.bind(str(unix))
            self.port = 0
        self.sock.listen(256)
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


class HoldServer:
    """Host-side loopback service that greets each connection with `ready` and keeps it open
    until the far side closes; `closed` counts the connections that ended."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port: int = self.sock.getsockname()[1]
        self.closed = 0
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            t = threading.Thread(target=self._hold, args=(conn,), daemon=True)
            self._threads.append(t)
            t.start()

    def _hold(self, conn: socket.socket) -> None:
        with conn:
            conn.sendall(b"ready")
            try:
                while conn.recv(65536):
                    pass
            except OSError:
                pass
        with self._lock:
            self.closed += 1

    def wait_closed(self, count: int) -> int:
        for _ in range(3000):  # the relay closes asynchronously; no wall-clock assertion
            if self.closed >= count:
                break
            time.sleep(0.01)
        return self.closed

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self._thread.join()
        for t in self._threads:
            t.join(timeout=30)


@pytest.fixture
def hold() -> Iterator[HoldServer]:
    server = HoldServer()
    yield server
    server.close()


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    """A short directory for a host service's Unix socket, outside the run directory."""
    path = Path(tempfile.mkdtemp(prefix="agentc-svc-"))
    yield path
    shutil.rmtree(path)


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


def test_host_relay_closes_open_connections_quietly(
    hold: HoldServer,
    run_dir: Path,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Closing the host half while connections are open is normal: no report, no traceback."""
    baseline = _fd_count()
    reports: list[str] = []
    eps = [endpoint("gateway", "127.0.0.1:4000", f"127.0.0.1:{hold.port}")]
    clients = []
    with HostRelay(run_dir / "net", eps, report=reports.append) as r:
        for _ in range(3):
            c = socket.socket(socket.AF_UNIX)
            c.settimeout(30)
            c.connect(str(r.socket_path("gateway")))
            assert c.recv(5) == b"ready"  # spliced through to the service, and held open
            clients.append(c)
    for c in clients:
        try:
            assert c.recv(10) == b""
        except ConnectionResetError:
            pass
        c.close()
    assert hold.wait_closed(3) == 3
    assert reports == []
    assert "Traceback" not in capfd.readouterr().err
    assert caplog.records == []  # asyncio logs an unhandled error, with its traceback, here
    assert _fd_count() == baseline + 0


def test_host_relay_to_a_unix_socket(run_dir: Path, sock_dir: Path) -> None:
    service = EchoServer(unix=sock_dir / "gateway.sock")
    try:
        baseline = _fd_count()
        eps = [endpoint("gateway", "127.0.0.1:4000", sock_dir / "gateway.sock")]
        with HostRelay(run_dir / "net", eps) as r:
            path = r.socket_path("gateway")
            assert _talk_unix(path, b"ping") == b"host:ping"
            with ThreadPoolExecutor(16) as pool:
                replies = list(pool.map(lambda i: _talk_unix(path, b"%d" % i), range(100)))
            assert replies == [b"host:%d" % i for i in range(100)]
        assert _fd_count() == baseline
        assert service.accepted == 101
    finally:
        service.close()


def test_host_relay_unix_target_refuses_symlinks_and_non_sockets(
    run_dir: Path, sock_dir: Path
) -> None:
    service = EchoServer(unix=sock_dir / "real.sock")
    (sock_dir / "link.sock").symlink_to(sock_dir / "real.sock")
    (sock_dir / "dirlink").symlink_to(sock_dir)
    (sock_dir / "file.sock").write_text("not a socket")
    cases = {
        "link": ("unix:" + str(sock_dir / "link.sock"), f"{sock_dir}/link.sock is a symlink"),
        "dirlink": (f"unix:{sock_dir}/dirlink/real.sock", f"{sock_dir}/dirlink is a symlink"),
        "file": (f"unix:{sock_dir}/file.sock", f"{sock_dir}/file.sock is not a socket"),
        "missing": (f"unix:{sock_dir}/gone.sock", "No such file or directory"),
        "notdir": (f"unix:{sock_dir}/file.sock/x.sock", f"{sock_dir}/file.sock is not a dir"),
    }
    try:
        baseline = _fd_count()
        reports: list[str] = []
        eps = [
            endpoint(name, f"127.0.0.{i + 2}:4000", t)
            for i, (name, (t, _)) in enumerate(cases.items())
        ]
        with HostRelay(run_dir / "net", eps, report=reports.append) as r:
            for name in cases:
                try:
                    reply = _talk_unix(r.socket_path(name), b"x")
                except (BrokenPipeError, ConnectionResetError):
                    reply = b""
                assert reply == b"", name
        assert _fd_count() == baseline
        assert service.accepted == 0  # nothing reached the socket through a symlink
        assert len(reports) == len(cases)
        for report, (name, (target, why)) in zip(reports, cases.items(), strict=True):
            assert report.startswith(f"relay {name} -> {target}: cannot connect: "), report
            assert why in report
    finally:
        service.close()


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


def _bwrap(
    run_dir: Path, *argv: str, launch_flags: bool = False, masks: tuple[Path, ...] = ()
) -> list[str]:
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
    for mask in masks:  # as the launch hides a host service's socket directory
        flags += ["--tmpfs", str(mask)]
    return ["bwrap", *flags, "--bind", str(run_dir), str(run_dir), "--", *argv]


def _relay_argv(relay: HostRelay, *command: str) -> list[str]:
    return [*RELAY, *relay.netns_args(), "--", *command]


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


@pytest.mark.root
def test_relay_exit_status_for_signals_and_missing_command(run_dir: Path) -> None:
    spec = f"127.0.0.1:{NS_PORT}={run_dir}/p.sock"
    kill_self = "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"
    killed = subprocess.run(
        _unshare(*RELAY, "--listen", spec, "--", PY, "-c", kill_self), timeout=60
    )
    assert killed.returncode == 128 + signal.SIGTERM
    proc = subprocess.run(
        _unshare(*RELAY, "--listen", spec, "--", "/nonexistent/cmd"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 127
    assert "command not found" in proc.stderr
    bare = subprocess.run(_unshare(*RELAY, "--", "/bin/sh", "-c", "exit 3"), timeout=60)
    assert bare.returncode == 3  # no relays at all is allowed


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


# The command exits while relayed connections are still open: the first held only by the
# command (its exit closes it), the second also by a background child when argv[2] says so.
HOLDING_CLIENT = r"""
import os, socket, sys, time
port, background = int(sys.argv[1]), sys.argv[2] == "background"
held = []
for _ in range(2):
    c = socket.create_connection(("127.0.0.1", port), timeout=30)
    assert c.recv(5) == b"ready"
    held.append(c)
if background and os.fork() == 0:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    try:
        held[1].recv(1)  # until the relay closes its side
    finally:
        os._exit(0)
print(os.getpid(), flush=True)
sys.exit(9)
"""


@pytest.mark.root
@pytest.mark.parametrize(
    ("sandbox", "mode"),
    [("unshare", "exit"), ("unshare", "background"), ("bwrap-launch-flags", "background")],
)
def test_relay_command_exit_with_open_connections_is_quiet(
    sandbox: str,
    mode: str,
    hold: HoldServer,
    run_dir: Path,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The harness exits while relayed connections are open: the relay closes them without a
    traceback, on either half, and exits with the command's status."""
    if sandbox.startswith("bwrap") and shutil.which("bwrap") is None:
        pytest.skip("bwrap not installed")
    eps = [endpoint("gateway", f"127.0.0.1:{NS_PORT}", f"127.0.0.1:{hold.port}")]
    client = run_dir / "client.py"
    client.write_text(HOLDING_CLIENT)
    with HostRelay(run_dir / "net", eps) as relay:
        inner = _relay_argv(relay, PY, str(client), str(NS_PORT), mode)
        argv = (
            _unshare(*inner) if sandbox == "unshare" else _bwrap(run_dir, *inner, launch_flags=True)
        )
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 9, proc.stderr  # the command's status
        assert "Traceback" not in proc.stderr, proc.stderr
        assert "CancelledError" not in proc.stderr, proc.stderr
        assert len(proc.stderr.splitlines()) <= 1, proc.stderr
        # Both connections end at the service while the host half is still up.
        assert hold.wait_closed(2) == 2
    host_err = capfd.readouterr().err
    assert "Traceback" not in host_err and "CancelledError" not in host_err, host_err
    assert caplog.records == []


UNIX_CLIENT = r"""
import json, os, socket, sys
ns_port, service = int(sys.argv[1]), sys.argv[2]
def talk(payload):
    with socket.create_connection(("127.0.0.1", ns_port), timeout=30) as c:
        c.sendall(payload)
        c.shutdown(socket.SHUT_WR)
        chunks = []
        while data := c.recv(65536):
            chunks.append(data)
    return b"".join(chunks)
out = {"hello": talk(b"hello").decode()}
big = os.urandom(1 << 20)
out["big_ok"] = talk(big) == b"host:" + big
try:
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(service)
        s.sendall(b"direct")
        s.shutdown(socket.SHUT_WR)
        out["direct"] = s.recv(100).decode()
except OSError as exc:
    out["direct"] = type(exc).__name__
print(json.dumps(out), flush=True)
"""


@pytest.mark.root
@pytest.mark.parametrize("sandbox", ["unshare", "bwrap-launch-flags"])
def test_relay_in_namespace_reaches_a_host_unix_socket(
    sandbox: str, run_dir: Path, sock_dir: Path
) -> None:
    """namespace client -> netns-relay -> $RUN/net/gateway.sock -> host half -> service.sock."""
    if sandbox.startswith("bwrap") and shutil.which("bwrap") is None:
        pytest.skip("bwrap not installed")
    service_path = sock_dir / "service.sock"
    service = EchoServer(unix=service_path)
    client = run_dir / "client.py"
    client.write_text(UNIX_CLIENT)
    try:
        eps = [endpoint("gateway", f"127.0.0.1:{NS_PORT}", f"unix:{service_path}")]
        with HostRelay(run_dir / "net", eps) as relay:
            inner = _relay_argv(relay, PY, str(client), str(NS_PORT), str(service_path))
            if sandbox == "unshare":
                argv = _unshare(*inner)
            else:  # the launch masks the service's socket directory
                argv = _bwrap(run_dir, *inner, launch_flags=True, masks=(sock_dir,))
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    finally:
        service.close()
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["hello"] == "host:hello" and out["big_ok"]
    # Without a mount namespace the socket file is reachable (Unix sockets ignore netns);
    # in the launch its directory is an empty tmpfs, so only the relay reaches it.
    assert out["direct"] == ("host:direct" if sandbox == "unshare" else "FileNotFoundError")
    assert service.accepted == (3 if sandbox == "unshare" else 2)
    assert "Traceback" not in proc.stderr


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
import ssl  # the proxy checks the tunnel's first bytes: a real ClientHello naming the host
tls = ssl.create_default_context().wrap_bio(
    ssl.MemoryBIO(), out := ssl.MemoryBIO(), server_hostname="allowed.test")
try:
    tls.do_handshake()
except ssl.SSLWantReadError:
    pass
hello = out.read()
c.sendall(hello)
c.shutdown(socket.SHUT_WR)
reply = b""
while data := c.recv(65536):
    reply += data
print(blocked)
print(allowed)
print("host:client hello" if reply == b"host:" + hello else reply[:40])
"""


@pytest.mark.root
def test_launch_reaches_the_egress_proxy_through_the_relay(echo: EchoServer, run_dir: Path) -> None:
    """The whole path: namespace client -> netns-relay -> socket -> host relay -> proxy -> service.

    The proxy's resolver, policy and connector are injected: `allowed.test` is 127.0.0.1, which
    only this test treats as public, and the connector goes only to the echo server.
    """
    from ipaddress import IPv4Address

    from agentc.egress.egress import Allowlist, EgressProxy, IPAddress, address_refusal
    from agentc.egress.pipe import LoopThread, Streams, open_tcp

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
    launch = str(uuid.uuid4())
    proxy_dir = Path(tempfile.mkdtemp(prefix="agc-eg-"))  # short: the socket fits sun_path
    proxy_sock = socket.socket(socket.AF_UNIX)
    proxy_sock.bind(str(proxy_dir / "proxy.sock"))
    proxy_sock.listen()
    loop = LoopThread("test-egress")
    loop.start()
    try:
        loop.serve(proxy_sock, proxy.handle)
        client = run_dir / "client.py"
        client.write_text(PROXY_CLIENT)
        target = f"unix:{proxy_dir / 'proxy.sock'}"
        eps = [endpoint("proxy", "127.0.0.1:3128", target, launch=launch)]
        with HostRelay(run_dir / "net", eps) as relay:
            argv = _bwrap(run_dir, *_relay_argv(relay, PY, str(client), "3128"), launch_flags=True)
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    finally:
        loop.stop()
        shutil.rmtree(proxy_dir, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "HTTP/1.1 403 Forbidden",
        "HTTP/1.1 200 Connection Established",
        "host:client hello",
    ]
    assert connects == [("127.0.0.1", 443)]
    assert [(x["host"], x["decision"], x["launch"]) for x in log] == [
        ("blocked.invalid", "refuse", launch),  # the relay named the launch, not the agent
        ("allowed.test", "allow", launch),
    ]


GATEWAY_PROBE = r"""
set -u
test -e "$GATEWAY_SOCK" && exit 22  # the socket's directory is masked: only the relay reaches it
case "$ANTHROPIC_API_KEY" in agc-sentinel-*) ;; *) exit 24;; esac
test "$ANTHROPIC_BASE_URL" = "http://127.0.0.1:18788" || exit 25
code=$(curl -s -o "$HOME/answer.json" -w '%{http_code}' -H "x-api-key: $ANTHROPIC_API_KEY" \
  -H 'anthropic-version: 2023-06-01' -H 'content-type: application/json' \
  -d '{"model":"claude-sonnet-5","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}' \
  "$ANTHROPIC_BASE_URL/v1/messages")
test "$code" = 200 || exit 26
echo probed > "$HOME/done"
"""


@needs_bwrap
@pytest.mark.root
def test_launch_reaches_a_gateway_on_a_unix_socket() -> None:
    """A real launch with `gateway_address = "unix:..."`: harness -> relayed loopback port ->
    $RUN/net/gateway.sock -> host half -> the gateway's Unix socket -> scripted provider."""
    import asyncio
    import uuid

    import uvicorn

    from agentc.gateway.app import Gateway
    from agentc.gateway.config import GatewayConfig
    from agentc.gateway.server import serve_with_control as _serve
    from agentc.gateway.server import uvicorn_config as _uvicorn_config
    from agentc.testing.provider import ScriptedProvider
    from agentc.testing.script import parse_script
    from tests.supervisor.kit import make_kit

    if not os.access("/run", os.W_OK):
        pytest.skip("needs a writable /run (the socket must be outside the masked /tmp)")
    root = Path(tempfile.mkdtemp(prefix="agc-rg-"))  # short: $RUN/net/*.sock fits sun_path
    gw_dir = Path(tempfile.mkdtemp(prefix="agc-gws-", dir="/run"))
    key = "sk-test-" + uuid.uuid4().hex
    try:
        (root / "host").mkdir(mode=0o700)
        (root / "host" / "claude.key").write_text(key + "\n")
        os.chmod(root / "host" / "claude.key", 0o600)
        sock = gw_dir / "gateway.sock"
        with ScriptedProvider(parse_script({"turns": []})) as provider:
            upstream = {"base_url": provider.url, "credential_file": str(root / "host/claude.key")}
            config = GatewayConfig.from_mapping(
                {
                    "unix_socket": sock,
                    "control_socket": root / "host" / "control.sock",
                    "ledger": root / "host" / "ledger.jsonl",
                    "vendors": root / "host" / "vendors.json",
                    "upstreams": {"claude": {"api": "anthropic", **upstream}},
                }
            )
            with (root / "host" / "gateway.log").open("a") as log:
                gateway = Gateway(config, log=log)
                server = uvicorn.Server(_uvicorn_config(gateway.app, uds=str(sock)))

                def serve() -> None:
                    with asyncio.Runner() as runner:
                        runner.run(_serve(gateway, server, None))

                thread = threading.Thread(target=serve, daemon=True)
                thread.start()
                try:
                    for _ in range(1000):
                        if server.started and config.control_socket.exists():
                            break
                        time.sleep(0.01)
                    assert server.started and stat.S_ISSOCK(sock.lstat().st_mode)
                    kit = make_kit(
                        root / "kit",
                        gateway_listen="127.0.0.1:18788",
                        gateway_address=f"unix:{sock}",
                        gateway_control=str(config.control_socket),
                        token_in_env=False,
                    )
                    run, clone = kit.new_run(f"GATEWAY_SOCK={sock}\n{GATEWAY_PROBE}")
                    result = kit.launch(run, clone, "--harness=claude")
                finally:
                    server.should_exit = True
                    thread.join(timeout=30)
        stderr = result.stderr + (run / "stderr.log").read_text()
        assert result.returncode == 0, stderr
        assert (run / "state/home/done").read_text() == "probed\n"
        assert json.loads((run / "state/home/answer.json").read_text())["type"] == "message"
        assert [r.headers.get("x-api-key") for r in provider.requests] == [key]
        assert "Traceback" not in stderr
    finally:
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(gw_dir, ignore_errors=True)
