"""The launch network relay: loopback ports inside a launch's namespace, Unix sockets between.

A launch has its own network namespace with only loopback, so it cannot reach any host
listener. The few host services it needs (the egress proxy, the model gateway, a loopback
coordinator) are relayed in two halves:

- host half (`HostRelay`, run by the launch): listens on `$RUN/net/<name>.sock` (0600 in a
  0700 directory) and pipes each connection to that one service's loopback TCP address, so the
  host firewall still applies to what the launch reaches, or to its Unix socket (`unix:/path`,
  connected to without following any symlink, so file permissions apply);
- namespace half (`netns-relay`, the first process inside bwrap): listens on the same loopback
  `ip:port` the harness expects, pipes each connection to the Unix socket, and runs the harness
  as its child, exiting with the harness's status.

Relay addresses must be carried faithfully, so anything ambiguous is refused rather than
guessed: userinfo, IPv6, shorthand or non-decimal IPv4 (`127.1`, `2130706433`, `0x7f.0.0.1`),
and ports below 1024 (the namespace half binds unprivileged).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import os
import re
import signal
import socket
import stat
import struct
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path

import click

from agentc.core.errors import SupervisorError
from agentc.supervisor.netpipe import (
    Forwarder,
    LoopThread,
    Opener,
    open_tcp,
    open_unix,
    report_stderr,
)

MIN_RELAY_PORT = 1024
UNIX_PREFIX = "unix:"
# sun_path is 108 bytes including the terminating NUL.
MAX_SOCKET_PATH_BYTES = 107
DEFAULT_MAX_CONNECTIONS = 256
# Exit codes of the namespace half itself, following env(1)/timeout(1): the relay failed (125),
# the command could not be executed (126) or was not found (127).
EXIT_RELAY_FAILED = 125
EXIT_NOT_EXECUTABLE = 126
EXIT_NOT_FOUND = 127
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
FORWARDED_SIGNALS = (*_STOP_SIGNALS, signal.SIGUSR1, signal.SIGUSR2)

_DECIMAL_OCTET = re.compile(r"0|[1-9][0-9]{0,2}")
_DECIMAL_PORT = re.compile(r"[1-9][0-9]{0,4}")
# WHATWG URL parsing treats a host whose last label is numeric as IPv4 (in any base): such a
# host must be a canonical dotted quad, or clients would disagree about what it names.
_NUMERIC_LABEL = re.compile(r"0x[0-9a-f]*|[0-9]+")
_HOST_CHARS = re.compile(r"[a-z0-9._-]+")
_ENDPOINT_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")
_LOOPBACK_NET = (IPv4Address("127.0.0.0"), IPv4Address("127.255.255.255"))
_ZERO_NET = IPv4Network("0.0.0.0/8")


class RelayAddressError(SupervisorError):
    """A relay address or relay URL the relay cannot carry faithfully."""


@dataclass(frozen=True, order=True)
class LoopbackAddress:
    """An IPv4 loopback address in canonical dotted-quad form with an unprivileged port."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, order=True)
class UnixTarget:
    """A host service's Unix socket: an absolute, normalized path (checked again on connect)."""

    path: Path

    def __str__(self) -> str:
        return f"{UNIX_PREFIX}{self.path}"


HostTarget = LoopbackAddress | UnixTarget


@dataclass(frozen=True)
class RelaySpec:
    """One namespace-half relay: listen on `listen`, forward to the Unix socket `socket`."""

    listen: LoopbackAddress
    socket: Path

    def __str__(self) -> str:
        return f"{self.listen}={self.socket}"


@dataclass(frozen=True)
class RelayEndpoint:
    """One relayed service: its socket name, the in-namespace address and the host target."""

    name: str
    listen: LoopbackAddress
    target: HostTarget


# ---------------------------------------------------------------------------------------------
# Address rules (pure)


def _canonical_ipv4(text: str) -> IPv4Address | None:
    """The address if `text` is exactly four decimal octets without leading zeros."""
    parts = text.split(".")
    if len(parts) != 4 or not all(_DECIMAL_OCTET.fullmatch(p) for p in parts):
        return None
    if any(int(p) > 255 for p in parts):
        return None
    return IPv4Address(text)


def _parse_port(text: str, what: str) -> int:
    if not _DECIMAL_PORT.fullmatch(text) or int(text) > 65535:
        raise RelayAddressError(f"{what}: port {text!r} is not a decimal port 1-65535")
    port = int(text)
    if port < MIN_RELAY_PORT:
        raise RelayAddressError(
            f"{what}: port {port} is privileged; relayed ports must be >= {MIN_RELAY_PORT}"
        )
    return port


def _loopback_ip(text: str, what: str) -> str:
    ip = _canonical_ipv4(text)
    if ip is None:
        raise RelayAddressError(
            f"{what}: {text!r} is not an IPv4 address in canonical dotted-quad form"
        )
    if not _LOOPBACK_NET[0] < ip < _LOOPBACK_NET[1]:
        raise RelayAddressError(f"{what}: {text} is not an IPv4 loopback address (127.0.0.0/8)")
    return str(ip)


def parse_loopback_address(text: str, *, what: str = "relay address") -> LoopbackAddress:
    """Parse `a.b.c.d:port`: canonical IPv4 loopback and a port >= 1024, nothing else."""
    if "@" in text:
        raise RelayAddressError(f"{what}: {text!r} has userinfo")
    if text.startswith("[") or text.count(":") > 1:
        raise RelayAddressError(f"{what}: {text!r} is IPv6; only IPv4 loopback can be relayed")
    host, sep, port = text.partition(":")
    if not sep:
        raise RelayAddressError(f"{what}: {text!r} has no port (expected 127.0.0.1:PORT)")
    return LoopbackAddress(_loopback_ip(host, what), _parse_port(port, what))


def parse_relay_spec(text: str) -> RelaySpec:
    """Parse a namespace relay `127.0.0.1:PORT=/abs/path.sock`."""
    address, sep, path = text.partition("=")
    if not sep:
        raise RelayAddressError(f"relay {text!r}: expected 127.0.0.1:PORT=/path/to/socket")
    listen = parse_loopback_address(address, what=f"relay {text!r}")
    check_socket_path(path, what=f"relay {text!r}")
    return RelaySpec(listen, Path(path))


def check_socket_path(path: str, *, what: str = "socket path") -> None:
    """A Unix socket path must be absolute, NUL-free and fit in sun_path."""
    if not path.startswith("/"):
        raise RelayAddressError(f"{what}: socket path {path!r} is not absolute")
    if "\0" in path:
        raise RelayAddressError(f"{what}: socket path contains NUL")
    if len(os.fsencode(path)) > MAX_SOCKET_PATH_BYTES:
        raise RelayAddressError(
            f"{what}: socket path is longer than {MAX_SOCKET_PATH_BYTES} bytes: {path}"
        )


def parse_host_target(target: str | Path, *, what: str = "relay target") -> HostTarget:
    """A host half's target: `127.0.0.1:PORT`, or a Unix socket as `unix:/abs/path` or a Path.

    A socket path must be absolute and normalized (no `.`, `..`, `//` or trailing `/`): it is
    carried as written. Whether it is a socket, and that no component is a symlink, is checked
    each time the relay connects (the service may start after the launch).
    """
    if isinstance(target, Path):
        text = str(target)
    elif target.startswith(UNIX_PREFIX):
        text = target.removeprefix(UNIX_PREFIX)
    elif target.startswith("/"):
        raise RelayAddressError(f"{what}: write a Unix socket target as {UNIX_PREFIX}{target}")
    else:
        return parse_loopback_address(target, what=what)
    check_socket_path(text, what=what)
    if text == "/" or text.startswith("//") or os.path.normpath(text) != text:
        raise RelayAddressError(f"{what}: socket path {text!r} is not in normal form")
    return UnixTarget(Path(text))


def url_relay_address(url: str, *, what: str = "url") -> LoopbackAddress | None:
    """The loopback address a service URL needs relayed, or None for a non-loopback host.

    `localhost` and `*.localhost` (any case, trailing dot) mean 127.0.0.1. Refused for any host
    (a mistake would otherwise silently bypass or misdirect the relay): a scheme other than
    http/https, userinfo, IPv6 literals, percent-encoded or non-ASCII hosts, non-canonical
    numeric IPv4 (`127.1`, `2130706433`, `0x7f.0.0.1`, `0177.0.0.1`), 0.0.0.0/8 (which Linux
    routes to loopback), backslashes, whitespace and control characters. For a loopback host
    also: a missing (default) port, port 0 and ports below 1024.
    """
    if "\\" in url or any(ord(c) <= 0x20 or ord(c) == 0x7F for c in url):
        # Parsers disagree about what these mean (WHATWG reads `\\` as `/`, urllib does not).
        raise RelayAddressError(f"{what}: {url!r} has a backslash, whitespace or control character")
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        raise RelayAddressError(f"{what}: {url!r} must be an http:// or https:// URL")
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if "@" in rest:
        # Anywhere, not only in the authority: parsers disagree on where the authority ends
        # (`http://a?@127.0.0.1/`), and a service URL never needs an `@`.
        raise RelayAddressError(f"{what}: {url!r} has an '@' (userinfo), which is not allowed")
    if authority.startswith("[") or authority.count(":") > 1:
        raise RelayAddressError(f"{what}: {url!r} names an IPv6 host, which cannot be relayed")
    host, has_port, port_text = authority.partition(":")
    host = host.lower()
    if host.endswith("."):
        host = host[:-1]
    if not host or not _HOST_CHARS.fullmatch(host):
        raise RelayAddressError(f"{what}: {url!r} has an empty or malformed host")
    loopback: str | None = None
    if host == "localhost" or host.endswith(".localhost"):
        loopback = "127.0.0.1"
    elif _NUMERIC_LABEL.fullmatch(host.rsplit(".", 1)[-1]):
        ip = _canonical_ipv4(host)
        if ip is None:
            raise RelayAddressError(
                f"{what}: {url!r} writes an IPv4 address in a short or non-decimal form; "
                "use four decimal octets"
            )
        if ip in _ZERO_NET:
            raise RelayAddressError(f"{what}: {url!r} names 0.0.0.0/8 (this host)")
        if ip.is_loopback:
            loopback = str(ip)
    if has_port and not _DECIMAL_PORT.fullmatch(port_text):
        raise RelayAddressError(f"{what}: {url!r} has an invalid port {port_text!r}")
    if loopback is None:
        return None
    if not has_port:
        raise RelayAddressError(
            f"{what}: {url!r} is loopback on a default port; relayed ports must be explicit "
            f"and >= {MIN_RELAY_PORT}"
        )
    return LoopbackAddress(_loopback_ip(loopback, what), _parse_port(port_text, what))


def endpoint(name: str, listen: str, target: str | Path | None = None) -> RelayEndpoint:
    """Build a checked `RelayEndpoint`; `target` defaults to `listen` (the usual case).

    `target` is a loopback `127.0.0.1:PORT`, or a Unix socket (`unix:/abs/path` or a `Path`).
    """
    if not _ENDPOINT_NAME.fullmatch(name):
        raise RelayAddressError(f"relay endpoint name {name!r} must match [a-z][a-z0-9_-]*")
    addr = parse_loopback_address(listen, what=f"relay {name}")
    dest = addr if target is None else parse_host_target(target, what=f"relay {name}")
    return RelayEndpoint(name, addr, dest)


def _opener(target: HostTarget) -> Opener:
    if isinstance(target, UnixTarget):
        return functools.partial(open_unix, target.path)
    return functools.partial(open_tcp, target.host, target.port)


# ---------------------------------------------------------------------------------------------
# Host half


class HostRelay:
    """The host half for one launch: `$RUN/net/<name>.sock` -> the service's loopback address
    or Unix socket.

    Use as a context manager, or call `start()` and `close()`. `netns_args()` gives the
    `--listen` arguments for the namespace half.
    """

    def __init__(
        self,
        net_dir: Path,
        endpoints: Sequence[RelayEndpoint],
        *,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        report: Callable[[str], None] = report_stderr,
    ) -> None:
        names = [e.name for e in endpoints]
        if len(set(names)) != len(names):
            raise RelayAddressError(f"duplicate relay endpoint names: {names}")
        listens = [e.listen for e in endpoints]
        if len(set(listens)) != len(listens):
            raise RelayAddressError("two relay endpoints listen on the same address")
        self.net_dir = net_dir
        self.endpoints = tuple(endpoints)
        self._max = max_connections
        self._report = report
        self._loop: LoopThread | None = None
        self._bound: list[tuple[Path, int]] = []

    def socket_path(self, name: str) -> Path:
        return self.net_dir / f"{name}.sock"

    def netns_args(self) -> list[str]:
        """`--listen 127.0.0.1:PORT=$RUN/net/NAME.sock` for each endpoint, in order."""
        args: list[str] = []
        for e in self.endpoints:
            args += ["--listen", f"{e.listen}={self.socket_path(e.name)}"]
        return args

    def start(self) -> None:
        if self._loop is not None:
            raise SupervisorError("host relay already started")
        _make_net_dir(self.net_dir)
        loop = LoopThread(f"agentc-host-relay:{self.net_dir}", self._report)
        self._loop = loop
        loop.start()
        try:
            for e in self.endpoints:
                sock = self._bind(e.name)
                label = f"relay {e.name} -> {e.target}"
                fw = Forwarder(label, _opener(e.target), self._max, self._report)
                try:
                    loop.serve(sock, fw.handle)
                except BaseException:
                    sock.close()
                    raise
        except BaseException:
            self.close()
            raise

    def _bind(self, name: str) -> socket.socket:
        path = self.socket_path(name)
        check_socket_path(str(path), what=f"relay {name}")
        with contextlib.suppress(FileNotFoundError):
            st = path.lstat()
            # Only a stale socket (e.g. from a preflight probe) is replaced, never another file.
            if not stat.S_ISSOCK(st.st_mode):
                raise SupervisorError(f"{path} exists and is not a socket; refusing to replace it")
            path.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(str(path))
            # The directory is 0700, so the window before chmod exposes nothing.
            os.chmod(path, 0o600)
            sock.listen(128)
            self._bound.append((path, path.lstat().st_ino))
        except OSError as exc:
            sock.close()
            raise SupervisorError(f"cannot listen on {path}: {exc.strerror or exc}") from exc
        return sock

    def close(self) -> None:
        if self._loop is not None:
            self._loop.stop()
            self._loop = None
        for path, ino in self._bound:
            with contextlib.suppress(OSError):
                if path.lstat().st_ino == ino:
                    path.unlink()
        self._bound.clear()

    def __enter__(self) -> HostRelay:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _make_net_dir(net_dir: Path) -> None:
    try:
        net_dir.mkdir(mode=0o700)
    except FileExistsError:
        st = net_dir.lstat()
        if not stat.S_ISDIR(st.st_mode):
            raise SupervisorError(f"{net_dir} exists and is not a directory") from None
        if st.st_uid != os.geteuid():
            raise SupervisorError(f"{net_dir} is not owned by the launch's uid") from None
    except OSError as exc:
        raise SupervisorError(f"cannot create {net_dir}: {exc.strerror or exc}") from exc
    os.chmod(net_dir, 0o700)


def start_host_relays(
    run_dir: Path,
    endpoints: Mapping[str, str | tuple[str, str | Path]] | Sequence[RelayEndpoint],
) -> HostRelay:
    """Start the host half for a launch and return it (call `.close()` when the launch ends).

    `endpoints` maps a name (`proxy`, `gateway`, `coordinator`, `staging`) to its loopback
    address `127.0.0.1:PORT`, or to `(listen, target)` when the in-namespace address differs
    from the host service; a target may be a Unix socket (`unix:/abs/path` or a `Path`).
    Sockets go to `run_dir/net/<name>.sock`.
    """
    if isinstance(endpoints, Mapping):
        items = [
            endpoint(n, a) if isinstance(a, str) else endpoint(n, a[0], a[1])
            for n, a in endpoints.items()
        ]
    else:
        items = list(endpoints)
    relay = HostRelay(run_dir / "net", items)
    relay.start()
    return relay


# ---------------------------------------------------------------------------------------------
# Namespace half

_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1


def ensure_loopback_up() -> None:
    """Bring `lo` up if it is down (bwrap already does; a bare `unshare --net` does not)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16sH22x", b"lo", 0)
        try:
            flags = struct.unpack("16sH22x", fcntl.ioctl(s, _SIOCGIFFLAGS, ifreq))[1]
            if flags & _IFF_UP:
                return
            fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | _IFF_UP))
        except OSError as exc:
            raise SupervisorError(f"loopback is down and cannot be brought up: {exc}") from exc


def _listen_tcp(addr: LoopbackAddress) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((addr.host, addr.port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise SupervisorError(f"cannot listen on {addr}: {exc.strerror or exc}") from exc
    return sock


def run_netns_relay(
    relays: Sequence[RelaySpec],
    argv: Sequence[str],
    *,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    report: Callable[[str], None] = report_stderr,
) -> int:
    """Relay `relays` while `argv` runs; return its exit status (128+n if killed by signal n).

    Raises `SupervisorError` if the relay cannot start; the command then never runs.
    """
    if not argv:
        raise SupervisorError("netns-relay needs a command after --")
    listens = [r.listen for r in relays]
    if len(set(listens)) != len(listens):
        raise RelayAddressError("two relays listen on the same address")
    child: subprocess.Popen[bytes] | None = None
    early: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        if child is None:
            early.append(signum)
        else:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in FORWARDED_SIGNALS}
    loop = LoopThread("agentc-netns-relay", report)
    socks: list[socket.socket] = []
    try:
        ensure_loopback_up()
        for r in relays:
            socks.append(_listen_tcp(r.listen))
        loop.start()
        for r, sock in zip(relays, socks, strict=True):
            path = str(r.socket)
            opener = functools.partial(asyncio.open_unix_connection, path)
            fw = Forwarder(f"relay {r.listen} -> {path}", opener, max_connections, report)
            loop.serve(sock, fw.handle)
        stops = [s for s in early if s in _STOP_SIGNALS]
        if stops:  # told to stop before the harness started: never start it
            return 128 + stops[0]
        try:
            child = subprocess.Popen(list(argv))  # the launch's harness argv
        except FileNotFoundError:
            report(f"netns-relay: command not found: {argv[0]}")
            return EXIT_NOT_FOUND
        except OSError as exc:
            report(f"netns-relay: cannot run {argv[0]}: {exc.strerror or exc}")
            return EXIT_NOT_EXECUTABLE
        for s in early:
            forward(s, None)
        status = child.wait()
        return 128 - status if status < 0 else status
    finally:
        loop.stop()
        for sock in socks:
            sock.close()
        for s, handler in previous.items():
            signal.signal(s, handler)


def _relay_option(
    _ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]
) -> list[RelaySpec]:
    try:
        specs = [parse_relay_spec(v) for v in values]
    except RelayAddressError as exc:
        raise click.BadParameter(str(exc)) from None
    if len({s.listen for s in specs}) != len(specs):
        raise click.BadParameter("two relays listen on the same address")
    return specs


@click.command(
    "netns-relay",
    hidden=True,
    context_settings={"ignore_unknown_options": False, "allow_interspersed_args": False},
)
@click.option(
    "--listen",
    "--relay",
    "relays",
    multiple=True,
    metavar="127.0.0.1:PORT=/SOCKET",
    callback=_relay_option,
    help="Listen on this loopback address and forward to this Unix socket (repeatable).",
)
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_context
def command(ctx: click.Context, relays: list[RelaySpec], argv: tuple[str, ...]) -> None:
    """Inside a launch's network namespace: relay loopback ports, run the command after --."""
    try:
        status = run_netns_relay(relays, argv)
    except SupervisorError as exc:
        report_stderr(f"agentc-supervisor netns-relay: {exc}")
        status = EXIT_RELAY_FAILED
    ctx.exit(status)


if __name__ == "__main__":  # `python -m agentc.supervisor.relay` (tests, before the CLI exists)
    command()
