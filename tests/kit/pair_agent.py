#!/usr/bin/python3
"""Two launches at once, one against the other (tests/supervisor/loop/test_loop_pair.py).

The task's description carries a fenced ``pair`` block, a JSON object. ``{"role": "victim",
"port": n}``: the victim keeps a secret in its run's ``tmp`` and in its checkout, listens on
``127.0.0.1:<port>`` and on an abstract Unix socket inside its launch, says it is ready, and
waits until the test lets it go (``$TMPDIR/go``); it then checks it is unharmed (its secret,
its listeners, forking and writing still work), commits that report and submits. ``{"role":
"attacker", "victim": <launch id>, "pid": <its sandbox's host pid>, "state": <state root>,
"port": n}``: the attacker tries to read the victim's run and checkout, to signal and to see
its processes, to connect to its listeners, and to exhaust what the two could share
(processes, memory, file size); each try is one line ``{"type": "pair", "try": name,
"result": ...}``, then ``{"type": "pair", "try": "done"}``; it waits to be let go and exits
0 without submitting.

Standard library only: it runs with the system's Python inside the launch, in personal mode as
the user and in host mode as the implementer account.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

BLOCK = re.compile(r"```pair[ \t]*\n(.*?)\n```", re.DOTALL)
ABSTRACT = b"\0agentc-pair-victim"
FORK_BOMB = """
import os, sys, time
made = 0
try:
    while made < 20000:
        if os.fork() == 0:
            os.close(1)  # the parent's output ends when the parent does
            time.sleep(120)
            os._exit(0)
        made += 1
except OSError as exc:
    print(made, exc.errno, flush=True)
    sys.exit(0)
print(made, 0, flush=True)
"""
MEMORY_HOG = """
chunks = []
for _ in range(64):
    chunks.append(bytearray(64 << 20))
print(len(chunks) * 64, flush=True)
"""


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def tried(name: str, result: Any) -> None:
    say(type="pair", attempt=name, result=result)


def quoted(prompt: str, tag: str) -> str | None:
    found = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", prompt, re.DOTALL)
    return found[1] if found else None


def wait_for_go() -> None:
    go = Path(os.environ["TMPDIR"]) / "go"
    while not go.exists():
        time.sleep(0.1)


def serve(listener: socket.socket) -> None:
    while True:
        conn, _ = listener.accept()
        conn.sendall(b"victim\n")
        conn.close()


def listen(family: int, address: Any) -> socket.socket:
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(8)
    threading.Thread(target=serve, args=(listener,), daemon=True).start()
    return listener


def reach(family: int, address: Any) -> str:
    try:
        with socket.socket(family, socket.SOCK_STREAM) as conn:
            conn.settimeout(5)
            conn.connect(address)
            return conn.recv(64).decode(errors="replace").strip() or "connected"
    except OSError as exc:
        return f"refused: {type(exc).__name__}"


def read(path: str) -> str:
    try:
        return "read: " + Path(path).read_text()[:80]
    except OSError as exc:
        return f"denied: {type(exc).__name__}"


def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, **kwargs)


def victim(plan: dict[str, Any]) -> int:
    tmp = Path(os.environ["TMPDIR"])
    secret = f"victim-secret-{os.getpid()}-{time.time_ns()}"
    (tmp / "secret").write_text(secret)
    checkout = Path.cwd() / "agentc-checkout"
    (checkout / "secret.txt").write_text(secret)
    listen(socket.AF_INET, ("127.0.0.1", int(plan["port"])))
    listen(socket.AF_UNIX, ABSTRACT)
    say(type="pair", attempt="ready")
    wait_for_go()
    forks = [run(["true"]).returncode for _ in range(20)]
    report = {
        "secret": (tmp / "secret").read_text() == secret
        and (checkout / "secret.txt").read_text() == secret,
        "tcp": reach(socket.AF_INET, ("127.0.0.1", int(plan["port"]))),
        "unix": reach(socket.AF_UNIX, ABSTRACT),
        "forks": forks == [0] * 20,
    }
    say(type="pair", attempt="unharmed", result=report)
    (checkout / "report.json").write_text(json.dumps(report))
    (checkout / "secret.txt").unlink()
    run(["git", "add", "report.json"], cwd=checkout, check=True)
    run(["git", "commit", "--quiet", "-m", "unharmed"], cwd=checkout, check=True)
    submission = tmp / "submission.json"
    submission.write_text(
        json.dumps(
            {
                "summary": "unharmed",
                "acceptance_evidence": [{"criterion": "unharmed", "evidence": "report.json"}],
            }
        )
    )
    argv = ["agent-coordinator", "submissions", "code", "--checkout", str(checkout)]
    done = run([*argv, "--input", str(submission), "--json"])
    say(type="pair", attempt="submitted", result=done.returncode)
    return 0


def exhaust(script: str) -> dict[str, Any]:
    """Run ``script`` in a process group of its own; kill what it left."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, process_group=0
    )
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return {"status": proc.returncode, "out": out.strip()}


def attacker(plan: dict[str, Any]) -> int:
    state, launch = str(plan["state"]), str(plan["victim"])
    for role in ("impl", "rev"):
        tried(f"read the victim's {role} secret", read(f"{state}/{role}/runs/{launch}/tmp/secret"))
    checkout = f"{state}/impl/clones/{launch}/agentc-checkout/secret.txt"
    tried("read the victim's checkout", read(checkout))
    try:
        runs = sorted(os.listdir(f"{state}/impl/runs"))
    except OSError as exc:
        runs = [f"denied: {type(exc).__name__}"]
    tried("list the runs", runs)
    try:
        os.kill(int(plan["pid"]), signal.SIGKILL)
        tried("signal the victim", "signalled")
    except OSError as exc:
        tried("signal the victim", f"denied: {type(exc).__name__}")
    visible = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    tried("see processes", {"count": len(visible), "victim": int(plan["pid"]) in visible})
    tried("connect to the victim's port", reach(socket.AF_INET, ("127.0.0.1", int(plan["port"]))))
    tried("connect to the victim's socket", reach(socket.AF_UNIX, ABSTRACT))
    tried("exhaust processes", exhaust(FORK_BOMB))
    tried("exhaust memory", exhaust(MEMORY_HOG))
    try:
        with open(Path(os.environ["TMPDIR"]) / "big", "wb") as big:
            for _ in range(64):
                big.write(b"\0" * (1 << 20))
        tried("write a huge file", "written")
    except OSError as exc:
        tried("write a huge file", f"denied: {type(exc).__name__}")
    tried("done", None)
    wait_for_go()
    return 0


def main() -> int:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a file past the limit: EFBIG, not death
    prompt = sys.stdin.read()
    say(type="agent", step="start")
    data = json.loads(quoted(prompt, "task-data") or "{}")
    block = BLOCK.search(str(data.get("description", "")))
    if block is None:
        return 0
    plan = json.loads(block[1])
    return victim(plan) if plan.get("role") == "victim" else attacker(plan)


if __name__ == "__main__":
    sys.exit(main())
