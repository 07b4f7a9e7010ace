"""Planning one launch: everything that can be refused, checked before anything is written.

:func:`plan` validates the request against the config and the run directory, reads the prompt
(and, with the token opt-in, the token), and builds the whole ``bwrap`` argv and the harness's
environment from an allow-list, so bad input never leaves a half-written run. The result, a
:class:`Plan`, is what :mod:`agentc.supervisor.launch.execute` runs and ``--dry-run`` prints
(:func:`describe`).
"""

from __future__ import annotations

import dataclasses
import grp
import os
import pwd
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from agentc.core.errors import SupervisorError
from agentc.core.roles import role_slug
from agentc.files.paths import within
from agentc.sandbox import bwrap as sandbox
from agentc.sandbox import toolpaths
from agentc.sandbox.bwrap import LaunchDescription, Relay
from agentc.sandbox.limits import Limits
from agentc.supervisor.config import SupervisorConfig, user_home
from agentc.supervisor.harness import registry
from agentc.supervisor.harness.base import Adapter
from agentc.supervisor.launch import candidate_shell, rundir, tokens
from agentc.supervisor.launch import prompt as prompt_mod
from agentc.supervisor.launch.request import LaunchRequest
from agentc.supervisor.launch.rundir import RunLayout

if TYPE_CHECKING:  # imported where used: a launch without the gateway never needs it
    from agentc.gateway.lease import LeaseRequest

NOBODY = 65534


@dataclass(frozen=True)
class GatewayPlan:
    """The launch's model access through the gateway: the sentinel to ask for, the base URL."""

    lease: LeaseRequest
    base_url: str


@dataclass(frozen=True)
class Plan:
    """A validated launch: nothing has been written yet."""

    request: LaunchRequest
    layout: RunLayout
    description: LaunchDescription
    argv: list[str]
    env: dict[str, str]
    token: str | None = field(repr=False)
    prompt: bytes = field(repr=False)
    candidate_script: str | None = None
    gateway: GatewayPlan | None = None
    limits: Limits = field(default_factory=Limits)
    # The script's name in the run: candidate-shell (Claude) or candidate-run (command:).
    candidate_script_name: str = candidate_shell.SCRIPT

    def model_access(self) -> str:
        """How the harness reaches its model, for the records and ``--dry-run``."""
        if self.gateway is not None:
            return f"gateway {self.gateway.base_url} (sentinel {self.gateway.lease.grant.upstream})"
        return "token-in-env" if self.token is not None else "none"


def _adapter(harness: str) -> Adapter:
    found = registry.adapter(harness)
    if found is None:
        raise SupervisorError(f"unknown harness {harness!r}")
    return found


def _agent_cli_dir(config: SupervisorConfig) -> list[str]:
    """Personal mode: the directory of this install's ``agent-coordinator`` (host mode pins it
    in ``bin_dir``), so the agent CLI is on the launch's PATH."""
    if config.mode == "host":
        return []
    found = Path(sys.prefix) / "bin"
    if (found / "agent-coordinator").exists():
        return [str(found)]
    return [str(SHIM_DIR)]  # runs AGENTC_PYTHON -m agentc.client.cli


# agentc run from a source tree (no console scripts): the agent CLI's shim (agentc/client/bin).
SHIM_DIR = Path(__file__).resolve().parents[2] / "client" / "bin"


def _python_env() -> dict[str, str]:
    """How Python code of this agentc runs inside a launch (the agent CLI's shim, the netns
    relay): this interpreter, and this process's PYTHONPATH when it has one."""
    env = {"AGENTC_PYTHON": sys.executable}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def supervisor_program(config: SupervisorConfig) -> tuple[str, ...]:
    """The argv prefix that runs this supervisor inside the sandbox (for netns-relay)."""
    if config.supervisor_program:
        return tuple(config.supervisor_program)
    if config.mode == "host":
        return (str(config.bin_dir / "agentc-supervisor"),)
    script = Path(sys.prefix) / "bin" / "agentc-supervisor"
    return (str(script),) if script.exists() else (sys.executable, "-m", "agentc.supervisor.cli")


def _masks(config: SupervisorConfig, state_dir: Path, hidden: Path | None = None) -> list[Path]:
    """Trees replaced by an empty tmpfs: the whole state root (token, other runs, the other
    role), scratch dirs, and in personal mode the user's home and runtime dir; a verifying
    reviewer's login directory (``hidden``)."""
    wanted = [state_dir, Path("/tmp"), Path("/var/tmp"), *config.masks]  # noqa: S108
    if hidden is not None:
        wanted.append(hidden)
    if config.egress_listen:  # a Unix socket ignores network namespaces: only via the relay
        wanted.append(config.egress_socket.parent)
    gateway = config.gateway_target()
    if gateway is not None:
        # The control socket issues sentinels: a Unix socket ignores network namespaces.
        wanted.append(config.gateway_control.parent)
        if gateway.startswith("unix:"):  # likewise the gateway's own socket: only via the relay
            wanted.append(Path(gateway.removeprefix("unix:")).parent)
    if config.launch_logs is not None:  # the host's record of what launches did
        wanted.append(config.launch_logs)
    if config.mode == "personal":
        wanted += [user_home(), Path(f"/run/user/{os.getuid()}")]
    result: list[Path] = []
    for path in wanted:
        real = Path(os.path.realpath(path))
        # bwrap cannot create a mount point in the read-only root: mask what exists.
        if real.is_dir() and real != Path("/") and real not in result:
            result.append(real)
    return result


def _agentc_source() -> Path | None:
    """The directory agentc is imported from when it is not inside the Python environment (an
    editable install's ``src/``): the supervisor runs inside the launch (netns-relay)."""
    import agentc

    source = Path(os.path.realpath(agentc.__file__)).parent.parent
    prefix = Path(os.path.realpath(sys.prefix))
    return None if within(source, prefix) else source


def _exposures(
    config: SupervisorConfig,
    masks: list[Path],
    programs: list[Path],
    state_dir: Path,
    path_env: str,
) -> list[Path]:
    """Read-only bind-backs for what a mask would hide of the tools a launch runs: each
    program's symlink hops, package root and interpreter (agentc.sandbox.toolpaths), the
    Python environment, agentc's own source, and ``expose``. Nothing else of a mask returns."""
    wanted = [*config.expose, Path(sys.prefix), Path(sys.base_prefix)]
    wanted += [Path(p) for p in os.environ.get("PYTHONPATH", "").split(":") if p.startswith("/")]
    source = _agentc_source()
    if source is not None:
        wanted.append(source)
    for program in programs:
        try:
            trees = toolpaths.program_trees(program, path_env)
        except toolpaths.ToolPathError as exc:
            raise SupervisorError(f"cannot run {program}: {exc}") from None
        inside = [t for t in trees if within(Path(os.path.realpath(t)), state_dir)]
        if inside:
            raise SupervisorError(
                f"{program} is installed inside the state root ({inside[0]}); a launch masks "
                "that tree: install it elsewhere"
            )
        wanted += trees
    result: list[Path] = []
    for path in wanted:
        real = Path(os.path.realpath(path))
        if real.is_dir() and any(within(real, m) for m in masks) and real not in result:
            hidden = [m for m in masks if within(m, real)]
            if hidden:
                # Binding it back would re-expose a masked tree (the state root, a home).
                raise SupervisorError(f"cannot expose {real}: it contains the masked {hidden[0]}")
            result.append(real)
    # A tree under another exposed tree comes back with it: bind each only once.
    return [p for p in result if not any(o != p and within(p, o) for o in result)]


def _role_gid(config: SupervisorConfig, role: str) -> int:
    name = config.role_user(role)
    try:
        return pwd.getpwnam(name).pw_gid
    except KeyError:
        try:
            return grp.getgrnam(name).gr_gid
        except KeyError:
            raise SupervisorError(f"role account {name} does not exist") from None


def build_env(
    config: SupervisorConfig, layout: RunLayout, request: LaunchRequest
) -> dict[str, str]:
    """The harness environment, from scratch: nothing of the caller's is inherited."""
    run = layout.run
    path = [str(config.bin_dir), *_agent_cli_dir(config), f"{config.toolchain_dir}/cargo/bin"]
    env = {
        "PATH": ":".join([*path, "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": str(run / "state/home"),
        "LANG": "C.UTF-8",
        "TMPDIR": str(run / "tmp"),
        "CARGO_HOME": str(run / "state/cargo"),
        "CARGO_TARGET_DIR": str(run / "target"),
        "RUSTUP_HOME": str(config.toolchain_dir / "rustup"),
        **registry.quiet_env(),
        # What the agent CLI reads (agentc.client.config): its state, session and binding.
        "AGENT_COORDINATOR_STATE_DIR": str(run / "state/coordinator"),
        "AGENTC_SESSION_ID": request.launch_id,
        "AGENTC_TEST_NESTED_SANDBOX": "1",
        **_python_env(),
    }
    access = request.coordinator
    if access is not None:
        env["AGENT_COORDINATOR_SESSION"] = access.session
        env["AGENT_COORDINATOR_REPO_CONFIG"] = str(access.repo_config)
        if access.allow_insecure_loopback:
            env["AGENT_COORDINATOR_ALLOW_INSECURE_LOOPBACK"] = "true"
        if access.push_socket is not None:
            env["AGENT_COORDINATOR_CANDIDATE_PUSH_SOCKET"] = str(access.push_socket)
    if config.egress_listen:
        proxy = f"http://{config.egress_listen}"
        for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
            env[name] = proxy
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env.update(_adapter(request.harness).env(layout, request))
    if request.verification is not None and request.role == "reviewer":
        env.update(request.verification.env(run))
    if request.agent_session is not None:  # the harness and its children see their session
        env.update(request.agent_session.env())
    return env


def _check_account(config: SupervisorConfig, request: LaunchRequest) -> None:
    """Host mode: this process must already be the role's account."""
    if config.mode != "host":
        return
    account = config.role_user(request.role)
    me = pwd.getpwuid(os.getuid()).pw_name
    if me != account:
        raise SupervisorError(
            f"running as {me}; {request.role} launches run as {account} "
            "(use launch-root, or mode = 'personal')"
        )


def _check_run(layout: RunLayout) -> bytes:
    """The run and clone directories are the role's own and fresh; returns the prompt."""
    rundir.check_canonical_child(layout.run, layout.runs, "run directory")
    rundir.check_canonical_child(layout.clone, layout.clones, "clone")
    rundir.check_fresh(layout)
    return prompt_mod.read_prompt_file(layout.prompt)


def _token(config: SupervisorConfig, request: LaunchRequest, layout: RunLayout) -> str | None:
    """The role's token, read only with the token opt-in (``token_in_env``)."""
    if _adapter(request.harness).token_env is None or not config.token_in_env:
        return None
    gid = _role_gid(config, request.role) if config.mode == "host" else None
    return tokens.read_token(layout.token_file, mode=config.mode, group_gid=gid)


def _harness_argv(config: SupervisorConfig, request: LaunchRequest) -> tuple[Path, list[str]]:
    """The harness program and its full argv (the request's arguments or the defaults)."""
    program = config.harness_program(request.harness)
    if not program.is_absolute() or not os.access(program, os.X_OK):
        raise SupervisorError(f"harness {request.harness}: {program} is not an executable")
    args = request.harness_args
    return program, [
        str(program),
        *(_adapter(request.harness).args(request) if args is None else args),
    ]


def _gateway(
    config: SupervisorConfig, request: LaunchRequest, layout: RunLayout
) -> tuple[Relay, GatewayPlan] | None:
    """The gateway's relay and the sentinel to ask for, when the launch uses the gateway."""
    target = config.gateway_target()
    if target is None or not config.gateway_listen or not _adapter(request.harness).uses_gateway:
        return None  # a command: agent brings its own model access, if any
    upstream = config.gateway_upstreams.get(request.harness)
    if upstream is None:
        raise SupervisorError(f"gateway_upstreams names no upstream for {request.harness}")
    sock = PurePosixPath(layout.net / "gateway.sock")
    relay = Relay("gateway", config.gateway_listen, sock, target)
    from agentc.gateway.lease import LeaseRequest
    from agentc.gateway.sentinels import Grant

    session = request.agent_session
    grant = Grant(
        launch_id=request.launch_id,
        attempt=request.attempt or request.launch_id,
        generation=request.generation,
        upstream=upstream,
        role_slug=role_slug(request.role),
        task=request.task,
        project=request.project,
        canary=request.canary,
        launch_usd=request.launch_usd,
        agentns_session_id=session.session_id if session else None,
        agentns_mode=session.mode if session else None,
        policy=request.model_policy,
    )
    lease = LeaseRequest(config.gateway_control, grant)
    return relay, GatewayPlan(lease, f"http://{config.gateway_listen}")


def _relays(config: SupervisorConfig, layout: RunLayout, launch_id: str) -> list[Relay]:
    """The egress proxy's relay (to its Unix socket, naming the launch on every connection) and
    the coordinator's, those configured; a reviewer never reaches the coordinator."""
    sock = {name: PurePosixPath(layout.net / f"{name}.sock") for name in ("proxy", "coordinator")}
    relays: list[Relay] = []
    if config.egress_listen:
        target = f"unix:{config.egress_socket}"
        relays.append(Relay("proxy", config.egress_listen, sock["proxy"], target, launch_id))
    if config.coordinator_listen and layout.role != "reviewer":
        relays.append(Relay("coordinator", config.coordinator_listen, sock["coordinator"]))
    return relays


def _check_relays(relays: list[Relay]) -> None:
    """Refuse relay addresses the relay cannot carry, before anything is written."""
    from agentc.egress import addresses

    for item in relays:
        addresses.endpoint(item.name, item.address, item.target, launch=item.launch)
        addresses.check_socket_path(str(item.socket), what=f"relay {item.name}", via_directory=True)


def _description(
    config: SupervisorConfig,
    request: LaunchRequest,
    layout: RunLayout,
    harness_argv: list[str],
    relays: list[Relay],
) -> LaunchDescription:
    """What the sandbox mounts and runs: masks, bind-backs, relays, the harness."""
    relay_program = supervisor_program(config)
    hidden = request.verification.hidden if request.verification is not None else None
    masks = _masks(config, layout.state_dir, hidden)
    programs = [Path(harness_argv[0]), *(Path(p) for p in relay_program[:1] if p.startswith("/"))]
    programs += [Path(w) for w in config.wrapper[:1] if w.startswith("/")]
    own = _adapter(request.harness).config_dir(layout)
    readonly = [own] if own is not None and own.is_dir() else []
    path_env = build_env(config, layout, request)["PATH"]
    readonly += _exposures(config, masks, programs, layout.state_dir, path_env)
    if request.coordinator is not None and request.coordinator.push_socket is not None:
        readonly.append(request.coordinator.push_socket.parent)  # the helper binds it later
    return LaunchDescription(
        bwrap=PurePosixPath(config.bubblewrap),
        role=request.role,
        mode=config.mode,
        run=PurePosixPath(request.run),
        clone=PurePosixPath(request.clone),
        harness_argv=tuple(harness_argv),
        masks=tuple(PurePosixPath(m) for m in masks),
        writable=tuple(PurePosixPath(p) for p in layout.writable_dirs()),
        readonly=tuple(PurePosixPath(p) for p in readonly),
        relays=tuple(relays),
        relay_program=relay_program if relays else (),
        wrapper=tuple(config.wrapper),
        inner_uid=NOBODY if os.geteuid() == 0 else None,
    )


def reviewer_refusal(harness: str) -> str | None:
    """Why ``harness`` may not review (None: it may). Claude Code runs its Bash commands through
    CLAUDE_CODE_SHELL_PREFIX (candidate-shell); Codex and Pi have no such hook. A command:
    reviewer is the operator's own program, trusted, and is given $AGENTC_CANDIDATE_SHELL
    (candidate-run) to run candidate code in the same nested sandbox (docs/security.md)."""
    if _adapter(harness).confines_reviewer:
        return None
    return (
        f"a {harness} reviewer cannot have its commands confined (only Claude Code's run "
        "through candidate-shell, and a command: reviewer's through $AGENTC_CANDIDATE_SHELL), "
        "and a reviewer is never run unconfined: use the claude harness or a command: reviewer"
    )


def plan(config: SupervisorConfig, request: LaunchRequest) -> Plan:
    """Validate everything and build the argv and environment; writes nothing."""
    adapter = _adapter(request.harness)
    refusal = reviewer_refusal(request.harness) if request.role == "reviewer" else None
    if refusal is not None:
        raise SupervisorError(refusal)
    state_dir = Path(os.path.realpath(config.resolved_state_dir()))
    layout = RunLayout(state_dir, request.role, request.run, request.clone)
    _check_account(config, request)
    prompt = _check_run(layout)
    token = _token(config, request, layout)
    _program, harness_argv = _harness_argv(config, request)
    relays = _relays(config, layout, request.launch_id)
    if request.verification is not None and request.role == "reviewer":
        relays += request.verification.relays(layout.net)
    gateway = _gateway(config, request, layout) if token is None else None
    if gateway is not None:
        relays.append(gateway[0])
    if relays:
        _check_relays(relays)
    description = _description(config, request, layout, harness_argv, relays)
    try:
        argv = sandbox.build_argv(description)
    except ValueError as exc:
        raise SupervisorError(str(exc)) from None
    script = None
    name = adapter.candidate_script
    plain = name == candidate_shell.PLAIN_SCRIPT
    if request.role == "reviewer":
        script = candidate_shell.script_text(
            list(supervisor_program(config)),
            request.run,
            request.clone,
            config.bubblewrap,
            state_dir,
            plain=plain,
        )
    env = build_env(config, layout, request)
    gateway_plan = gateway[1] if gateway is not None else None
    return Plan(
        request,
        layout,
        description,
        argv,
        env,
        token,
        prompt,
        script,
        gateway_plan,
        config.limits,
        candidate_script_name=name,
    )


def describe(plan_: Plan) -> dict[str, Any]:
    """The ``--dry-run`` view: never the token."""
    return {
        "program": plan_.argv[0],
        "args": plan_.argv[1:],
        "env": [f"{k}={v}" for k, v in sorted(plan_.env.items())],
        "cwd": "/",
        "stdin": "sealed memfd of prompt.md",
        "model_access": plan_.model_access(),
        "agent_session": _agent_session(plan_.request),
        # loaded by bwrap from a descriptor the launch makes (--seccomp FD, not in "args")
        "syscall_filter": f"seccomp: {plan_.request.role}",
        "limits": dataclasses.asdict(plan_.limits),
    }


def _agent_session(request: LaunchRequest) -> str:
    if request.agent_session is not None:
        session = request.agent_session
        return f"{session.intent} {session.session_id} ({session.mode})"
    return f"headless:{request.role} (established by agentns when the launch runs)"
