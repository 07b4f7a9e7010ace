"""``agentc up`` and ``agentc status`` (docs/getting-started.md)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import click
import httpx
from rich.console import Console
from rich.live import Live

from agentc.attention.config import AttentionConfig
from agentc.attention.schedule import Scheduler
from agentc.client.errors import TransportFailure
from agentc.core.addresses import local_console_origin, new_local_console_origin
from agentc.core.errors import AgentcError, ConfigError
from agentc.core.quiet import parse_window
from agentc.files import exits
from agentc.files.procs import SYSTEM_PATH
from agentc.files.sockets import sun_path
from agentc.up import bootstrap, configs, status
from agentc.up.bootstrap import Options, program
from agentc.up.gateway import free_port, write_gateway
from agentc.up.harnesses import ModelAccess, check_harness
from agentc.up.layout import Layout, check_owner, check_writable, make_private
from agentc.up.procs import GivenUp, Tree

DEFAULT_PORT = 8080
EGRESS_INNER = "127.0.0.1:3128"  # the egress proxy's address inside every launch
STOP_ORDER = [
    ("supervisor", 60.0),
    ("integrator", 15.0),
    ("gateway", 15.0),
    ("egress", 15.0),
    ("coordinator", 15.0),
]
HEALTH_SECONDS = 60.0
# The status display's requests: short, so a coordinator that hangs never stalls the watch
# loop (it restarts children and runs the scheduled jobs).
WATCH_TIMEOUT = httpx.Timeout(2.0)


def fail(problem: BaseException | str, status: int = exits.INVALID_INPUT) -> NoReturn:
    exits.fail("agentc", problem, status)


@click.group()
def main() -> None:
    """agentc: hand coding tasks to agents and get reviewed, tested, landed commits back."""
    # Everything up and the programs it starts create is private to the user (the state
    # directory, its logs and repositories): no other local account reads any of it.
    os.umask(0o077)


def state_option(fn: Any) -> Any:
    return click.option(
        "--state-dir",
        type=click.Path(file_okay=True, path_type=Path),
        default=Path(".agentc"),
        show_default=True,
        help="Where everything lives (database, credentials, repositories, logs).",
    )(fn)


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As the server binds: a listener refuses it, a closed connection's TIME_WAIT does not.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def child_env() -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", SYSTEM_PATH)
    env = {
        "PATH": f"{bin_dir}:{path}",
        "LANG": "C.UTF-8",
        "HOME": os.environ.get("HOME", "/nonexistent"),
    }
    if os.environ.get("PYTHONPATH"):  # agentc run from a source tree
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def wait_healthy(origin: str, tree: Tree) -> None:
    deadline = time.monotonic() + HEALTH_SECONDS
    while time.monotonic() < deadline:
        for child in tree.exited():
            raise ConfigError(f"the coordinator exited at start:\n{child.tail()}")
        try:
            if httpx.get(f"{origin}/healthz", timeout=2, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise ConfigError(f"the coordinator did not answer on {origin} within {HEALTH_SECONDS:g} s")


def wait_listening(path: Path, tree: Tree, name: str) -> None:
    """Until the Unix socket ``path`` accepts a connection; a child that exits is an error."""
    deadline = time.monotonic() + HEALTH_SECONDS
    while time.monotonic() < deadline:
        for child in tree.exited():
            raise ConfigError(f"the {child.name} exited at start:\n{child.tail()}")
        try:
            with socket.socket(socket.AF_UNIX) as probe, sun_path(str(path)) as short:
                probe.connect(short)
                return
        except OSError:
            time.sleep(0.05)
    raise ConfigError(f"the {name} did not listen on {path} within {HEALTH_SECONDS:g} s")


class Up:
    """One ``agentc up``: set up (first time) or resume, run the tree, stop it on a signal."""

    def __init__(self, options: Options, live: bool) -> None:
        self.options = options
        self.layout = Layout(options.state)
        self.live = live
        self.tree = Tree()
        self.stopping = False
        self.created = False  # this up created the state directory (removed if setup fails)
        self.access: ModelAccess | None = None
        self.scheduler: Scheduler | None = None  # the attention jobs (docs/attention.md)
        self.lock: int | None = None  # the state directory's lock, held while this up runs

    @property
    def origin(self) -> str:
        """The API's origin: what the programs' credentials name (loopback, bearer tokens)."""
        return f"http://127.0.0.1:{self.options.port}"

    def check(self, record: dict[str, Any] | None) -> str:
        """Everything that can refuse, before anything is written; returns the branch."""
        layout, options = self.layout, self.options
        self.access = check_harness(options.harness)
        if not port_free(options.port):
            raise ConfigError(
                f"--port {options.port}: the port is busy (another program listens on "
                "127.0.0.1 there): stop it or choose another --port"
            )
        if record is not None:
            if options.repo is not None and record.get("repo") != str(options.repo.resolve()):
                raise ConfigError(
                    f"--repo: {layout.root} is bound to {record.get('repo') or 'the sample'}; "
                    "use another --state-dir for another repository"
                )
            return str(record["branch"])
        check_writable(layout.root)
        bootstrap.check_new_state(layout)
        if options.repo is not None:
            if not options.checks:
                raise ConfigError(
                    "--check: name the command that tests your repository (it is the required "
                    "check every change must pass), e.g. --check 'make test'"
                )
            return bootstrap.check_repo(options.repo)
        return "main"

    def start(self) -> dict[str, Any]:
        layout, options = self.layout, self.options
        existed = layout.root.exists()
        if layout.read_record() is None:  # a directory up did not make is refused untouched
            check_writable(layout.root)
            if layout.running_pid() is None:  # (not another up setting it up: refused below)
                bootstrap.check_new_state(layout)
        make_private(layout.root)
        # One up per state directory, from before anything is read for setting up until it
        # exits: a second is refused here, naming the first's pid (and never removes it).
        self.lock = layout.hold()
        self.created = not existed
        record = layout.read_record()  # as the lock's holder sees it
        branch = self.check(record)
        password = None
        if record is None:
            password = bootstrap.before_server(options, layout, branch)
        else:
            bootstrap.end_browser_sessions(layout)
        console = local_console_origin(record and record.get("console"), options.port)
        self.start_coordinator(console)
        if record is None:
            assert password is not None
            origins = (self.origin, console)
            record = bootstrap.after_server(options, layout, origins, password, branch)
        elif record.get("port") != options.port:
            bootstrap.rewrite_origin(layout, self.origin)
        record.update(port=options.port, harness=options.harness, console=console)
        if options.quiet_hours is not None:  # "off" ends them; not given keeps the last run's
            record["quiet_hours"] = None if options.quiet_hours == "off" else options.quiet_hours
        if options.agents is not None:  # 0: the machine's number; not given keeps the last run's
            record["agents"] = options.agents or None
        gw = write_gateway(layout, self.access) if self.access is not None else None
        if gw is not None:
            argv = [*program("agentc-supervisor"), "model-gateway", "--config", str(gw.config)]
            self.tree.start("gateway", argv, layout.log("gateway"), child_env())
        # The egress proxy: the launches' only way out (the default allowlist: the model
        # vendors and GitHub; every address checked public), on a Unix socket in the private
        # state directory: only this user's launch relays reach it.
        egress = layout.egress_socket.resolve()
        egress.parent.mkdir(mode=0o700, exist_ok=True)
        argv = [*program("agentc-supervisor"), "egress-proxy", "--socket", str(egress)]
        argv += ["--log", str(layout.root.resolve() / "logs" / "egress.jsonl")]
        argv += ["--launch-logs", str(layout.launch_logs.resolve())]
        self.tree.start("egress", argv, layout.log("egress"), child_env())
        wait_listening(egress, self.tree, "egress proxy")
        configs.write_supervisor(
            layout, record, self.origin, options.harness, gw, (EGRESS_INNER, egress)
        )
        configs.write_integrator(layout, record, self.origin)
        bootstrap.integrator_signing_key(layout, child_env())
        bootstrap.ensure_attention(console, layout, self.origin, record)
        configs.write_attention(layout, record, self.origin, options.harness, gw)
        if options.seed_demo and not record.get("demo_seeded"):
            bootstrap.seed_demo(console, layout, record["project_id"])
            record["demo_seeded"] = True
        record["pid"] = os.getpid()
        record.pop("children", None)  # a previous up's, until this one's are all started
        layout.write_record(record)
        self.created = False  # set up: from now on it is kept
        supervisor = [*program("agentc-supervisor"), "--config", str(layout.supervisor_config)]
        self.tree.start("supervisor", [*supervisor, "run"], layout.log("supervisor"), child_env())
        integrator = [*program("agentc-integrator"), "--config", str(layout.integrator_config)]
        self.tree.start("integrator", [*integrator, "run"], layout.log("integrator"), child_env())
        record["children"] = self.processes()  # for `agentc status` in another terminal
        layout.write_record(record)
        self.scheduler = Scheduler(
            program("agentc-attention"),
            layout.attention_config,
            AttentionConfig.load(layout.attention_config),
            configs.harness_value(options.harness),
            layout.root / "logs",
            child_env(),
        )
        return record

    def start_coordinator(self, console: str) -> None:
        """The coordinator on loopback, its public origin the console's own name. The name
        goes in the environment, never on the command line: every local user can read a
        process's command line, and the name is what keeps the console's cookies from them."""
        layout = self.layout
        argv = [*program("agent-coordinator-server"), "--database", str(layout.database)]
        argv += ["--allow-insecure-loopback", "--listen", f"127.0.0.1:{self.options.port}"]
        env = {**child_env(), "COORDINATOR_PUBLIC_ORIGIN": console}
        env["COORDINATOR_CANARY_PRINCIPALS"] = bootstrap.ATTENTION_AGENT  # its canary tasks
        self.tree.start("coordinator", [*argv, "serve"], layout.log("coordinator"), env)
        wait_healthy(self.origin, self.tree)

    def processes(self) -> dict[str, int | None]:
        return {c.name: c.proc.pid if c.proc.poll() is None else None for c in self.tree.children}

    def watch(self, record: dict[str, Any]) -> int:
        console = Console()
        # Never folded: the whole address is what a person copies into the browser.
        console.print(f"agentc is up: console {record['console']}/console", soft_wrap=True)
        console.print(f"  sign in as admin; the password is in {self.layout.admin_password}")
        console.print(f"  logs in {self.layout.root / 'logs'}; Ctrl-C stops everything")
        no_reviews = configs.reviews_by_agents(self.options.harness)
        if no_reviews is not None:
            console.print(
                f"[yellow]note: no agent reviews: {no_reviews}. Review each task in the "
                "console (Review on the task's page); run agentc up as a normal user for agent "
                "reviews.[/yellow]"
            )
        last = ""
        with contextlib.ExitStack() as stack:
            view = (
                stack.enter_context(Live(console=console, auto_refresh=False))
                if self.live
                else None
            )
            while not self.stopping:
                if not self.tend(console, record):
                    return 1
                try:
                    snap = status.snapshot(
                        self.origin, self.layout, record, self.processes(), WATCH_TIMEOUT
                    )
                except (AgentcError, TransportFailure) as exc:
                    snap = None
                    console.print(f"status unavailable: {exc}")
                if snap is not None:
                    if view is not None:
                        view.update(status.table(snap), refresh=True)
                    else:
                        line = " ".join(f"{k}={v}" for k, v in snap["tasks"].items() if v)
                        if line != last:
                            console.print(f"tasks: {line or 'none'}")
                            last = line
                if self.scheduler is not None:
                    self.scheduler.tick(time.time())
                self.pause(1.0)
        return 0

    def tend(self, console: Console, record: dict[str, Any]) -> bool:
        """Start again what died (procs.Tree.tend), each restart said on standard output;
        False when a child is given up on (then everything stops)."""
        try:
            said = self.tree.tend(time.monotonic())
        except GivenUp as exc:
            console.print(
                f"agentc: {exc}", style="red", markup=False, highlight=False, soft_wrap=True
            )
            console.print("agentc: stopping everything", style="red")
            return False
        for line in said:
            console.print(
                f"agentc: {line}", style="yellow", markup=False, highlight=False, soft_wrap=True
            )
        if any(line.startswith("restarted") for line in said):
            record["children"] = self.processes()  # for `agentc status`
            self.layout.write_record(record)
        return True

    def pause(self, seconds: float) -> None:
        """Sleep, waking early when a signal asked us to stop."""
        deadline = time.monotonic() + seconds
        while not self.stopping and time.monotonic() < deadline:
            time.sleep(0.1)

    def stop(self) -> None:
        if self.scheduler is not None:
            self.scheduler.stop()
        self.tree.stop_all(STOP_ORDER)
        try:
            record = self.layout.read_record()
        except ConfigError:
            return
        if record is not None and record.get("pid") == os.getpid():
            record.pop("pid", None)
            self.layout.write_record(record)

    def run(self) -> int:
        def on_signal(_signum: int, _frame: object) -> None:
            self.stopping = True

        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, on_signal)
        try:
            try:
                record = self.start()
                code = self.watch(record)
            except (AgentcError, OSError) as exc:
                self.stop()
                if self.created:
                    shutil.rmtree(self.layout.root, ignore_errors=True)
                fail(exc)
            click.echo("agentc: stopping (the supervisor drains its launch first)...", err=True)
            self.stop()
            click.echo("agentc: stopped; `agentc up` again resumes where this left off", err=True)
            return code
        finally:
            if self.lock is not None:  # everything stopped (or removed): another up may start
                os.close(self.lock)


@main.command()
@state_option
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=None,
    help="Loopback port of the coordinator (default 8080, then the last one used).",
)
@click.option(
    "--repo",
    type=click.Path(path_type=Path),
    default=None,
    help="A git repository to work on (default: a sample it creates).",
)
@click.option(
    "--check",
    "checks",
    multiple=True,
    help="A command that tests the repository: the required check (repeatable).",
)
@click.option(
    "--harness",
    default="example",
    show_default=True,
    help="example, claude, codex, pi or command:<path>.",
)
@click.option("--seed-demo", is_flag=True, help="File three sample tasks (sample repository only).")
@click.option(
    "--live/--no-live", default=None, help="The live status table (default: on a terminal)."
)
@click.option(
    "--quiet-hours",
    default=None,
    metavar="HH:MM-HH:MM",
    help="Claim new work only in this local-time window (off: always; kept for later runs).",
)
@click.option(
    "--agents",
    type=click.IntRange(0, 256),
    default=None,
    metavar="N",
    help="Run up to N launches at once (0: as many as this machine holds; kept for later runs).",
)
def up(
    state_dir: Path,
    port: int | None,
    repo: Path | None,
    checks: tuple[str, ...],
    harness: str,
    seed_demo: bool,
    live: bool | None,
    quiet_hours: str | None,
    agents: int | None,
) -> None:
    """Run the whole system on this machine: coordinator, supervisor, integrator."""
    if quiet_hours is not None and quiet_hours != "off":
        try:
            parse_window(quiet_hours)
        except ValueError as exc:
            fail(f"--quiet-hours: {exc}")
    layout = Layout(state_dir.absolute())
    try:
        check_owner(layout.root)  # before anything of it is read: another account's is refused
        record = layout.read_record()
    except ConfigError as exc:
        fail(exc)
    if seed_demo and (repo is not None or (record is not None and record.get("repo"))):
        fail("--seed-demo: the demo tasks are for the sample repository (omit --repo)")
    chosen = port or (record.get("port") if record else None) or DEFAULT_PORT
    password = None
    if record is None and sys.stdin.isatty():
        password = (
            click.prompt(
                "Password for the console's admin (empty: generate one)",
                default="",
                hide_input=True,
                show_default=False,
            )
            or None
        )
    options = Options(
        state=layout.root,
        port=int(chosen),
        repo=repo,
        checks=list(checks),
        harness=harness,
        seed_demo=seed_demo,
        password=password,
        quiet_hours=quiet_hours,
        agents=agents,
    )
    sys.exit(Up(options, sys.stdout.isatty() if live is None else live).run())


@main.command("status")
@state_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
def status_cmd(state_dir: Path, as_json: bool) -> None:
    """Tasks by work status, the processes, the launches and the cost."""
    layout = Layout(state_dir.absolute())
    try:
        record = layout.read_record()
        if record is None:
            fail(f"{layout.root}: no agentc up here yet (run `agentc up` first)")
        snap = _status(layout, record)
    except (AgentcError, TransportFailure) as exc:
        fail(exc)
    if as_json:
        click.echo(json.dumps(snap, indent=2))
    else:
        Console().print(status.table(snap))


@main.command("canary")
@state_option
def canary_cmd(state_dir: Path) -> None:
    """Run the end-to-end canary now (agentc up must be running): file a canary task, wait
    until it lands, record and report the result (docs/attention.md)."""
    layout = Layout(state_dir.absolute())
    try:
        record = layout.read_record()
    except ConfigError as exc:
        fail(exc)
    if record is None or layout.running_pid() is None:
        fail(f"{layout.root}: agentc up is not running here (start it first)")
    argv = [*program("agentc-attention"), "--config", str(layout.attention_config)]
    harness = configs.harness_value(str(record.get("harness") or "example"))
    done = subprocess.run([*argv, "canary", "--harness", harness], env=child_env())
    sys.exit(done.returncode)


def _status(layout: Layout, record: dict[str, Any]) -> dict[str, Any]:
    """While ``up`` runs, ask its coordinator; after, start one briefly on a free port."""
    running = layout.running_pid()
    processes: dict[str, int | None] = {"up": running}
    if running is not None:
        processes.update(record.get("children") or {})
        return status.snapshot(f"http://127.0.0.1:{record['port']}", layout, record, processes)
    port = free_port()
    origin = f"http://127.0.0.1:{port}"
    tree = Tree()
    argv = [*program("agent-coordinator-server"), "--database", str(layout.database)]
    argv += ["--allow-insecure-loopback", "--listen", f"127.0.0.1:{port}", "serve"]
    # A console nobody is told of: no browser session can be made on the shared address.
    env = {**child_env(), "COORDINATOR_PUBLIC_ORIGIN": new_local_console_origin(port)}
    tree.start("coordinator", argv, layout.log("status-coordinator"), env)
    try:
        wait_healthy(origin, tree)
        return status.snapshot(origin, layout, record, processes)
    finally:
        tree.stop("coordinator", 15.0)


if __name__ == "__main__":  # python -m agentc.up.cli
    main()
