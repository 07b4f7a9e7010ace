"""``agentc-host check``: the containment suite, from inside real launches as each role's account.

Each role gets one real launch the loop's way (:func:`agentc.supervisor.loop.hostlaunch.start`:
forked, switched to the role's account, sandboxed by the installed supervisor), whose agent is
the probe (:mod:`agentc.host.probe`): it tries each row and says what happened. Every stand-in
is made on the host first and checked there (it exists, root can read or reach it, the process
is alive), so a refusal inside means the sandbox kept it out; and what a launch must not write
is looked for on the host afterwards. The implementer's launch gets its candidate push helper,
started as the loop starts it, and the helper is tried from outside while the launch runs.

Dummy Claude tokens are planted for roles that have none (root:<role> 0440) and removed after,
only while unchanged; a dummy an interrupted check left is a FAIL (and is removed). Everything
the check makes is removed, whatever happens.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import shutil
import socket
import stat
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentc.core.roles import ROLES, role_slug
from agentc.files import json_objects, write_atomic
from agentc.files.accounts import become, named_account_problems, unprivileged_account
from agentc.host.probe import PROBE
from agentc.host.settings import HostSettings
from agentc.push.helper import PushHelper
from agentc.push.protocol import NOT_LAUNCH
from agentc.supervisor.config import SupervisorConfig
from agentc.supervisor.launch import preflight_host
from agentc.supervisor.launch import root as launch_root
from agentc.supervisor.launch.request import CoordinatorAccess, LaunchRequest
from agentc.supervisor.launch.rundir import RunLayout
from agentc.supervisor.loop import hostlaunch

DUMMY = "agentc-check-dummy-token-"
DONE_SECONDS = 180.0


@dataclass
class Result:
    name: str
    passed: bool
    detail: str = ""

    def line(self) -> str:
        return f"PASS {self.name}" if self.passed else f"FAIL {self.name}: {self.detail}"


@dataclass
class Row:
    """One thing a launch tries; ``want`` says whether it must get through."""

    id: str
    name: str
    op: str
    target: Any = None
    want: bool = False
    expect: str | None = None  # list: the name that must not be seen
    written: Path | None = None  # write: must not exist on the host afterwards


@dataclass
class Suite:
    settings: HostSettings
    config: SupervisorConfig
    tag: str = field(default_factory=lambda: secrets.token_hex(4))
    results: list[Result] = field(default_factory=list)
    undo: list[Callable[[], None]] = field(default_factory=list)
    sockets: dict[Path, Path] = field(default_factory=dict)  # stand-ins, by directory

    @property
    def state(self) -> Path:
        return Path(os.path.realpath(self.config.resolved_state_dir()))

    def add(self, name: str, problem: str | None) -> None:
        self.results.append(Result(name, problem is None, problem or ""))

    def run(self) -> list[Result]:
        try:
            self.host_rows()
            probe = self.probe()
            for role in ROLES:
                self.launch(role, probe)
        finally:
            for step in reversed(self.undo):
                with contextlib.suppress(Exception):
                    step()
        return self.results

    # -- on the host ------------------------------------------------------------------------

    def host_rows(self) -> None:
        names = self.settings.accounts
        accounts = [("implementer", self.config.implementer_user),
                    ("reviewer", self.config.reviewer_user),
                    ("push helper", self.config.push_helper.user),
                    ("egress proxy", names.egress)]  # fmt: skip
        found = named_account_problems(accounts)
        self.add("host: the role, push and egress accounts are fit", "; ".join(found) or None)
        layout = [
            p for r in ROLES for p in preflight_host.layout_problems(self.config, self.state, r)
        ]
        self.add("host: the state tree has the seed's owners and modes", "; ".join(layout) or None)
        program = launch_root.program_problems(self.config)
        self.add("host: agentc-supervisor is root's and protected", "; ".join(program) or None)

    def _file(self, path: Path, data: bytes, uid: int, gid: int, mode: int) -> Path:
        self.mkdirs(path.parent, 0o700)
        write_atomic(path, data, mode=mode)
        os.chown(path, uid, gid)
        self.undo.append(lambda: path.unlink(missing_ok=True))
        return path

    def token(self, role: str, account: pwd.struct_passwd) -> Path:
        """The role's Claude token, a dummy planted when it has none."""
        path = self.state / role_slug(role) / "claude-token"
        dummy = f"{DUMMY}{self.tag}\n".encode()
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            write_atomic(path, dummy, mode=0o440)
            os.chown(path, 0, account.pw_gid)
            self.undo.append(lambda: _remove_if(path, dummy))
            return path
        if stat.S_ISREG(info.st_mode) and info.st_size == len(dummy):
            with contextlib.suppress(OSError):
                if path.read_bytes().startswith(DUMMY.encode()):
                    path.unlink()
                    why = f"{path} was one (removed): install the role's real token"
                    self.add(f"{role}: no dummy token left by an interrupted check", why)
                    return self.token(role, account)
        return path

    def mkdirs(self, directory: Path, mode: int = 0o755) -> None:
        """``directory`` and any missing parent, root ``mode``, each removed after (if empty)."""
        missing = [d for d in (directory, *directory.parents) if not d.exists()]
        for folder in reversed(missing):
            folder.mkdir(mode=mode)
            self.undo.append(_dir_remover(folder))

    def listener(self) -> tuple[str, int]:
        """A TCP listener on host loopback, reachable from the host (checked)."""
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        self.undo.append(server.close)
        threading.Thread(target=_accept_all, args=(server,), daemon=True).start()
        address: tuple[str, int] = server.getsockname()
        with socket.create_connection(address, timeout=2):
            pass
        return address

    def unix_standin(self, directory: Path) -> Path:
        """A listening socket in ``directory`` (made root 0755 if missing, removed after)."""
        if directory in self.sockets:
            return self.sockets[directory]
        self.mkdirs(directory)
        path = directory / f"agentc-check-{self.tag}.sock"
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        os.chmod(path, 0o666)  # noqa: S103 - only the sandbox may keep a launch from it
        server.listen(4)
        self.undo.append(lambda: path.unlink(missing_ok=True))
        self.undo.append(server.close)
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(str(path))
        self.sockets[directory] = path
        return path

    def sleeper(self, account: pwd.struct_passwd) -> int:
        """A process of ``account`` outside any launch (alive: checked)."""
        proc = subprocess.Popen(
            ["sleep", "600"], cwd="/", env={"PATH": "/usr/bin:/bin"}, start_new_session=True,
            preexec_fn=lambda: become(account),
        )  # fmt: skip
        self.undo.append(lambda: _end(proc))
        os.kill(proc.pid, 0)
        return proc.pid

    def probe(self) -> Path:
        folder = self.settings.opt_dir / f"check-{self.tag}"
        folder.mkdir(mode=0o755)
        self.undo.append(lambda: shutil.rmtree(folder, ignore_errors=True))
        path = folder / "probe"
        write_atomic(path, PROBE.encode(), mode=0o755)
        return path

    # -- the rows of one role ---------------------------------------------------------------

    def rows(self, role: str, account: pwd.struct_passwd) -> list[Row]:
        other = "reviewer" if role == "implementer" else "implementer"
        other_account = launch_root.role_account(self.config, other)
        tag, state, slug = self.tag, self.state, role_slug(role)
        secret = self._file(state / role_slug(other) / "runs" / f"agentc-check-{tag}" / "secret",
                            b"another launch's\n", other_account.pw_uid, other_account.pw_gid,
                            0o600)  # fmt: skip
        os.chown(secret.parent, other_account.pw_uid, other_account.pw_gid)
        os.chmod(secret.parent, 0o700)
        self.undo.append(_rmtree(secret.parent))
        loop_file = self._file(state / "loop" / f"agentc-check-{tag}", b"x\n", 0, 0, 0o600)
        etc_file = self._file(self.settings.etc_dir / f"agentc-check-{tag}", b"x\n", 0, 0, 0o600)
        for path in (secret, loop_file, etc_file):
            path.read_bytes()  # on the host, root reads it
        rows = [
            Row("who", f"{role}: the launch runs as {account.pw_name}", "whoami", want=True),
            Row("other", f"{role}: cannot read the {other}'s run", "read", str(secret)),
            Row("token", f"{role}: cannot read its Claude token inside a launch", "read",
                str(self.token(role, account))),
            Row("loop", f"{role}: cannot read the loop's state", "read", str(loop_file)),
            Row("etc", f"{role}: cannot read {self.settings.etc_dir}", "read", str(etc_file)),
        ]  # fmt: skip
        writes = [("bin", "write the programs' folder", self.settings.bin_dir),
                  ("role", "add to its role directory", state / slug),
                  ("state", "write the state root", state)]  # fmt: skip
        if (state / slug / "claude-config").is_dir():
            writes.append(("seeds", "add to its protected claude-config",
                           state / slug / "claude-config"))  # fmt: skip
        for key, what, folder in writes:
            target = folder / f"agentc-check-{tag}-{slug}"
            rows.append(Row(f"w-{key}", f"{role}: cannot {what}", "write", str(target),
                            written=target))  # fmt: skip
            self.undo.append(_unlinker(target))
        rows.append(Row("tcp", f"{role}: cannot reach a listener on host loopback", "tcp",
                        list(self.listener())))  # fmt: skip
        rows.append(Row("signal", f"{role}: cannot signal its own account's processes outside",
                        "signal", self.sleeper(account)))  # fmt: skip
        if self.config.egress_listen:
            sock = self.unix_standin(self.config.egress_socket.parent)
            rows.append(Row("egress", f"{role}: cannot reach the egress proxy's socket directly",
                            "unix", str(sock)))  # fmt: skip
        if self.config.gateway_target() is not None:
            sock = self.unix_standin(self.config.gateway_control.parent)
            rows.append(Row("control", f"{role}: cannot reach the gateway's control socket",
                            "unix", str(sock)))  # fmt: skip
        if role == "implementer":
            other_dir = state / "push" / f"agentc-check-{tag}"
            other_dir.mkdir(mode=0o711, parents=True)
            self.undo.append(lambda: _rmdir(other_dir))
            rows.append(Row("push", "implementer: reaches its own push helper", "push",
                            want=True))  # fmt: skip
            rows.append(Row("push-dir", "implementer: sees no other launch's push directory",
                            "list", str(state / "push"), expect=other_dir.name))  # fmt: skip
        return rows

    # -- one launch -------------------------------------------------------------------------

    def launch(self, role: str, probe: Path) -> None:
        try:
            account = launch_root.role_account(self.config, role)
            rows = self.rows(role, account)
        except Exception as exc:  # a stand-in that cannot be made is a failed check
            self.add(f"{role}: the check's stand-ins are made on the host", _error(exc))
            return
        launch_id = str(uuid.uuid4())
        layout = RunLayout.of_launch(self.state, role, launch_id)  # type: ignore[arg-type]
        release = layout.run / "release"
        for path in (layout.run, layout.clone):
            path.mkdir(mode=0o700)
            self.undo.append(_rmtree(path))
        plan = {"rows": [{"id": r.id, "op": r.op, "target": r.target, "expect": r.expect}
                         for r in rows], "release": str(release)}  # fmt: skip
        write_atomic(layout.prompt, json.dumps(plan).encode(), mode=0o600)
        hostlaunch.hand_over(account, layout.run, layout.clone)
        helper = None
        if role == "implementer":
            sweep = self.state / "push" / ".sweep"  # the helper's lock, the loop's from now on
            if not sweep.exists():
                self.undo.append(_unlinker(sweep))
            push = unprivileged_account(self.config.push_helper.user, "push account")
            helper = PushHelper.prepare(self.state, launch_id, group=account.pw_gid, account=push)
            self.undo.append(helper.stop)
        access = CoordinatorAccess(
            session=launch_id,
            repo_config=layout.run / "coordinator-binding.toml",
            push_socket=helper.socket if helper else None,
        )
        request = LaunchRequest(role, f"command:{probe}", layout.run, layout.clone,  # type: ignore[arg-type]
                                launch_id, coordinator=access if helper else None)  # fmt: skip
        try:
            running = hostlaunch.start(self.config, request)
        except Exception as exc:
            self.add(f"{role}: a launch as {account.pw_name} starts", _error(exc))
            return
        try:
            if helper is not None:
                helper.start(parent_pid=running.pid, task="agentc-check", launch=launch_id,
                             remote="https://127.0.0.1:9/agentc-check.git", digests=[],
                             program=self.config.push_helper.program)  # fmt: skip
            answers = self._answers(layout.run / "events.jsonl", running)
            if helper is not None:
                self.outside(helper, account)
        finally:
            release.touch()
            outcome = hostlaunch.finish(running)
        self.judge(role, rows, answers, account, outcome.reason)

    def _answers(self, events: Path, running: hostlaunch.Running) -> dict[str, dict[str, Any]]:
        """The probe's answers, once it says it is done (or the launch ended)."""
        deadline = time.monotonic() + DONE_SECONDS
        answers: dict[str, dict[str, Any]] = {}
        while time.monotonic() < deadline:
            answers, done = _read_answers(events)
            exited = isinstance(running, hostlaunch.RoleLaunch) and running.proc.poll() is not None
            if done or exited:
                break
            time.sleep(0.1)
        return answers

    def judge(
        self,
        role: str,
        rows: list[Row],
        answers: dict[str, dict[str, Any]],
        account: pwd.struct_passwd,
        ending: str,
    ) -> None:
        if not answers:
            self.add(f"{role}: the probe ran inside a launch", f"no answer (the launch {ending})")
            return
        for row in rows:
            answer = answers.get(row.id)
            if answer is None:
                self.add(row.name, "the probe gave no answer")
                continue
            reached, detail = bool(answer["reached"]), str(answer["detail"])
            problem = None
            if row.op == "whoami" and detail.split()[:1] != [str(account.pw_uid)]:
                problem = f"ran as uid {detail}, not {account.pw_uid}"
            elif reached != row.want:
                problem = ("got through: " if reached else "was kept out: ") + detail
            if row.written is not None and row.written.exists():
                problem = f"{row.written} was written on the host"
            self.add(row.name, problem)

    # -- the push helper from outside --------------------------------------------------------

    def outside(self, helper: PushHelper, account: pwd.struct_passwd) -> None:
        push = self.config.push_helper.user
        proc = helper.proc
        status = _status(proc.pid) if proc is not None else {}
        entry = pwd.getpwnam(push)
        ids = (f"{entry.pw_uid}\t" * 4).strip(), (f"{entry.pw_gid}\t" * 4).strip()
        seen = (status.get("Uid"), status.get("Gid"), status.get("Groups", ""))
        self.add(f"the push helper runs as {push} with only its own ids",
                 None if seen == (*ids, "") else f"its /proc status says {seen}")  # fmt: skip
        sock, folder = os.lstat(helper.socket), os.lstat(helper.socket.parent)
        want = (0o660, entry.pw_uid, account.pw_gid, 0o2750)
        got = (stat.S_IMODE(sock.st_mode), sock.st_uid, sock.st_gid, stat.S_IMODE(folder.st_mode))
        self.add("the push socket is 0660 push:implementer in a 2750 directory",
                 None if got == want else f"mode, uid, gid, directory mode: {got}")  # fmt: skip
        reviewer = launch_root.role_account(self.config, "reviewer")
        said = self._connect_as(reviewer, helper.socket)
        self.add("the reviewer account cannot reach the push socket",
                 None if said.startswith("refused") else f"it connected: {said}")  # fmt: skip
        said = self._connect_as(account, helper.socket)
        self.add("an implementer process outside the launch is refused by its helper",
                 None if NOT_LAUNCH in said else f"the helper answered {said!r}")  # fmt: skip

    def _connect_as(self, account: pwd.struct_passwd, path: Path) -> str:
        code = (
            "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.settimeout(10)\n"
            "try:\n s.connect(sys.argv[1])\nexcept OSError as e:\n print('refused',e);sys.exit()\n"
            "try:\n s.sendall(b'{}\\n');s.shutdown(socket.SHUT_WR)\nexcept OSError:\n pass\n"
            "print(s.recv(65536).decode())"
        )
        done = subprocess.run(
            [str(self.settings.python), "-I", "-c", code, str(path)], capture_output=True,
            text=True, timeout=30, cwd="/", env={"PATH": "/usr/bin:/bin"},
            preexec_fn=lambda: become(account),
        )  # fmt: skip
        return (done.stdout + done.stderr).strip()[:300]


def _accept_all(server: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while True:
            conn, _ = server.accept()
            conn.close()


def _end(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait()


def _unlinker(path: Path) -> Callable[[], None]:
    return lambda: path.unlink(missing_ok=True)


def _rmtree(path: Path) -> Callable[[], None]:
    return lambda: shutil.rmtree(path, ignore_errors=True)


def _dir_remover(path: Path) -> Callable[[], None]:
    return lambda: _rmdir(path)


def _rmdir(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.rmdir()


def _remove_if(path: Path, data: bytes) -> None:
    """Remove the dummy only while it is still ours (a real token placed meanwhile stays)."""
    with contextlib.suppress(OSError):
        if path.read_bytes() == data:
            path.unlink()


def _status(pid: int) -> dict[str, str]:
    found: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            found[key] = value.strip()
    return found


def _read_answers(events: Path) -> tuple[dict[str, dict[str, Any]], bool]:
    answers: dict[str, dict[str, Any]] = {}
    done = False
    with contextlib.suppress(OSError):
        for item in json_objects(events.read_text(errors="replace").splitlines()):
            if item.get("done") is True:
                done = True
            elif isinstance(item.get("id"), str):
                answers[item["id"]] = item
    return answers, done


def _error(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def run_suite(settings: HostSettings) -> list[Result]:
    config = SupervisorConfig.load(settings.supervisor_toml, what="supervisor configuration")
    return Suite(settings, config).run()
