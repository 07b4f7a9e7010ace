"""The relay's host half: `$RUN/net/<name>.sock` -> one host service, run by the launch.

A launch has its own network namespace with only loopback, so it cannot reach any host
listener. The few host services it needs (the egress proxy, the model gateway, a loopback
coordinator) are relayed in two halves; this is the host half (the namespace half is
:mod:`agentc.egress.netns_relay`). It listens on `$RUN/net/<name>.sock` (0600 in a 0700
directory) and pipes each connection to that one service's loopback TCP address, so the host
firewall still applies to what the launch reaches, or to its Unix socket (`unix:/path`,
connected to without following any symlink, so file permissions apply). Addresses are checked
by :mod:`agentc.egress.addresses`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import stat
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from agentc.core.errors import SupervisorError
from agentc.egress.addresses import (
    RelayAddressError,
    RelayEndpoint,
    UnixTarget,
    check_socket_path,
    endpoint,
)
from agentc.egress.egress_policy import launch_line
from agentc.egress.pipe import (
    DEFAULT_MAX_CONNECTIONS,
    Forwarder,
    LoopThread,
    Opener,
    Streams,
    listen_unix,
    open_tcp,
    open_unix,
    report_stderr,
)


def _opener(e: RelayEndpoint) -> Opener:
    """Connects to the endpoint's service; with a launch, names it first (one line, before any
    byte of the launch's: the egress proxy counts connections by it)."""
    target = e.target
    if isinstance(target, UnixTarget):
        connect: Opener = functools.partial(open_unix, target.path)
    else:
        connect = functools.partial(open_tcp, target.host, target.port)
    if e.launch is None:
        return connect
    try:
        line = launch_line(e.launch)
    except ValueError as exc:
        raise RelayAddressError(f"relay {e.name}: {exc}") from None

    async def announced() -> Streams:
        reader, writer = await connect()
        writer.write(line)
        return reader, writer

    return announced


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
        self._openers = [_opener(e) for e in self.endpoints]  # a bad launch id: refused now
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
            for e, opener in zip(self.endpoints, self._openers, strict=True):
                sock = self._bind(e.name)
                label = f"relay {e.name} -> {e.target}"
                fw = Forwarder(label, opener, self._max, self._report)
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
        check_socket_path(str(path), what=f"relay {name}", via_directory=True)
        # The directory is 0700, so the window before the chmod to 0600 exposes nothing.
        sock = listen_unix(path, mode=0o600, backlog=128)
        self._bound.append((path, path.lstat().st_ino))
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
