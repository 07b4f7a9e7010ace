"""The one pure function that turns a launch description into a Bubblewrap argv.

Nothing here touches the filesystem or the process: the launch layer decides *what* is
mounted (which paths exist, which masks apply in personal mode) and this module decides the
*order*, which is where confinement is won or lost:

1. user namespace flags (implementers: nested user namespaces disabled and asserted);
2. the shared namespaces, the syscall filter (``--seccomp FD``), ``--ro-bind / /``, a fresh
   procfs and a private ``/dev``;
3. ``--remount-ro /proc`` (implementers only; reviewers need it writable for the nested
   candidate sandbox);
4. masks: an empty tmpfs over every hidden tree (the state root, personal-mode home and
   secrets), parents first, **before** anything is bound back under them;
5. the run directory read-only, first of all binds under it;
6. writable per-launch directories, then the clone (writable for implementers only);
7. read-only bind-backs (harness config, exposed tool trees);
8. the masks themselves remounted read-only;
9. ``--chdir`` and the init command: the netns relay (when relays are configured), the
   wrapper prefix (``wrapper`` in the config), then the harness argv. The agent session is
   not set here: the launch process already established it (agentsession.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from agentc.core.roles import Mode, Role


@dataclass(frozen=True)
class Relay:
    """One relayed loopback service: ``host:port`` inside the netns, a Unix socket outside."""

    name: str
    address: str
    socket: PurePosixPath
    # The host service's loopback address (or ``unix:/path``) when it differs from
    # ``address`` (the gateway's host port may differ from the one the harness uses inside;
    # the egress proxy is a Unix socket); the argv never uses it.
    target: str | None = None
    # The launch id the host half names first on each connection (the egress proxy's).
    launch: str | None = None


@dataclass(frozen=True)
class LaunchDescription:
    """Everything the argv depends on; built by the launch layer, never by the sandbox."""

    bwrap: PurePosixPath
    role: Role
    mode: Mode
    run: PurePosixPath
    clone: PurePosixPath
    harness_argv: tuple[str, ...]
    masks: tuple[PurePosixPath, ...] = ()
    writable: tuple[PurePosixPath, ...] = ()
    readonly: tuple[PurePosixPath, ...] = ()
    relays: tuple[Relay, ...] = ()
    relay_program: tuple[str, ...] = ()
    wrapper: tuple[str, ...] = ()
    # Set when the launcher is root (personal mode only): root outside is mapped to this uid
    # inside, because a nested bwrap (the reviewer's candidate sandbox) cannot map uid 0.
    inner_uid: int | None = None
    # The descriptor holding the syscall filter (agentc.sandbox.seccomp) bwrap loads before
    # it execs the init command; set by the launch when it spawns bwrap.
    seccomp_fd: int | None = None
    # Where bwrap writes the sandbox's facts (``--info-fd``: its init's pid, a new session
    # that the launch's process group does not hold); set by the launch when it spawns bwrap.
    info_fd: int | None = None


SHARED_NAMESPACES: tuple[str, ...] = (
    "--unshare-net",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--new-session",
    "--die-with-parent",
    "--cap-drop",
    "ALL",
)


def _depth(path: PurePosixPath) -> int:
    return len(path.parts)


def _check_absolute(paths: Sequence[PurePosixPath], what: str) -> None:
    for path in paths:
        # bwrap would resolve a relative path against its own cwd; refuse rather than guess.
        if not path.is_absolute() or ".." in path.parts:
            raise ValueError(f"{what} path must be absolute and without '..': {path}")


def build_argv(desc: LaunchDescription) -> list[str]:
    """Return the full ``bwrap ... -- <init command>`` argv for one launch."""
    _check_absolute([desc.run, desc.clone, desc.bwrap], "launch")
    _check_absolute(desc.masks, "mask")
    _check_absolute(desc.writable, "writable")
    _check_absolute(desc.readonly, "read-only")
    if not desc.harness_argv:
        raise ValueError("the harness argv is empty")
    if desc.relays and not desc.relay_program:
        raise ValueError("relays are configured but no relay program is given")

    argv: list[str] = [str(desc.bwrap), "--unshare-user"]
    if desc.role == "implementer":
        argv += ["--disable-userns", "--assert-userns-disabled"]
    if desc.inner_uid is not None:
        argv += ["--uid", str(desc.inner_uid), "--gid", str(desc.inner_uid)]
    argv += SHARED_NAMESPACES
    if desc.seccomp_fd is not None:
        argv += ["--seccomp", str(desc.seccomp_fd)]
    if desc.info_fd is not None:
        argv += ["--info-fd", str(desc.info_fd)]
    argv += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
    if desc.role == "implementer":
        argv += ["--remount-ro", "/proc"]

    # Parents first, so a mask under another mask is created inside the outer tmpfs.
    masks = sorted(dict.fromkeys(desc.masks), key=lambda p: (_depth(p), str(p)))
    for mask in masks:
        argv += ["--tmpfs", str(mask)]

    # The run directory goes back first and read-only; every other mount under it follows.
    argv += ["--ro-bind", str(desc.run), str(desc.run)]
    for path in desc.writable:
        argv += ["--bind", str(path), str(path)]
    clone_flag = "--bind" if desc.role == "implementer" else "--ro-bind"
    argv += [clone_flag, str(desc.clone), str(desc.clone)]
    for path in desc.readonly:
        argv += ["--ro-bind", str(path), str(path)]
    # The masks were writable only so bwrap could create mount points in them.
    for mask in masks:
        argv += ["--remount-ro", str(mask)]

    argv += ["--chdir", str(desc.clone), "--"]
    if desc.relays:
        argv += list(desc.relay_program) + ["netns-relay"]
        for relay in desc.relays:
            argv += ["--relay", f"{relay.address}={relay.socket}"]
        argv += ["--"]
    argv += list(desc.wrapper)
    argv += list(desc.harness_argv)
    return argv
