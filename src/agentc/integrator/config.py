"""The integrator's settings (``integrator.toml``), declared with :mod:`agentc.files.settings`.

Every key has one check and one default, here; unknown keys are refused and every problem is
reported together as ``<file>: <dotted.key>: <problem>`` (docs/integrator.md lists the keys).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from agentc.client.config import normalize_origin
from agentc.client.errors import SetupRequired
from agentc.core.errors import ConfigError
from agentc.files.options import default_config
from agentc.files.procs import SYSTEM_PATH
from agentc.files.settings import (
    Settings,
    absolute_path,
    absolute_paths,
    boolean,
    integer,
    list_of,
    number,
    one_of,
    optional,
    section,
    setting,
    string,
    table_of,
)
from agentc.integrator.signing import SigningKey
from agentc.sandbox.limits import Limits

DEFAULT_CONFIG = default_config("integrator")
Policy = Literal["fast-forward", "rebase", "merge"]
POLICIES: tuple[Policy, ...] = ("fast-forward", "rebase", "merge")
_BRANCH = re.compile(r"^[A-Za-z0-9._/-]{1,255}$")
_CHECK_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def _branch(value: object) -> str:
    text = string(value)
    if (
        not _BRANCH.match(text)
        or text.startswith(("-", "/"))
        or text.endswith(("/", ".lock", "."))
        or ".." in text
        or "//" in text
    ):
        raise ValueError(f"not a branch name git accepts: {text!r}")
    return text


def _non_empty(value: object) -> str:
    text = string(value)
    if not text.strip():
        raise ValueError("must not be empty")
    return text


def _argv(value: object) -> list[str]:
    argv = list_of(string)(value)
    if not argv or not argv[0]:
        raise ValueError("must be a non-empty list: the program and its arguments")
    return argv


class CheckConfig(Settings):
    """One required check: a command run in the checked revision's tree (``[checks.<name>]``)."""

    argv: list[str] = setting(_argv)
    timeout_seconds: int = setting(integer(minimum=1, maximum=86400), default=1800)


def _checks(value: object) -> dict[str, CheckConfig]:
    table = table_of(section(CheckConfig), kind="check")(value)
    if not table:
        raise ValueError("at least one required check must be configured")
    for name in table:
        if not _CHECK_NAME.match(name):
            raise ValueError(f"check name {name!r}: use 1-64 of [A-Za-z0-9._-]")
    return table


class IntegratorConfig(Settings):
    """Every integrator setting; the five without a default are required."""

    # The coordinator binding: its origin, the project, the integrator credential's file.
    origin: str = setting(_non_empty)
    project_id: str = setting(_non_empty)
    credential_file: Path = setting(absolute_path)
    allow_insecure_loopback: bool = setting(boolean, default=False)
    # The repository: any git URL, its target branch, how candidates reach it.
    remote: str = setting(_non_empty)
    # The key git pushes and fetches with over ssh (GIT_SSH_COMMAND with IdentitiesOnly).
    ssh_key: Path | None = setting(optional(absolute_path), default=None)
    target_branch: str = setting(_branch, default="main")
    merge_policy: Policy = setting(one_of(POLICIES), default="rebase")
    # How many queued changes are checked together on one combined revision (1: one at a time).
    landing_batch: int = setting(integer(minimum=1, maximum=16), default=1)
    # The integrator's private state: its repository, check trees, journal and reports.
    work_dir: Path = setting(absolute_path)
    poll_seconds: float = setting(number(minimum=1, maximum=3600), default=30.0)
    # The author and committer of every commit the integrator makes (each landing is one).
    committer_name: str = setting(_non_empty, default="agentc-integrator")
    committer_email: str = setting(_non_empty, default="integrator@agentc.invalid")
    # The SSH key every landed commit is signed with (`signing-key create` makes it) and the
    # allowed-signers file that verifies them (default: `allowed_signers` beside the key).
    signing_key: Path | None = setting(optional(absolute_path), default=None)
    allowed_signers: Path | None = setting(optional(absolute_path), default=None)
    # The remote's candidate and WIP refs: swept at most this often, candidate refs the
    # integrator used kept this long after their task ended (0: forever).
    ref_sweep_minutes: float = setting(number(minimum=1, maximum=10080), default=60.0)
    candidate_retention_days: float = setting(number(minimum=0, maximum=36500), default=90.0)
    # What a finding of the pre-landing scan does: send the submission back to its
    # implementer, or hold it for a person's review.
    scan_findings: Literal["send_back", "hold"] = setting(
        one_of(("send_back", "hold")), default="send_back"
    )
    # The required checks (at least one: the empty default is refused) and their sandbox.
    checks: dict[str, CheckConfig] = setting(_checks, default_factory=dict)
    bubblewrap: Path = setting(absolute_path, default=Path("/usr/bin/bwrap"))
    check_path: str = setting(_non_empty, default=SYSTEM_PATH)
    masks: list[Path] = setting(absolute_paths, default_factory=list)
    expose: list[Path] = setting(absolute_paths, default_factory=list)
    log_tail_bytes: int = setting(integer(minimum=256, maximum=65536), default=4096)
    limits: Limits = setting(section(Limits), default_factory=Limits)

    def signing(self) -> SigningKey | None:
        """The signing key's files (None: landings are not signed)."""
        if self.signing_key is None:
            return None
        allowed = self.allowed_signers or self.signing_key.parent / "allowed_signers"
        return SigningKey(self.signing_key, allowed, self.committer_email)

    def coordinator_origin(self) -> str:
        return normalize_origin(
            self.origin, allow_insecure_loopback=self.allow_insecure_loopback, what="origin"
        )

    def cross_checks(self) -> Iterator[tuple[str, str]]:
        # Plain http to a loopback origin only with allow_insecure_loopback.
        try:
            self.coordinator_origin()
        except SetupRequired:
            yield "origin", "plain http needs allow_insecure_loopback = true (loopback only)"
        except ConfigError as exc:
            yield "origin", str(exc).removeprefix("origin: ")
        if self.allowed_signers is not None and self.signing_key is None:
            yield "allowed_signers", "needs signing_key"
        if self.signing_key is not None and self.signing_key.parent == Path("/"):
            yield "signing_key", "must be in a directory (which is hidden from the checks)"


def load_config(path: Path | None) -> IntegratorConfig:
    """Read ``path`` (default ``/etc/agentc/integrator.toml``); errors name the file and key."""
    return IntegratorConfig.load(path or DEFAULT_CONFIG, what="integrator configuration")
