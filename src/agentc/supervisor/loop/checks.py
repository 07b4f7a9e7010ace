"""What ``agentc-supervisor run`` checks before it writes anything: the bindings (main,
canary, reviewer) and their credentials, what the loop does not do, host mode's accounts and
layout, the push helper's key. Each refusal names the key (docs/supervisor.md)."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

from agentc.core.addresses import is_loopback_host
from agentc.core.errors import ConfigError, SupervisorError
from agentc.core.roles import ROLES, Role, role_slug
from agentc.files import UnsafeFile, read_private
from agentc.files.paths import within
from agentc.push import helper as push
from agentc.supervisor.config import SupervisorConfig
from agentc.supervisor.launch import preflight_host
from agentc.supervisor.launch import root as launch_root
from agentc.supervisor.launch.plan import reviewer_refusal
from agentc.supervisor.loop import coordinator, verification
from agentc.supervisor.loop import setup as project_setup


def unsupported(config: SupervisorConfig) -> None:
    """Refuse, naming the key, what the loop does not do (never half of it), and a project
    setup it cannot run."""
    if config.mode == "host" and os.geteuid() != 0:
        raise ConfigError(
            "mode: host mode runs agentc-supervisor run as root (it launches each implementer "
            "and reviewer as its role account); run it as root, or set mode = 'personal' to "
            "launch as this user"
        )
    if config.run.reviewer:
        refusal = reviewer_refusal(config.run.reviewer_harness)
        if refusal is not None:
            raise ConfigError(f"run.reviewer_harness: {refusal}")
    project_setup.check(config)
    verification.check(config)


def check_binding(config: SupervisorConfig) -> coordinator.Binding:
    """The loop's binding from ``[run.binding]``; refused (naming the key) when missing or when
    plain http to loopback is not allowed by ``[run] allow_insecure_loopback``."""
    unsupported(config)
    bound = config.run.binding
    if bound is None:
        raise ConfigError(
            "run.binding: required by agentc-supervisor run (service_url, project_id)"
        )
    state = config.resolved_state_dir()
    credential = bound.credential_file or state / "impl/coordinator/credentials.toml"
    loop_credentials = {"run.binding.credential_file": credential}
    if config.run.reviewer:
        loop_credentials["run.reviewer_binding.credential_file"] = reviewer_credential(config)
    for project, table in config.verification.items():
        loop_credentials[f"verification.{project}.login_file"] = table.login_file
    host_checks(config, loop_credentials)
    push_key_checks(config)
    return coordinator.Binding(
        repo_config=state / "loop" / "coordinator-binding.toml",
        credential_file=credential,
        project_id=bound.project_id,
        project_name=bound.project_name,
        allow_insecure_loopback=_insecure(config, bound.service_url, "run.binding.service_url"),
    )


def reviewer_credential(config: SupervisorConfig) -> Path:
    own = config.run.reviewer_binding
    default = config.resolved_state_dir() / "rev/coordinator/credentials.toml"
    return (own.credential_file if own else None) or default


def push_key_checks(config: SupervisorConfig) -> None:
    """``[push_helper] ssh_key``, when set, is the push helper's alone: a regular single-link
    file of its account's (host mode: the push account; personal mode: this user), mode 0600
    or stricter. Refused naming the key."""
    key, hosts = config.push_helper.ssh_key, config.push_helper.known_hosts
    if hosts is not None and key is None:
        raise ConfigError("push_helper.known_hosts goes with push_helper.ssh_key")
    if key is None:
        return
    try:
        account = launch_root.push_account(config) or pwd.getpwuid(os.getuid())
    except SupervisorError:
        return  # host_checks named the missing account
    problems = push.key_problems(key, account)
    if hosts is not None:
        problems += push.known_hosts_problems(hosts, account)
    if problems:
        raise ConfigError("; ".join(problems))


def host_checks(config: SupervisorConfig, credentials: dict[str, Path]) -> None:
    """Host mode: the role accounts the loop launches as and the push helper's account are fit
    (they exist, are not root, share no uid, administer nothing, get nothing from sudo), the
    installed agentc-supervisor
    is root's and protected (as ``launch-root`` checks it), the state tree has the seed's
    owners and modes, and each of the loop's credentials (by its key) lies outside the role
    directories, whose accounts could replace it there. Refused with every problem named."""
    if config.mode != "host":
        return
    roles: list[Role] = ["implementer", "reviewer"] if config.run.reviewer else ["implementer"]
    problems = preflight_host.account_problems(config, roles, push_helper=True)
    problems += launch_root.program_problems(config)
    state = Path(os.path.realpath(config.resolved_state_dir()))
    if not problems:
        for role in roles:
            problems += preflight_host.layout_problems(config, state, role)
    for key, path in credentials.items():
        real = Path(os.path.realpath(path))
        for slug in (role_slug(role) for role in ROLES):
            if within(real, state / slug):
                problems.append(
                    f"{key}: {path} is inside {state / slug}, which a role account owns; keep "
                    "the loop's credential root-owned (mode 0600) outside the role directories, "
                    "e.g. /etc/agentc/"
                )
    if problems:
        raise ConfigError("host mode: " + "; ".join(problems))


def _insecure(config: SupervisorConfig, url: str, key: str) -> bool:
    """Whether ``url`` is plain http, which needs a loopback host and the opt-in."""
    scheme = url.split(":", 1)[0].lower()
    host = url.split("//", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0].strip("[]")
    if scheme == "http" and not (is_loopback_host(host) and config.run.allow_insecure_loopback):
        raise ConfigError(
            f"{key}: plain http needs a loopback host and [run] allow_insecure_loopback = true"
        )
    return scheme == "http"


def same_origin(a: str, b: str) -> bool:
    """Two service URLs name one coordinator (case and a trailing ``/`` ignored)."""
    return a.rstrip("/").lower() == b.rstrip("/").lower()


def check_canary_binding(
    config: SupervisorConfig, binding: coordinator.Binding
) -> coordinator.Binding | None:
    """The canary project's binding from ``[run.canary_binding]``, checked like
    ``[run.binding]``: on the main binding's coordinator (the same origin), another project."""
    canary, bound = config.run.canary_binding, config.run.binding
    if canary is None:
        return None
    assert bound is not None
    key = "run.canary_binding"
    if not same_origin(canary.service_url, bound.service_url):
        raise ConfigError(
            f"{key}.service_url: {canary.service_url} is not [run.binding]'s coordinator "
            f"({bound.service_url}); the canary project must live on the same one"
        )
    if canary.project_id == bound.project_id:
        raise ConfigError(f"{key}.project_id: {canary.project_id} is [run.binding]'s project")
    state = config.resolved_state_dir()
    return coordinator.Binding(
        repo_config=state / "loop" / "coordinator-binding-canary.toml",
        credential_file=canary.credential_file or binding.credential_file,
        project_id=canary.project_id,
        project_name=canary.project_name,
        allow_insecure_loopback=_insecure(config, canary.service_url, f"{key}.service_url"),
    )


def check_reviewer_binding(
    config: SupervisorConfig, binding: coordinator.Binding
) -> tuple[coordinator.Binding, str] | None:
    """With ``[run] reviewer``, the reviewer's binding and service URL: ``[run.reviewer_binding]``
    over ``[run.binding]``, with the reviewer's own credential, which must be readable now."""
    if not config.run.reviewer:
        return None
    bound, own = config.run.binding, config.run.reviewer_binding
    assert bound is not None
    state = config.resolved_state_dir()
    credential = reviewer_credential(config)
    key = "run.reviewer_binding.credential_file"
    if os.path.realpath(credential) == os.path.realpath(binding.credential_file):
        raise ConfigError(
            f"{key}: {credential} is the implementer's; a reviewer needs its own credential "
            "(another principal: the coordinator refuses a reviewer who contributed to the task)"
        )
    try:
        read_private(credential, max_bytes=coordinator.CREDENTIAL_MAX_BYTES)
    except UnsafeFile as exc:
        raise ConfigError(f"{key}: {exc}") from None
    url = (own.service_url if own else None) or bound.service_url
    insecure = _insecure(config, url, "run.reviewer_binding.service_url")
    reviewer = coordinator.Binding(
        repo_config=state / "loop" / "reviewer-binding.toml",
        credential_file=credential,
        project_id=(own.project_id if own else None) or bound.project_id,
        project_name=(own.project_name if own else None) or bound.project_name,
        allow_insecure_loopback=insecure,
    )
    if os.geteuid() == 0 and config.mode == "personal":
        raise ConfigError(
            "run.reviewer: a reviewer's candidate sandbox cannot nest under a root launcher "
            "(the launch maps root to nobody); run the loop as an unprivileged user"
        )
    return reviewer, url
