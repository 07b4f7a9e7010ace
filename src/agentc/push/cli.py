"""``agentc-push``: the candidate push helper's command line (docs/push.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from agentc.core.errors import ConfigError
from agentc.core.rules import check_id
from agentc.files import JsonLines
from agentc.files.git import git_env
from agentc.push.protocol import MAX_BUNDLE_BYTES, WIP_MAX_MIB, WIP_MAX_REFS
from agentc.push.publisher import Publisher, WipQuota
from agentc.push.repo import PrivateRepo
from agentc.push.scan import Scanner, is_digest
from agentc.push.server import Limits, run


@click.group()
def main() -> None:
    """The candidate push helper of one implementer launch."""


@main.command()
@click.option("--socket", "socket_path", required=True, type=click.Path(path_type=Path))
@click.option("--task", required=True, help="The task id (a ref component).")
@click.option("--launch", required=True, help="The launch (session) id (a ref component).")
@click.option(
    "--work-dir",
    required=True,
    type=click.Path(path_type=Path),
    help="The helper's private bare repository (created on first use).",
)
@click.option("--remote", required=True, help="The git URL candidates are pushed to.")
@click.option(
    "--known-digest",
    "known_digests",
    multiple=True,
    help="SHA-256 hex digest of a coordinator token (64 hex digits) no push may carry in any "
    "encoding the scan decodes (repeatable).",
)
@click.option("--parent-pid", type=int, default=None, help="The launch's root process.")
@click.option(
    "--ssh-key",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The ssh key git pushes with (GIT_SSH_COMMAND with IdentitiesOnly).",
)
@click.option(
    "--known-hosts",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The ssh remote's host keys (with --ssh-key; default ~/.ssh/known_hosts).",
)
@click.option(
    "--wip-max-refs",
    type=click.IntRange(0),
    default=WIP_MAX_REFS,
    show_default=True,
    help="The most WIP refs this launch may publish (the candidate is not counted).",
)
@click.option(
    "--wip-max-mib",
    type=click.IntRange(0),
    default=WIP_MAX_MIB,
    show_default=True,
    help="The most MiB of new objects (uncompressed) its WIP refs may publish in all.",
)
@click.option(
    "--events",
    "events_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Append one JSON line per push here (mode 0600): the launch's event log reads them.",
)
@click.option("--max-bundle-bytes", type=click.IntRange(1), default=MAX_BUNDLE_BYTES, hidden=True)
@click.option("--io-timeout", type=click.FloatRange(0.1), default=60.0, hidden=True)
def serve(
    socket_path: Path,
    task: str,
    launch: str,
    work_dir: Path,
    remote: str,
    known_digests: tuple[str, ...],
    parent_pid: int | None,
    ssh_key: Path | None,
    known_hosts: Path | None,
    wip_max_refs: int,
    wip_max_mib: int,
    events_path: Path | None,
    max_bundle_bytes: int,
    io_timeout: float,
) -> None:
    """Serve the launch's candidate and WIP pushes on a Unix socket."""
    try:
        check_id("task", task)
        check_id("launch", launch)
        bad = [d for d in known_digests if not is_digest(d.lower())]
        if bad:
            raise ConfigError("--known-digest must be a SHA-256 digest: 64 hex digits")
        if not work_dir.is_absolute():
            raise ConfigError("--work-dir must be an absolute path")
        if known_hosts is not None and ssh_key is None:
            raise ConfigError("--known-hosts goes with --ssh-key (it checks the ssh remote)")
        if parent_pid is not None and parent_pid <= 1:
            raise ConfigError("--parent-pid must name a process other than init")
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    scanner = Scanner(d.lower() for d in known_digests)
    repo = PrivateRepo(work_dir, remote, git_env(ssh_key, known_hosts))
    publisher = Publisher(repo, task, launch, scanner, WipQuota(wip_max_refs, wip_max_mib))
    try:
        events = JsonLines.open(events_path) if events_path is not None else None
    except OSError as exc:
        raise click.UsageError(f"--events {events_path}: {exc.strerror}") from None
    limits = Limits(max_bundle_bytes, io_timeout)
    sys.exit(run(socket_path, publisher, parent_pid, limits, events))


if __name__ == "__main__":  # python -m agentc.push.cli (how the supervisor starts it)
    main()
