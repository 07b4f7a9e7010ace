"""``agentc-supervisor egress-proxy``: the egress proxy on its Unix socket (docs/network.md).

The proxy listens only on a Unix socket, never on a TCP port: the kernel then names the account
of every connection (:mod:`agentc.egress.egress`), and the socket's directory must be
one no other account can write (else it could put its own listener where the launches' relays
connect). The socket is 0600, or 0666 when ``--allow-user`` names accounts to serve (host
mode's role accounts, which share no group): the proxy itself then closes every other
account's connection at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import signal
import socket
import stat
import sys
from collections.abc import Iterable
from pathlib import Path

import click

from agentc.core.errors import SupervisorError
from agentc.egress.addresses import RelayAddressError, check_socket_path
from agentc.egress.egress import (
    BACKLOG,
    DEFAULT_ALLOW,
    DEFAULT_MAX_PER_LAUNCH,
    IDLE_TIMEOUT_SECONDS,
    Allowlist,
    EgressConfigError,
    EgressProxy,
    json_line_sink,
    own_accounts,
)
from agentc.egress.pipe import listen_unix
from agentc.files import JsonLines
from agentc.files.exits import FAILED, fail
from agentc.files.launchlog import LaunchLogError, LaunchLogs, ensure_directory

DEFAULT_SOCKET = Path("/run/agentc-egress/proxy.sock")


def directory_problem(path: Path) -> str | None:
    """Why the socket's directory would let another account replace the socket, or None."""
    parent = path.parent
    try:
        info = os.lstat(parent)
    except OSError as exc:
        return f"egress socket directory {parent}: {exc.strerror or exc}"
    if not stat.S_ISDIR(info.st_mode):
        return f"egress socket directory {parent} is not a directory"
    if info.st_uid not in (0, os.geteuid()):
        return (
            f"egress socket directory {parent} is owned by uid {info.st_uid}: another account "
            "could replace the socket; use a directory of your own (or root's)"
        )
    if info.st_mode & 0o022:
        return (
            f"egress socket directory {parent} has mode {info.st_mode & 0o7777:04o}: another "
            f"account could replace the socket (fix: chmod go-w {parent})"
        )
    return None


def listen_socket(path: Path, *, shared: bool = False) -> socket.socket:
    """The proxy's listening socket at ``path`` (0600; 0666 when ``shared``)."""
    try:
        check_socket_path(str(path), what="egress socket", via_directory=True)
    except RelayAddressError as exc:
        raise EgressConfigError(str(exc)) from None
    problem = directory_problem(path)
    if problem is not None:
        raise EgressConfigError(problem)
    mode = 0o666 if shared else 0o600
    return listen_unix(path, mode=mode, backlog=BACKLOG, who="egress proxy ")


def served_accounts(names: Iterable[str]) -> frozenset[int]:
    """Root, the proxy's own account and each named one (EgressConfigError when unknown)."""
    uids = set(own_accounts())
    for name in names:
        try:
            uids.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            raise EgressConfigError(f"--allow-user {name}: no such account") from None
    return frozenset(uids)


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


@click.command("egress-proxy")
@click.option(
    "--socket",
    "socket_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=DEFAULT_SOCKET,
    show_default=True,
    help="The Unix socket the launches' relays connect to (its directory: yours, not writable "
    "by others).",
)
@click.option(
    "--allow-user",
    "users",
    multiple=True,
    help="Also serve this account's relays (host mode's role accounts); repeatable.",
)
@click.option("--allow", "allow", multiple=True, help="Extra allowlist entry: host or .suffix.")
@click.option("--no-default-allow", is_flag=True, help="Use only the --allow entries.")
@click.option(
    "--log",
    "log_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Append decision lines here (mode 0600) instead of stdout.",
)
@click.option(
    "--launch-logs",
    "launch_logs",
    type=click.Path(file_okay=False, path_type=Path),
    help="Append each launch's connections to <dir>/<launch id>.jsonl, the launch's event log "
    "(the gateway's launch_logs; the directory is made 0700 if missing).",
)
@click.option(
    "--max-per-launch",
    type=click.IntRange(min=0),
    default=DEFAULT_MAX_PER_LAUNCH,
    show_default=True,
    help="Connections one launch may hold at once; 0: no cap.",
)
@click.option(
    "--idle-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=IDLE_TIMEOUT_SECONDS,
    show_default=True,
    help="Seconds a tunnel may carry no byte either way before it is closed.",
)
def command(
    socket_path: Path,
    users: tuple[str, ...],
    allow: tuple[str, ...],
    no_default_allow: bool,
    log_path: Path | None,
    launch_logs: Path | None,
    max_per_launch: int,
    idle_timeout: float,
) -> None:
    """Allowlisting CONNECT proxy for launches (port 443, public addresses only)."""
    entries = list(allow) if no_default_allow else [*DEFAULT_ALLOW, *allow]
    try:
        allowlist = Allowlist.parse(entries)
        accounts = served_accounts(users)
    except EgressConfigError as exc:
        raise click.UsageError(str(exc)) from None
    logs = None
    if launch_logs is not None:
        try:
            logs = LaunchLogs(ensure_directory(launch_logs), "egress")
        except LaunchLogError as exc:
            fail("agentc-supervisor egress", exc, FAILED)
    try:
        sock = listen_socket(socket_path, shared=bool(users))
    except SupervisorError as exc:
        fail("agentc-supervisor egress", exc, FAILED)
    bound = os.lstat(socket_path).st_ino
    try:
        log = JsonLines(sys.stdout) if log_path is None else JsonLines.open(log_path)
    except OSError as exc:
        sock.close()
        fail(
            "agentc-supervisor egress", f"cannot open egress log {log_path}: {exc.strerror}", FAILED
        )
    proxy = EgressProxy(
        allowlist,
        log=json_line_sink(log),
        max_per_launch=max_per_launch,
        accounts=accounts,
        idle_timeout=idle_timeout,
        launch_logs=logs,
    )
    signal.signal(signal.SIGTERM, _interrupt)  # stop as on Ctrl-C: the socket is removed
    try:
        asyncio.run(proxy.serve(sock))
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
        with contextlib.suppress(OSError):
            if os.lstat(socket_path).st_ino == bound:
                os.unlink(socket_path)
        if log_path is not None:
            log.close()


if __name__ == "__main__":
    command()
