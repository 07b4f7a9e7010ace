"""Containment rows: each a command run inside a real launch, and whether it may succeed.

Every stand-in is made on the host first and checked to exist (and be reachable) there, so a
refusal inside means the sandbox hid it. Each launch also writes an ``alive`` marker first, so
a row cannot pass because the mock harness never ran. Rows run as root (personal mode) unless
marked ``user``: then as a throwaway unprivileged account, the personal-mode identity.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.containment.kit import (
    ALWAYS_DENIED,
    CONFINED_DENIED,
    add_user_key,
    host_denials,
    host_denials_as,
    probe_script,
)
from tests.supervisor.kit import VENV_SITE, Kit, cleanup, create_user, delete_user, make_kit

pytestmark = pytest.mark.root


@dataclass(frozen=True)
class Row:
    name: str
    script: str
    may: bool
    role: str = "implementer"


def _own_address() -> str | None:
    out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        addr = line.split()[3].split("/")[0]
        if not addr.startswith("127."):
            return addr
    return None


class Listener:
    """A TCP server on the host (or a Unix socket at ``unix``) answering every connection
    with a fixed line once it has read a whole line of the caller's (the probes send
    ``hi``); it keeps what each connection sent before its answer. A launch's relay names the
    launch first, on a line of its own: the egress proxy's stand-in reads ``skip`` lines more
    before answering, as the proxy reads the request after that line (answering the launch
    line alone would close the connection while the probe's line is still on its way)."""

    def __init__(self, host: str, answer: bytes, unix: Path | None = None, skip: int = 0) -> None:
        self.lines = 1 + skip
        self.sock = socket.socket(socket.AF_UNIX if unix else socket.AF_INET)
        if unix is None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind((host, 0))
            self.port = self.sock.getsockname()[1]
        else:
            self.sock.bind(str(unix))
            self.port = 0
        self.sock.listen(16)
        self.answer = answer
        self.first: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(20)
                try:
                    got = b""
                    while got.count(b"\n") < self.lines and (more := conn.recv(1024)):
                        got += more
                    self.first.append(got)
                    conn.sendall(self.answer)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


@dataclass
class StandIns:
    kit: Kit
    other_secret: Path
    shm: Path
    shm_id: int
    loop: Listener
    proxy: Listener
    wide: Listener | None
    wide_addr: str | None
    setuid: Path
    fd_file: Path
    key_id: str


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandIns]:
    root = tmp_path_factory.mktemp("rows")
    # The egress proxy's stand-in, on its Unix socket in a directory no other mask hides.
    proxy_dir = Path(tempfile.mkdtemp(prefix="agentc-row-egress-", dir="/run"))
    proxy = Listener("", b"HTTP/1.1 403 Forbidden\r\n\r\n", unix=proxy_dir / "proxy.sock", skip=1)
    kit = make_kit(
        root / "kit", egress_listen="127.0.0.1:3128", egress_socket=str(proxy_dir / "proxy.sock")
    )
    other_run, _ = kit.new_run("exit 0\n")
    other_secret = other_run / "secret.txt"
    other_secret.write_text("other run\n")
    shm = Path(f"/dev/shm/agentc-row-{os.getpid()}")
    shm.write_text("host shm\n")
    os.chmod(shm, 0o600)
    made = subprocess.run(["ipcmk", "-M", "4096"], capture_output=True, text=True, check=True)
    shm_id = int(made.stdout.split()[-1])
    loop = Listener("127.0.0.1", b"host loopback\n")
    wide_addr = _own_address()
    wide = Listener("0.0.0.0", b"host wide\n") if wide_addr else None
    setuid = root / "suid" / "euid"
    setuid.parent.mkdir(mode=0o755)
    src = setuid.parent / "euid.c"
    src.write_text(
        '#include <stdio.h>\n#include <unistd.h>\nint main(void){printf("%d\\n",(int)geteuid());'
        "return geteuid()==0?0:1;}\n"
    )
    subprocess.run(["cc", "-o", str(setuid), str(src)], check=True)
    os.chmod(setuid, 0o4755)  # noqa: S103 - the setuid stand-in the row must not exploit
    fd_file = root / "inherited.txt"
    fd_file.write_text("inherited\n")
    key_id = add_user_key([], "root's keyring stand-in")
    try:
        yield StandIns(
            kit, other_secret, shm, shm_id, loop, proxy, wide, wide_addr, setuid, fd_file, key_id
        )
    finally:
        subprocess.run(["keyctl", "revoke", key_id], capture_output=True)
        shm.unlink(missing_ok=True)
        subprocess.run(["ipcrm", "-m", str(shm_id)], capture_output=True)
        for server in (loop, proxy, wide):
            if server:
                server.close()
        shutil.rmtree(proxy_dir, ignore_errors=True)
        cleanup(root)


def _tcp(addr: str, port: int, expect: str) -> str:
    """Connect, send a line, and succeed if the answer (read for up to 20 s: a loaded machine)
    holds ``expect``; a wrong or missing answer is told on stderr (the row's failure shows it)."""
    return (
        f"bash -c 'exec 3<>/dev/tcp/{addr}/{port} && echo hi >&3 && "
        f'got=$(timeout 20 head -c 64 <&3); echo "$got" | grep -q "{expect}" || '
        f'{{ echo "read: [$got]" >&2; exit 1; }}\''
    )


def rows(s: StandIns, fd: int) -> list[Row]:
    k = s.kit
    token = k.role_dir("implementer") / "claude-token"
    listed = [
        Row("write to /etc", "touch /etc/agentc-row-probe", False),
        Row("write into the run dir", "touch $RUN/planted", False),
        Row("append to prompt.md", "echo x >> $RUN/prompt.md", False),
        Row("write the role's runs dir", f"touch {k.role_dir('implementer')}/runs/x", False),
        Row("write its own home", "touch $HOME/ok", True),
        Row("write its own tmp", "touch $TMPDIR/ok", True),
        Row("write its clone (implementer)", "touch $PWD/ok", True),
        Row("write its clone (reviewer)", "touch $PWD/ok", False, "reviewer"),
        Row("read another run's files", f"cat {s.other_secret}", False),
        Row("read the token file", f"cat {token}", False),
        Row("see the token variable in the harness", 'test -n "$CLAUDE_CODE_OAUTH_TOKEN"', True),
        Row("read a host /dev/shm file", f"cat {s.shm}", False),
        Row("see a host pid in /proc", f"test -e /proc/{os.getpid()}", False),
        Row("read /proc/sysvipc/shm", "test -r /proc/sysvipc/shm && cat /proc/sysvipc/shm", True),
        Row(
            "see a host SysV segment",
            f"awk '$2 == {s.shm_id} {{ f = 1 }} END {{ exit !f }}' /proc/sysvipc/shm",
            False,
        ),
        Row("connect to a host loopback listener", _tcp("127.0.0.1", s.loop.port, "host"), False),
        Row(
            "have an interface besides lo", "awk 'NR > 2' /proc/net/dev | grep -vq '^ *lo:'", False
        ),
        Row("list its own interfaces", "awk 'NR > 2' /proc/net/dev | grep -q '^ *lo:'", True),
        Row("have a route", "test \"$(awk 'NR > 1' /proc/net/route)\" != ''", False),
        Row("reach the proxy through the relay", _tcp("127.0.0.1", 3128, "403"), True),
        Row("see the egress proxy's socket", f"test -e {s.proxy.sock.getsockname()}", False),
        Row("create a nested user namespace (implementer)", "unshare -U true", False),
        Row("gain privileges through a setuid binary", f"{s.setuid}", False),
        Row("write to the prompt through /proc/self/fd/0", "echo x >> /proc/self/fd/0", False),
        Row("use an inherited host descriptor", f"cat <&{fd}", False),
        Row("read a key in the launching user's keyring", f"keyctl print {s.key_id}", False),
        *(Row(f"syscall family: {f}", probe_script(f), False) for f in ALWAYS_DENIED),
        *(
            Row(f"syscall family: {f} (implementer)", probe_script(f), False)
            for f in CONFINED_DENIED
        ),
        Row(
            "any always-denied syscall (reviewer)", probe_script(*ALWAYS_DENIED), False, "reviewer"
        ),
    ]
    if s.wide and s.wide_addr:
        listed.append(
            Row(
                "reach a host address other than through the relay",
                _tcp(s.wide_addr, s.wide.port, "host"),
                False,
            )
        )
    return listed


def user_rows(k: Kit, home: Path, setuid: Path, key_id: str) -> list[Row]:
    """Rows run as the unprivileged personal-mode user (the reviewer's nested sandbox too)."""
    return [
        Row(
            "see the credential variable in a reviewer's candidate command",
            '$RUN/candidate-shell "test -n \\"\\$CLAUDE_CODE_OAUTH_TOKEN\\" && pwd -P >| '
            '$RUN/tmp/cwd"',
            False,
            "reviewer",
        ),
        Row(
            "read the token file from a candidate command",
            f'$RUN/candidate-shell "cat {k.role_dir("reviewer")}/claude-token && pwd -P >| '
            '$RUN/tmp/cwd"',
            False,
            "reviewer",
        ),
        Row(
            "run a candidate command (it works at all)",
            '$RUN/candidate-shell "test -d $PWD && pwd -P >| $RUN/tmp/cwd"',
            True,
            "reviewer",
        ),
        Row("read a planted file in the user's home", f"cat {home}/planted.txt", False),
        Row("read the user's ~/.ssh key", f"cat {home}/.ssh/id_ed25519", False),
        Row("list the user's home", f"ls -A {home} | grep -q planted", False),
        Row("gain privileges through a setuid binary", f"{setuid}", False),
        Row("write its own home", "touch $HOME/ok", True),
        Row(
            "see the token variable (reviewer harness)",
            'test -n "$CLAUDE_CODE_OAUTH_TOKEN"',
            True,
            "reviewer",
        ),  # fmt: skip
        Row("create a nested user namespace (implementer)", "unshare -U true", False),
        Row("read a key the user added to its keyring", f"keyctl print {key_id}", False),
        Row("any keyring call", probe_script("keyring"), False),
    ]


def _host_checks(s: StandIns) -> None:
    """Each stand-in exists and works on the host, so a refusal inside is the sandbox's doing."""
    assert s.other_secret.read_text() == "other run\n"
    assert (s.kit.role_dir("implementer") / "claude-token").read_text()
    assert s.shm.read_text() == "host shm\n"
    assert stat.S_ISSOCK(os.stat(s.proxy.sock.getsockname()).st_mode)
    assert os.path.exists(f"/proc/{os.getpid()}")
    listing = Path("/proc/sysvipc/shm").read_text().splitlines()
    assert any(line.split()[1] == str(s.shm_id) for line in listing[1:])
    for server, addr in ((s.loop, "127.0.0.1"), (s.wide, s.wide_addr)):
        if server and addr:
            with socket.create_connection((addr, server.port), timeout=5) as conn:
                conn.sendall(b"hi\n")
                assert conn.recv(64).startswith(b"host")
    assert os.access("/etc", os.W_OK)
    mode = os.stat(s.setuid).st_mode
    assert mode & stat.S_ISUID and os.stat(s.setuid).st_uid == 0
    assert subprocess.run(["unshare", "-U", "true"]).returncode == 0
    printed = subprocess.run(["keyctl", "print", s.key_id], capture_output=True, text=True)
    assert printed.stdout == "root's keyring stand-in\n", printed.stderr
    assert host_denials(*ALWAYS_DENIED, *CONFINED_DENIED) == []  # root: every call reaches


def run_rows(kit: Kit, table: list[Row], fd: int) -> list[str]:
    failures: list[str] = []
    for row in table:
        script = (
            "echo alive > $HOME/alive\nRUN=$(dirname $(dirname $HOME))\n"
            f"( {row.script} ) >/dev/null 2>>$HOME/row.err\n"
        )
        run, clone = kit.new_run(script, row.role)
        result = kit.launch(run, clone, role=row.role, pass_fds=(fd,))
        if not (run / "state/home/alive").exists():
            failures.append(f"{row.name}: the harness never ran ({result.stderr.strip()})")
            continue
        succeeded = result.returncode == 0
        if succeeded != row.may:
            verdict = "succeeded" if succeeded else f"failed ({result.returncode})"
            err = (run / "state/home/row.err").read_text()[-300:]
            failures.append(f"{row.name}: {verdict}, may = {row.may}: {err}")
    return failures


@pytest.fixture
def personal_user() -> Iterator[str]:
    name = create_user("agentc-t")
    try:
        yield name
    finally:
        delete_user(name)


def test_personal_mode_user_table(personal_user: str, stand_ins: StandIns) -> None:
    import pwd

    entry = pwd.getpwnam(personal_user)
    home = Path(entry.pw_dir)
    (home / ".ssh").mkdir(mode=0o700)
    (home / ".ssh/id_ed25519").write_text("PRIVATE KEY STAND-IN\n")
    (home / "planted.txt").write_text("planted\n")
    for path in (home / ".ssh", home / ".ssh/id_ed25519", home / "planted.txt"):
        os.chown(path, entry.pw_uid, entry.pw_gid)
    (home / ".local/state").mkdir(parents=True)
    subprocess.run(["chown", "-R", f"{entry.pw_uid}:{entry.pw_gid}", str(home / ".local")])
    # The kit's supervisor runs the system python with the venv's site-packages on PYTHONPATH;
    # a checkout under /tmp (masked in a launch) needs that tree bound back for candidate-shell.
    kit = make_kit(home / ".local/state/agentc-kit", user=personal_user, expose=[str(VENV_SITE)])
    # Host checks: the user can read its planted files and the setuid stand-in gives euid 0.
    as_user = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups"]
    for path in (home / "planted.txt", home / ".ssh/id_ed25519"):
        assert subprocess.run([*as_user, "cat", str(path)], capture_output=True).returncode == 0
    assert subprocess.run([*as_user, str(stand_ins.setuid)], capture_output=True).returncode == 0
    key_id = add_user_key(as_user, "the user's keyring stand-in")
    printed = subprocess.run([*as_user, "keyctl", "print", key_id], capture_output=True, text=True)
    assert printed.stdout == "the user's keyring stand-in\n", printed.stderr
    assert host_denials_as(as_user, "keyring") == []
    fd = os.open(stand_ins.fd_file, os.O_RDONLY)
    try:
        failures = run_rows(kit, user_rows(kit, home, stand_ins.setuid, key_id), fd)
    finally:
        os.close(fd)
    assert not failures, "\n".join(failures)


def test_containment_table(stand_ins: StandIns) -> None:
    s = stand_ins
    _host_checks(s)
    fd = os.open(s.fd_file, os.O_RDWR)
    try:
        failures = run_rows(s.kit, rows(s, fd), fd)
    finally:
        os.close(fd)
    assert not (Path("/etc") / "agentc-row-probe").exists()
    assert not failures, "\n".join(failures)
    # Each connection the relay carried to the proxy named its launch first.
    assert s.proxy.first and all(f.startswith(b"agentc-launch ") for f in s.proxy.first)
