"""The containment suite's probe: the ``command:`` agent each check launch runs.

It reads its rows (JSON) from standard input, the prompt, tries each one (read, write, list,
connect, signal, its push helper, who it runs as) and prints a JSON line per row saying whether
it got through and what the kernel answered, flushed as it goes; then ``{"done": true}``, and
waits (at most a minute) for the file ``release`` names, so the check can try the push helper
from outside while the launch still runs. Standard library only: it runs under the host's
``/usr/bin/python3 -I`` inside the sandbox, never importing agentc.
"""

from __future__ import annotations

PROBE = r"""#!/usr/bin/python3 -I
import errno, json, os, socket, sys, time

NOT_LAUNCH = "connection is not from this helper's launch"


def why(exc):
    return errno.errorcode.get(exc.errno, str(exc)) if isinstance(exc, OSError) else str(exc)


def attempt(row):
    op, target = row["op"], row.get("target")
    if op == "whoami":
        return True, f"{os.getuid()} {os.getgid()} {sorted(os.getgroups())}"
    if op == "read":
        with open(target, "rb") as handle:
            handle.read(1)
        return True, "read"
    if op == "write":
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        os.write(fd, b"planted by a launch\n")
        os.close(fd)
        return True, "written"
    if op == "list":
        names = sorted(os.listdir(target))
        return row["expect"] in names, " ".join(names)[:300]
    if op == "tcp":
        with socket.create_connection((target[0], target[1]), timeout=2):
            return True, "connected"
    if op == "unix":
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(2)
            sock.connect(target)
        return True, "connected"
    if op == "signal":
        os.kill(target, 0)
        return True, "signalled"
    if op == "push":
        path = os.environ.get("AGENT_COORDINATOR_CANDIDATE_PUSH_SOCKET", "")
        deadline = time.monotonic() + 20
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.1)
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(10)
            sock.connect(path)
            sock.sendall(b"{}\n")
            sock.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        text = answer.decode("utf-8", "replace").strip()
        return bool(text) and NOT_LAUNCH not in text, text[:300]
    return False, f"unknown op {op}"


def main():
    plan = json.loads(sys.stdin.read())
    for row in plan["rows"]:
        try:
            reached, detail = attempt(row)
        except Exception as exc:  # every refusal is an answer
            reached, detail = False, why(exc)
        print(json.dumps({"id": row["id"], "reached": reached, "detail": detail}), flush=True)
    print(json.dumps({"done": True}), flush=True)
    deadline = time.monotonic() + 60
    while not os.path.exists(plan["release"]) and time.monotonic() < deadline:
        time.sleep(0.1)


main()
"""
