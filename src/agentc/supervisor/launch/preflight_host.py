"""``agentc-supervisor preflight`` with no launch: can this host run launches at all?

Checks, each independent, every problem with its fix (``<problem> (fix: <fix>)``): the sandbox
(descriptor fence, bubblewrap, the kernel probe, run afresh), the syscall filter for both roles
(libseccomp), the state layout of both roles, the gateway and egress addresses, and every
configured harness, whose ``--version`` runs inside a real launch of each role (in host mode as
the role's account). The limits backend is reported as a note: a host without a usable cgroup
still runs launches, with memory bounded per process only (:func:`limits.backend_note`).

A harness is configured when ``harness_paths`` names it or ``bin_dir`` holds it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pwd
import shutil
import socket
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from agentc.core.errors import AgentcError
from agentc.core.roles import Role
from agentc.files.accounts import PUSH_HELPER, ROLE_ACCOUNT_FIX, become, named_account_problems
from agentc.files.sockets import sun_path
from agentc.sandbox import limits, seccomp
from agentc.supervisor.harness import registry
from agentc.supervisor.launch import plan as launch_plan
from agentc.supervisor.launch import preflight
from agentc.supervisor.launch.request import ROLES, LaunchRequest
from agentc.supervisor.launch.rundir import RunLayout

if TYPE_CHECKING:
    from agentc.supervisor.config import SupervisorConfig

CONNECT_SECONDS = 2.0
VERSION_SECONDS = 120

# The fix for a problem, by a phrase the problem contains (first match wins).
FIXES: tuple[tuple[str, str], ...] = (
    ("bubblewrap", "install bubblewrap 0.8 or newer (apt-get install bubblewrap), root-owned and "
     "not group/world-writable, or set `bubblewrap` in supervisor.toml to its path"),
    ("kernel:", "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; "
     "on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0) and nonzero "
     "user.max_*_namespaces"),
    ("close_range", "run Linux 5.11 or newer"),
    ("memfd", "run a kernel with memfd sealing (Linux 3.17 or newer)"),
    ("cannot be exported", "run a kernel with memfd_create (Linux 3.17 or newer)"),
    ("libseccomp", "install libseccomp2 (apt-get install libseccomp2)"),
    ("role account", ROLE_ACCOUNT_FIX),
    ("token", "write the role's claude-token as docs/operator-guide.md says, or set "
     "token_in_env = false"),
)  # fmt: skip


def with_fix(problem: str, fix: str | None = None) -> str:
    """``problem`` with its fix appended, found in :data:`FIXES` when not given."""
    if fix is None:
        fix = next((f for key, f in FIXES if key in problem), None)
    return problem if fix is None else f"{problem} (fix: {fix})"


def host_report(config: SupervisorConfig) -> tuple[list[str], list[str]]:
    """(problems, notes) for this host: see the module docstring."""
    problems = [with_fix(p) for p in preflight.sandbox_problems(config)]
    problems += filter_problems()
    if config.mode == "host":
        problems += account_problems(config, ROLES, push_helper=True)
    state = Path(os.path.realpath(config.resolved_state_dir()))
    for role in ROLES:
        problems += layout_problems(config, state, role)
    problems += address_problems(config)
    harnesses, missing = configured_harnesses(config)
    problems += missing
    if not problems:  # a version launch needs a working sandbox and layout
        for harness in harnesses:
            for role in ROLES:
                if role == "reviewer" and launch_plan.reviewer_refusal(harness):
                    continue  # refused as a reviewer by every launch (launch_plan)
                problems += version_problems(config, state, role, harness)
    return problems, limits_notes()


def limits_notes() -> list[str]:
    """What this host's limits backend leaves unbounded, with its fix (empty when nothing)."""
    note = limits.backend_note(limits.detect_backend())
    return [] if note is None else [with_fix(note, _LIMITS_FIX)]


_LIMITS_FIX = (
    "run the supervisor with a delegated cgroup v2 subtree holding the memory and pids "
    "controllers (e.g. systemd-run --user --scope -p Delegate=yes), or as root"
)


def account_problems(
    config: SupervisorConfig, roles: Iterable[Role], *, push_helper: bool = False
) -> list[str]:
    """Host mode's role accounts (and with ``push_helper`` the candidate push helper's,
    ``[push_helper] user``): each exists, is not root (uid and group 0), has a uid of its own,
    is in no administering group, and sudo (when installed) grants it nothing."""
    accounts: list[tuple[str, str]] = [(role, config.role_user(role)) for role in roles]
    if push_helper:
        accounts.append((PUSH_HELPER, config.push_helper.user))
    return named_account_problems(accounts)


def filter_problems() -> list[str]:
    problems: list[str] = []
    for role in ROLES:
        try:
            seccomp.build_filter(role)
        except seccomp.SeccompError as exc:
            problems.append(with_fix(f"the {role}'s syscall filter cannot be built: {exc}"))
        except OSError as exc:  # exporting it needs memfd_create
            problems.append(with_fix(f"the {role}'s syscall filter cannot be exported: {exc}"))
    return sorted(set(problems), key=problems.index)


def layout_problems(config: SupervisorConfig, state: Path, role: Role) -> list[str]:
    base = RunLayout(state, role, state, state)  # run and clone are not looked at
    found = preflight.layout_problems(config, base, "claude" if _uses_claude(config) else "pi")
    if config.mode == "host":
        fix = "create the seed layout as docs/operator-guide.md says"
    else:
        fix = f"mkdir -m 0700 -p {base.runs} {base.clones}"
    return [with_fix(p, None if any(k in p for k, _ in FIXES) else fix) for p in found]


def _uses_claude(config: SupervisorConfig) -> bool:
    return "claude" in configured_harnesses(config)[0]


def configured_harnesses(config: SupervisorConfig) -> tuple[list[str], list[str]]:
    """(the configured harnesses, problems for those named but missing)."""
    found: list[str] = []
    problems: list[str] = []
    for harness in registry.names():
        program = config.harness_program(harness)
        if harness in config.harness_paths and not os.path.lexists(program):
            problems.append(
                with_fix(
                    f"harness {harness}: {program} is not installed",
                    f"install it there, or change harness_paths.{harness}",
                )
            )
        elif os.path.lexists(program):
            found.append(harness)
    if not found and not problems:
        problems.append(
            with_fix(
                "no harness is installed",
                f"install claude, codex or pi into {config.bin_dir}, or set harness_paths",
            )
        )
    return found, problems


def _reachable(target: str) -> str | None:
    """None when a TCP ``host:port`` or ``unix:/path`` accepts a connection, else why not."""
    family = socket.AF_UNIX if target.startswith("unix:") else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(CONNECT_SECONDS)
        try:
            if family == socket.AF_UNIX:
                with sun_path(target.removeprefix("unix:")) as short:
                    sock.connect(short)
            else:
                host, _, port = target.rpartition(":")
                sock.connect((host, int(port)))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def address_problems(config: SupervisorConfig) -> list[str]:
    problems: list[str] = []
    gateway = config.gateway_target()
    if gateway is not None:
        for what, target in (
            ("gateway", gateway),
            ("gateway control", f"unix:{config.gateway_control}"),
        ):
            why = _reachable(target)
            if why is not None:
                problems.append(
                    with_fix(
                        f"the model {what} at {target} is not reachable ({why})",
                        "start agentc-supervisor model-gateway (docs/gateway.md), or set "
                        "gateway_listen = '' to launch without it",
                    )
                )
    if config.egress_listen:
        why = _reachable(f"unix:{config.egress_socket}")
        if why is not None:
            problems.append(
                with_fix(
                    f"the egress proxy at {config.egress_socket} is not reachable ({why})",
                    f"start agentc-supervisor egress-proxy --socket {config.egress_socket} "
                    "(in host mode with --allow-user for each role account), or set "
                    "egress_listen = '' to give launches no internet",
                )
            )
    return problems


def pinned_problems(config: SupervisorConfig, harnesses: set[str]) -> list[str]:
    """For each of ``harnesses`` that ``[pinned]`` names: its ``--version`` in a real
    implementer launch printed the pinned text (else the problem)."""
    state = Path(os.path.realpath(config.resolved_state_dir()))
    problems: list[str] = []
    for harness in sorted(h for h in harnesses if config.pinned.get(h)):
        problems += version_problems(config, state, "implementer", harness)
    return problems


def version_problems(config: SupervisorConfig, state: Path, role: Role, harness: str) -> list[str]:
    """Run ``<harness> --version`` in a real launch of ``role``; [] when it printed a version."""
    base = RunLayout(state, role, state, state)
    name = f"preflight-{uuid.uuid4().hex[:12]}"
    run, clone = base.runs / name, base.clones / name
    account = pwd.getpwnam(config.role_user(role)) if config.mode == "host" else None
    try:
        for path in (run, clone):
            os.mkdir(path, 0o700)
            if account is not None:
                os.chown(path, account.pw_uid, account.pw_gid)
        (run / "prompt.md").write_bytes(b"")
        if account is not None:
            os.chown(run / "prompt.md", account.pw_uid, account.pw_gid)
        request = LaunchRequest(
            role, harness, run, clone, str(uuid.uuid4()), harness_args=("--version",)
        )
        why = _launch(config, request, account)
        out = b""
        for log in ("events.jsonl", "stderr.log"):
            with contextlib.suppress(OSError):
                out += (run / log).read_bytes()[-4000:]
    except (OSError, AgentcError) as exc:
        why, out = str(exc), b""
    finally:
        for path in (run, clone):
            shutil.rmtree(path, ignore_errors=True)
    text = out.decode("utf-8", "replace").strip()
    pin = config.pinned.get(harness, "")
    if why is None and pin and pin not in text:
        return [
            with_fix(
                f"harness {harness} --version printed {text[-200:]!r} inside a {role} launch, "
                f"not the pinned {pin!r}",
                f"install the pinned release, or change pinned.{harness} once this one is "
                "qualified",
            )
        ]
    if why is None and any(ch.isdigit() for ch in text):
        return []
    detail = why or f"printed no version ({text[-200:]!r})"
    return [
        with_fix(
            f"harness {harness} --version failed inside a {role} launch: {detail}",
            "run it on the host to see whether it works there; if only the launch breaks it, "
            "add the trees it needs to `expose` in supervisor.toml",
        )
    ]


def _launch(
    config: SupervisorConfig, request: LaunchRequest, account: pwd.struct_passwd | None
) -> str | None:
    """Plan, check and execute the launch (in a child as ``account`` in host mode)."""
    # A version check needs no model and no internet: the launch runs without relays.
    quiet = dataclasses.replace(
        config, gateway_listen=None, egress_listen=None, coordinator_listen=None
    )
    if account is None:
        return _execute(quiet, request)
    pid = os.fork()
    if pid == 0:  # the role account's launch; never returns
        code = 1
        try:
            become(account)
            code = 0 if _execute(quiet, request) is None else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return None if code == 0 else f"the launch as {account.pw_name} failed (status {code})"


def _execute(config: SupervisorConfig, request: LaunchRequest) -> str | None:
    from agentc.supervisor.launch import execute as launch_execute
    from agentc.supervisor.launch import plan as launch_plan

    try:
        plan = launch_plan.plan(config, request)
        problems = preflight.launch_problems(config, plan)
        if problems:
            return "; ".join(problems)
        outcome = launch_execute.execute(plan)
    except AgentcError as exc:
        return str(exc)
    if outcome.reason != "exited":
        return f"the harness ended {outcome.reason} (exit {outcome.exit_code}, {outcome.signal})"
    return None
