"""Real git repositories and a real ``agentc-push serve`` process for the push tests."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from agentc.push.protocol import make_bundle

TASK = "task-7"
LAUNCH = "0b5e9c1f-launch"
HELPER = Path(sys.executable).parent / "agentc-push"


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(cwd), *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, f"git {args}: {done.stderr}"
    return done.stdout.strip()


def commit(checkout: Path, files: dict[str, str | bytes], message: str = "change") -> str:
    for name, content in files.items():
        path = checkout / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    git(checkout, "add", "-A")
    git(checkout, "commit", "--quiet", "--allow-empty", "-m", message)
    return git(checkout, "rev-parse", "HEAD")


def make_repos(base: Path) -> tuple[Path, Path]:
    """A bare remote with one commit on main, and a clone of it to work in."""
    remote = base / "remote.git"
    git(base, "init", "--quiet", "--bare", "--initial-branch=main", str(remote))
    checkout = base / "checkout"
    git(base, "clone", "--quiet", str(remote), str(checkout))
    git(checkout, "config", "user.name", "Agent")
    git(checkout, "config", "user.email", "agent@example.invalid")
    commit(checkout, {"README.md": "hello\n"}, "base")
    git(checkout, "push", "--quiet", "origin", "HEAD:refs/heads/main")
    git(checkout, "fetch", "--quiet", "origin")
    return remote, checkout


def remote_ref(remote: Path, ref: str) -> str | None:
    done = subprocess.run(
        ["git", "--git-dir", str(remote), "rev-parse", "--verify", "--quiet", ref],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return done.stdout.strip() if done.returncode == 0 else None


@dataclass
class Helper:
    proc: subprocess.Popen[bytes]
    socket: Path
    work: Path
    stderr: Path
    argv: list[str] = field(default_factory=list)

    def log(self) -> str:
        return self.stderr.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


def start_helper(
    base: Path,
    remote: Path | str,
    *extra: str,
    parent_pid: int | None = None,
    wait: bool = True,
) -> Helper:
    """``agentc-push serve`` for TASK/LAUNCH in ``base``, started with a minimal environment."""
    sock_dir = base / "sock"
    sock_dir.mkdir(exist_ok=True)
    sock = sock_dir / "push.sock"
    work = base / "work"
    work.mkdir(exist_ok=True)
    argv = [str(HELPER), "serve", f"--socket={sock}", f"--task={TASK}", f"--launch={LAUNCH}"]
    argv += [f"--work-dir={work / 'repo'}", f"--remote={remote}", *extra]
    if parent_pid is not None:
        argv.append(f"--parent-pid={parent_pid}")
    stderr = base / "helper.log"
    with stderr.open("wb") as err:
        proc = subprocess.Popen(
            argv,
            env={"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "HOME": str(work)},
            cwd="/",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    helper = Helper(proc, sock, work, stderr, argv)
    if wait:
        deadline = time.monotonic() + 15
        while not sock.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                helper.stop()
                raise AssertionError(f"the helper did not publish its socket:\n{helper.log()}")
            time.sleep(0.05)
    return helper


def gone(pid: int) -> bool:
    """Whether ``pid`` has exited (gone, or a zombie nobody reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stream:
            data = stream.read()
    except OSError:
        return True
    return data[data.rindex(b")") + 2 :].split()[0] in (b"Z", b"X")


def wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        time.sleep(0.05)
    return gone(pid)


def raw(sock: Path, data: bytes, *, shut: bool = True, timeout: float = 20) -> dict[str, object]:
    """Send ``data`` as it is and return the helper's answer line."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(timeout)
    try:
        conn.connect(str(sock))
        try:
            if data:
                conn.sendall(data)
            if shut:
                conn.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = b""
        while b"\n" not in answer:
            try:
                chunk = conn.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            answer += chunk
    finally:
        conn.close()
    record = json.loads(answer.split(b"\n", 1)[0])
    assert isinstance(record, dict)
    return record


def header(op: str, revision: str, **extra: str) -> bytes:
    return json.dumps({"op": op, "revision": revision, **extra}).encode() + b"\n"


def bundle_of(checkout: Path, revision: str, out: Path) -> bytes:
    out.mkdir(exist_ok=True)
    make_bundle(checkout, revision, out / "b.bundle", thin=False)
    return (out / "b.bundle").read_bytes()
