"""One supervised launch: validate, prepare the run, spawn the sandbox, reap, mark terminal.

Everything that can be refused is checked in :func:`plan` before the run directory is touched,
so bad input never leaves a half-written run. :func:`execute` then creates the private trees
and markers, seals the prompt into stdin, builds the environment from an allow-list, becomes
the child subreaper, runs ``bwrap`` with no_new_privs and every inherited descriptor
close-on-exec, reaps every leftover process and records how the harness ended: ``exited``
(code 0), ``failed`` (non-zero code) or ``killed`` (a signal; bwrap reports an inner signal
death as 128+n and that is mapped back to the signal).
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from agentc.core.errors import SupervisorError
from agentc.supervisor import candidate_shell, harness_env, reaper, rundir, sandbox, tokens
from agentc.supervisor import prompt as prompt_mod
from agentc.supervisor.config import HARNESSES, SupervisorConfig, user_home
from agentc.supervisor.rundir import RunLayout
from agentc.supervisor.sandbox import LaunchDescription, Relay, Role

if TYPE_CHECKING:  # imported where used: a launch without the gateway never needs it
    from agentc.supervisor.agentsession import AgentSession
    from agentc.supervisor.gateway.lease import Lease, LeaseRequest

TOKEN_ENV = {"claude": "CLAUDE_CODE_OAUTH_TOKEN"}
NOBODY = 65534


@dataclass(frozen=True)
class LaunchRequest:
    role: Role
    harness: str
    run: Path
    clone: Path
    session_id: str
    model: str = "default"
    harness_args: tuple[str, ...] | None = None  # replaces the default harness flags
    # What the gateway binds the launch's sentinel to (the attempt defaults to the session).
    attempt: str | None = None
    generation: int = 1
    task: str | None = None
    launch_usd: float | None = None  # a per-launch cap overriding the gateway's own
    # The agent session the launch runs in (agentsession.ensure); carried on every record.
    agentns: AgentSession | None = None


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


@dataclass(frozen=True)
class Outcome:
    """How the harness ended; ``exit_code`` is None when a signal killed it."""

    reason: str
    exit_code: int | None
    signal: str | None
    cap: str | None = None  # the gateway cost cap that refused a model call of this launch

    @property
    def shell_status(self) -> int:
        if self.exit_code is None:
            return 128 + signal.Signals[self.signal or "SIGKILL"].value
        return self.exit_code if 0 <= self.exit_code <= 255 else 1


def translate_status(returncode: int) -> Outcome:
    """Map a bwrap wait status to an outcome; bwrap reports inner signal n as 128+n."""
    signum: int | None = None
    if returncode < 0:
        signum = -returncode
    elif returncode > 128:
        with contextlib.suppress(ValueError):
            signum = signal.Signals(returncode - 128).value
    if signum is not None:
        return Outcome("killed", None, signal.Signals(signum).name)
    return Outcome("exited" if returncode == 0 else "failed", returncode, None)


def agentns_fields(request: LaunchRequest) -> dict[str, str | None]:
    """The agent session's fields for the launch's records (null without a session)."""
    if request.agentns is not None:
        return dict(request.agentns.record())
    return {"agentns_session_id": None, "agentns_mode": None, "agentns_intent": None}


def default_harness_args(request: LaunchRequest) -> tuple[str, ...]:
    """Flags per harness; each harness's own sandbox is off because it cannot nest in ours."""
    if request.harness == "claude":
        args = ["-p", "--output-format", "stream-json", "--verbose"]
        args += ["--permission-mode", "dontAsk", "--strict-mcp-config"]
        args += ["--session-id", request.session_id]
        return (*args, *(["--model", request.model] if request.model != "default" else []))
    if request.harness == "codex":
        # $CODEX_HOME/config.toml is the launch's own (the gateway provider table).
        args = ["exec", "--json", "--skip-git-repo-check"]
        args += ["-s", "danger-full-access", "-c", "approval_policy=never"]
        args += ["-c", "check_for_update_on_startup=false", "-C", str(request.clone)]
        return (*args, *(["-m", request.model] if request.model != "default" else []), "-")
    args = ["-p", "--mode", "json", "--no-session"]
    model = None if request.model == "default" else request.model
    return (*args, *harness_env.pi_args(model))


def supervisor_program(config: SupervisorConfig) -> tuple[str, ...]:
    """The argv prefix that runs this supervisor inside the sandbox (for netns-relay)."""
    if config.supervisor_program:
        return tuple(config.supervisor_program)
    if config.mode == "host":
        return (str(config.bin_dir / "agentc-supervisor"),)
    script = Path(sys.prefix) / "bin" / "agentc-supervisor"
    return (str(script),) if script.exists() else (sys.executable, "-m", "agentc.supervisor")


def _under(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def _masks(config: SupervisorConfig, state_dir: Path) -> list[Path]:
    """Trees replaced by an empty tmpfs: the whole state root (token, other runs, the other
    role), scratch dirs, and in personal mode the user's home and runtime dir."""
    wanted = [state_dir, Path("/tmp"), Path("/var/tmp"), *config.masks]  # noqa: S108
    gateway = config.gateway_target()
    if gateway is not None:
        # The control socket issues sentinels: a Unix socket ignores network namespaces.
        wanted.append(config.gateway_control.parent)
        if gateway.startswith("unix:"):  # likewise the gateway's own socket: only via the relay
            wanted.append(Path(gateway.removeprefix("unix:")).parent)
    if config.mode == "personal":
        wanted += [user_home(), Path(f"/run/user/{os.getuid()}")]
    result: list[Path] = []
    for path in wanted:
        real = Path(os.path.realpath(path))
        # bwrap cannot create a mount point in the read-only root: mask what exists.
        if real.is_dir() and real != Path("/") and real not in result:
            result.append(real)
    return result


def _exposures(config: SupervisorConfig, masks: list[Path], programs: list[Path]) -> list[Path]:
    """Read-only bind-backs for tool trees a mask would otherwise hide."""
    wanted = [*config.expose, Path(sys.prefix), Path(sys.base_prefix)]
    wanted += [Path(os.path.realpath(p)).parent for p in programs]
    result: list[Path] = []
    for path in wanted:
        real = Path(os.path.realpath(path))
        if real.is_dir() and any(_under(real, m) for m in masks) and real not in result:
            hidden = [m for m in masks if _under(m, real)]
            if hidden:
                # Binding it back would re-expose a masked tree (the state root, a home).
                raise SupervisorError(f"cannot expose {real}: it contains the masked {hidden[0]}")
            result.append(real)
    return result


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
    env = {
        "PATH": f"{config.bin_dir}:{config.toolchain_dir}/cargo/bin:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(run / "state/home"),
        "LANG": "C.UTF-8",
        "TMPDIR": str(run / "tmp"),
        "CARGO_HOME": str(run / "state/cargo"),
        "CARGO_TARGET_DIR": str(run / "target"),
        "RUSTUP_HOME": str(config.toolchain_dir / "rustup"),
        **harness_env.QUIET_ENV,
        "AGENT_COORDINATOR_HOME": str(run / "state/coordinator"),
        "AGENTC_SESSION_ID": request.session_id,
        "AGENTC_TEST_NESTED_SANDBOX": "1",
    }
    if config.egress_listen:
        proxy = f"http://{config.egress_listen}"
        for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
            env[name] = proxy
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    if request.harness == "claude":
        env["CLAUDE_CONFIG_DIR"] = str(layout.claude_config)
        if request.role == "reviewer":
            env["CLAUDE_CODE_SHELL_PREFIX"] = str(run / "candidate-shell")
    elif request.harness == "codex":
        env["CODEX_HOME"] = str(run / "state/codex-home")
    if request.agentns is not None:  # the harness and its children see their session
        env.update(request.agentns.env())
    return env


def plan(config: SupervisorConfig, request: LaunchRequest) -> Plan:
    """Validate everything and build the argv and environment; writes nothing."""
    if request.harness not in HARNESSES:
        raise SupervisorError(f"unknown harness {request.harness!r}")
    state_dir = Path(os.path.realpath(config.resolved_state_dir()))
    layout = RunLayout(state_dir, request.role, request.run, request.clone)
    if config.mode == "host":
        account = config.role_user(request.role)
        me = pwd.getpwuid(os.getuid()).pw_name
        if me != account:
            raise SupervisorError(
                f"running as {me}; {request.role} launches run as {account} "
                "(use launch-root, or mode = 'personal')"
            )
    rundir.check_canonical_child(request.run, layout.runs, "run directory")
    rundir.check_canonical_child(request.clone, layout.clones, "clone")
    rundir.check_fresh(layout)
    data = prompt_mod.read_prompt_file(layout.prompt)

    token: str | None = None
    token_path = request.harness in TOKEN_ENV and config.token_in_env
    if token_path:
        gid = _role_gid(config, request.role) if config.mode == "host" else None
        token = tokens.read_token(layout.token_file, mode=config.mode, group_gid=gid)

    program = config.harness_program(request.harness)
    if not program.is_absolute() or not os.access(program, os.X_OK):
        raise SupervisorError(f"harness {request.harness}: {program} is not an executable")
    args = request.harness_args
    harness_argv = (str(program), *(default_harness_args(request) if args is None else args))

    relays: list[Relay] = []
    for name, address in (
        ("proxy", config.egress_listen),
        ("coordinator", config.coordinator_listen),
    ):
        if address:
            relays.append(Relay(name, address, PurePosixPath(layout.net / f"{name}.sock")))
    gateway = None
    target = config.gateway_target()
    if target is not None and config.gateway_listen and not token_path:
        upstream = config.gateway_upstreams.get(request.harness)
        if upstream is None:
            raise SupervisorError(f"gateway_upstreams names no upstream for {request.harness}")
        sock = PurePosixPath(layout.net / "gateway.sock")
        relays.append(Relay("gateway", config.gateway_listen, sock, target))
        from agentc.supervisor.gateway.lease import LeaseRequest

        lease = LeaseRequest(
            control=config.gateway_control,
            session=request.session_id,
            attempt=request.attempt or request.session_id,
            generation=request.generation,
            upstream=upstream,
            role=rundir.ROLE_SLUGS[request.role],
            task=request.task,
            launch_usd=request.launch_usd,
            agentns_session_id=request.agentns.session_id if request.agentns else None,
            agentns_mode=request.agentns.mode if request.agentns else None,
        )
        gateway = GatewayPlan(lease, f"http://{config.gateway_listen}")
    relay_program = supervisor_program(config)
    if relays:
        _check_relays(relays)

    masks = _masks(config, state_dir)
    programs = [program, *(Path(p) for p in relay_program[:1] if p.startswith("/"))]
    readonly = [p for p in (layout.claude_config,) if p.is_dir() and request.harness == "claude"]
    readonly += _exposures(config, masks, programs)

    description = LaunchDescription(
        bwrap=PurePosixPath(config.bubblewrap),
        role=request.role,
        mode=config.mode,
        run=PurePosixPath(request.run),
        clone=PurePosixPath(request.clone),
        harness_argv=harness_argv,
        masks=tuple(PurePosixPath(m) for m in masks),
        writable=tuple(PurePosixPath(p) for p in layout.writable_dirs()),
        readonly=tuple(PurePosixPath(p) for p in readonly),
        relays=tuple(relays),
        relay_program=relay_program if relays else (),
        wrapper=tuple(config.wrapper),
        inner_uid=NOBODY if os.geteuid() == 0 else None,
    )
    try:
        argv = sandbox.build_argv(description)
    except ValueError as exc:
        raise SupervisorError(str(exc)) from None
    env = build_env(config, layout, request)
    script = None
    if request.role == "reviewer" and request.harness == "claude":
        script = candidate_shell.script_text(
            list(relay_program), request.run, request.clone, config.bubblewrap, state_dir
        )
    return Plan(request, layout, description, argv, env, token, data, script, gateway)


def _check_relays(relays: list[Relay]) -> None:
    """Refuse relay addresses the relay cannot carry, before anything is written."""
    try:
        from agentc.supervisor.net import addresses as relay
    except ImportError:
        raise SupervisorError(
            "relays are configured but agentc.supervisor.relay is missing"
        ) from None
    for item in relays:
        relay.endpoint(item.name, item.address, item.target)
        relay.check_socket_path(str(item.socket), what=f"relay {item.name}")


def describe(plan_: Plan) -> dict[str, Any]:
    """The ``--dry-run`` view: never the token."""
    return {
        "program": plan_.argv[0],
        "args": plan_.argv[1:],
        "env": [f"{k}={v}" for k, v in sorted(plan_.env.items())],
        "cwd": "/",
        "stdin": "sealed memfd of prompt.md",
        "model_access": _model_access(plan_),
        "agent_session": _agent_session(plan_.request),
    }


def _agent_session(request: LaunchRequest) -> str:
    if request.agentns is not None:
        session = request.agentns
        return f"{session.intent} {session.session_id} ({session.mode})"
    return f"headless:{request.role} (established by agentns when the launch runs)"


def _model_access(plan_: Plan) -> str:
    if plan_.gateway is not None:
        return f"gateway {plan_.gateway.base_url} (sentinel {plan_.gateway.lease.upstream})"
    return "token-in-env" if plan_.token is not None else "none"


HostRelays = Callable[[list[Relay]], contextlib.AbstractContextManager[None]]


def _default_host_relays(relays: list[Relay]) -> contextlib.AbstractContextManager[None]:
    """The host half of the relays: agentc.supervisor.relay.HostRelay (a sibling module)."""
    try:
        from agentc.supervisor.net import addresses
        from agentc.supervisor.net import host_relay as relay
    except ImportError:
        raise SupervisorError(
            "relays are configured but agentc.supervisor.relay is missing"
        ) from None
    endpoints = [addresses.endpoint(r.name, r.address, r.target) for r in relays]
    net_dirs = {Path(r.socket).parent for r in relays}
    host = relay.HostRelay(net_dirs.pop(), endpoints)

    @contextlib.contextmanager
    def serving() -> Iterator[None]:
        with host:
            yield

    return serving()


@contextlib.contextmanager
def _forward_termination(proc: subprocess.Popen[bytes]) -> Iterator[None]:
    """SIGTERM/SIGINT/SIGHUP to the launch kill the sandbox; the run still ends recorded."""

    def handler(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGKILL)

    saved = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, previous in saved.items():
            signal.signal(signum, previous)


def execute(plan_: Plan, host_relays: HostRelays | None = None) -> Outcome:
    """Run a planned launch to its end and record it; returns how the harness ended.

    With the gateway, the launch's sentinel is issued (held over the control connection)
    before anything is written and revoked when the launch ends, however it ends.
    """
    lease = None
    if plan_.gateway is not None:
        from agentc.supervisor.gateway.lease import Lease

        lease = Lease(plan_.gateway.lease)
    sentinel = lease.open() if lease is not None else None
    try:
        return _execute(plan_, host_relays, lease, sentinel)
    finally:
        if lease is not None:
            lease.close("the launch ended abnormally")  # a no-op once _execute closed it


def _execute(
    plan_: Plan, host_relays: HostRelays | None, lease: Lease | None, sentinel: str | None
) -> Outcome:
    layout, request = plan_.layout, plan_.request
    env = dict(plan_.env)
    sealed = prompt_mod.seal_prompt(plan_.prompt)
    try:
        rundir.prepare(layout)
        if plan_.gateway is not None and sentinel is not None:
            model = None if request.model == "default" else request.model
            endpoint = harness_env.ModelEndpoint(plan_.gateway.base_url, sentinel, model)
            setup = harness_env.setup(
                request.harness,
                endpoint,
                home=layout.run / "state/home",
                codex_home=layout.run / "state/codex-home",
            )
            try:
                harness_env.write_files(setup, exclusive=True)
            except OSError as exc:
                raise SupervisorError(f"cannot write the harness's model settings: {exc}") from None
            env.update(setup.env)
        if plan_.candidate_script is not None:
            # Generated, read-only inside the launch (the run dir is bound read-only).
            script_fd = rundir.create_new(layout.run / "candidate-shell", 0o500)
            with os.fdopen(script_fd, "w", encoding="utf-8") as handle:
                handle.write(plan_.candidate_script)
        events = rundir.create_new(layout.run / "events.jsonl")
        errors = rundir.create_new(layout.run / "stderr.log")
    except BaseException:
        sealed.close()
        raise
    if plan_.token is not None:
        env[TOKEN_ENV[request.harness]] = plan_.token
    reaper.set_child_subreaper()
    started = {
        "session_id": request.session_id,
        "role": request.role,
        "harness": request.harness,
        "prompt_sha256": sealed.sha256,
        "started_unix_nanos": time.time_ns(),
        "model_access": _model_access(plan_),
        **agentns_fields(request),
    }
    relays = list(plan_.description.relays)
    serve = host_relays or _default_host_relays
    open_fds = [events, errors]
    try:
        rundir.write_new_json(layout.run / ".state-started", started)
        with serve(relays) if relays else contextlib.nullcontext():
            try:
                proc = subprocess.Popen(
                    plan_.argv,
                    stdin=sealed.fd,
                    stdout=events,
                    stderr=errors,
                    env=env,
                    cwd="/",
                    close_fds=True,
                    preexec_fn=reaper.child_setup,
                )
            except OSError as exc:
                _mark_terminal(layout, request, Outcome("failed", None, None), plan_)
                raise SupervisorError(f"cannot start {plan_.argv[0]}: {exc}") from None
            # The host keeps no handle on the prompt or the logs once the child has them.
            sealed.close()
            while open_fds:
                os.close(open_fds.pop())
            with _forward_termination(proc):
                returncode = proc.wait()
    finally:
        sealed.close()
        for fd in open_fds:
            os.close(fd)
    report = reaper.reap_leftovers()
    line = report.line()
    if line:
        print(line, file=sys.stderr, flush=True)
    outcome = translate_status(returncode)
    if lease is not None:
        # Every process of the launch is gone: nothing can use the sentinel any more.
        end = lease.close()
        if end is not None and end.cap is not None:
            outcome = Outcome(outcome.reason, outcome.exit_code, outcome.signal, end.cap)
    _mark_terminal(layout, request, outcome, plan_)
    return outcome


def _mark_terminal(
    layout: RunLayout, request: LaunchRequest, outcome: Outcome, plan_: Plan
) -> None:
    record: dict[str, Any] = {
        "role": rundir.ROLE_SLUGS[request.role],
        "session_id": request.session_id,
        "finished_unix_nanos": time.time_ns(),
        "reason": outcome.reason,
        "exit_code": outcome.exit_code,
        "signal": outcome.signal,
        **agentns_fields(request),
    }
    if plan_.gateway is not None:
        record["cap"] = outcome.cap  # which gateway cost cap refused a model call, or null
    rundir.write_new_json(layout.run / ".state-terminal.json", record)
