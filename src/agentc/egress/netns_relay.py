"""The relay's namespace half: `netns-relay`, the first process inside a launch's bwrap.

It listens on the loopback `ip:port` the harness expects (as many as there are relayed
services), pipes each connection to the Unix socket the host half
(:mod:`agentc.egress.host_relay`) serves, and runs the harness as its child, exiting
with the harness's status.

Every launch with a relay starts here, before its harness, so this module imports no click and
no configuration: the command line the sandbox writes is read by :func:`parse_argv`, and
anything else (help, a bad address) goes to the click command in
:mod:`agentc.egress.netns_relay_command`.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import signal
import socket
import struct
import subprocess
from collections.abc import Callable, Sequence

from agentc.core.errors import SupervisorError
from agentc.egress.addresses import RelayAddressError, RelaySpec, parse_relay_spec
from agentc.egress.pipe import (
    DEFAULT_MAX_CONNECTIONS,
    Forwarder,
    LoopThread,
    listen_tcp,
    report_stderr,
)
from agentc.files.sockets import sun_path

# Exit codes of the namespace half itself, following env(1)/timeout(1): the relay failed (125),
# the command could not be executed (126) or was not found (127).
EXIT_RELAY_FAILED = 125
EXIT_NOT_EXECUTABLE = 126
EXIT_NOT_FOUND = 127
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
FORWARDED_SIGNALS = (*_STOP_SIGNALS, signal.SIGUSR1, signal.SIGUSR2)
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
    _distinct(relays)
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
    paths = contextlib.ExitStack()  # directory descriptors of long socket paths (sun_path)
    try:
        ensure_loopback_up()
        for r in relays:
            socks.append(listen_tcp(r.listen, backlog=128))
        loop.start()
        for r, sock in zip(relays, socks, strict=True):
            path = str(r.socket)
            opener = functools.partial(
                asyncio.open_unix_connection, paths.enter_context(sun_path(path))
            )
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
        paths.close()
        for s, handler in previous.items():
            signal.signal(s, handler)


def _distinct(relays: Sequence[RelaySpec]) -> None:
    if len({r.listen for r in relays}) != len(relays):
        raise RelayAddressError("two relays listen on the same address")


def relay_specs(values: Sequence[str]) -> list[RelaySpec]:
    """The ``--relay`` values parsed; raises :class:`RelayAddressError` naming a bad one, or a
    listen address given twice."""
    specs = [parse_relay_spec(v) for v in values]
    _distinct(specs)
    return specs


def relay_command(relays: Sequence[RelaySpec], argv: Sequence[str]) -> int:
    """:func:`run_netns_relay`, a relay that cannot start reported on stderr as status 125."""
    try:
        return run_netns_relay(relays, argv)
    except SupervisorError as exc:
        report_stderr(f"agentc-supervisor netns-relay: {exc}")
        return EXIT_RELAY_FAILED


def parse_argv(args: Sequence[str]) -> tuple[list[RelaySpec], list[str]] | None:
    """The relays and the command of a plain ``[--relay|--listen ADDR=SOCKET]... -- COMMAND``
    line (as the sandbox writes it); None for anything else, which the click command reports."""
    values: list[str] = []
    rest = list(args)
    while rest and rest[0] != "--":
        flag, given, value = rest[0].partition("=")
        if flag not in ("--relay", "--listen"):
            return None
        if not given:
            if len(rest) < 2:
                return None
            value, rest = rest[1], rest[1:]
        values.append(value)
        rest = rest[1:]
    if len(rest) < 2:
        return None
    try:
        return relay_specs(values), rest[1:]
    except RelayAddressError:
        return None


def run_argv(args: Sequence[str]) -> int | None:
    """Run a plain command line (:func:`parse_argv`); None when it is not one."""
    parsed = parse_argv(args)
    return None if parsed is None else relay_command(*parsed)
