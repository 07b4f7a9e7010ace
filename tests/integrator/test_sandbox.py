"""Hostile checks in the real sandbox: no network, no credential, nothing writable outside the
checked tree; and a hostile check end to end sends its candidate back."""

from __future__ import annotations

import dataclasses
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agentc.integrator.checks import CheckRunner
from agentc.integrator.config import CheckConfig, IntegratorConfig
from tests.client.kit import git
from tests.integrator.kit import make_setup
from tests.kit.live import LiveServer

TOKEN = "agentc-test-token-" + "z" * 20


@pytest.fixture
def env(tmp_path: Path) -> Iterator[tuple[IntegratorConfig, Path]]:
    secrets = tmp_path / "secrets"
    secrets.mkdir(mode=0o700)
    cred = secrets / "integrator.token"
    cred.write_text(TOKEN + "\n")
    cred.chmod(0o600)
    remote = tmp_path / "remote.git"
    remote.mkdir()
    config = IntegratorConfig(
        origin="https://coordinator.example",
        project_id="p",
        credential_file=cred,
        remote=str(remote),
        work_dir=tmp_path / "work",
        checks={"x": CheckConfig(argv=["true"])},
    )
    tree = tmp_path / "work" / "runs" / "t" / "tree"
    tree.mkdir(parents=True)
    (tree / "README").write_text("hello\n")
    yield config, tree


def _run(config: IntegratorConfig, tree: Path, *argv: str) -> tuple[bool, str]:
    runner = CheckRunner(config)
    result = runner.run_one("x", CheckConfig(argv=list(argv)), tree, tree.parent / "x.log")
    return result.passed, result.tail


@pytest.fixture
def listener() -> Iterator[tuple[int, list[object]]]:
    """A host loopback listener that records every connection it accepts."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    sock.settimeout(0.2)
    accepted: list[object] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            accepted.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield sock.getsockname()[1], accepted
    stop.set()
    thread.join()
    sock.close()
    for conn in accepted:
        conn.close()  # type: ignore[attr-defined]


def test_the_checked_tree_is_writable_and_the_environment_is_empty(env):
    config, tree = env
    ok, tail = _run(
        config, tree, "/bin/sh", "-c", "echo built > out.txt && env && touch $TMPDIR/t $HOME/h"
    )
    assert ok, tail
    assert (tree / "out.txt").read_text() == "built\n"
    names = {line.split("=", 1)[0] for line in tail.splitlines() if "=" in line}
    assert names <= {"PATH", "HOME", "TMPDIR", "LANG", "PWD", "SHLVL", "_"}, names
    assert TOKEN not in tail


def test_a_check_cannot_read_the_credential(env):
    config, tree = env
    ok, tail = _run(config, tree, "/bin/cat", str(config.credential_file))
    assert not ok
    assert TOKEN not in tail and "No such file" in tail


def test_a_check_cannot_reach_the_network(env, listener):
    config, tree = env
    port, accepted = listener
    code = (
        "import socket; "
        f"socket.create_connection(('127.0.0.1', {port}), timeout=3); print('CONNECTED')"
    )
    # The interpreter lives under a masked home here: `expose` binds its tree back read-only.
    python = Path(sys.executable).resolve()
    config = dataclasses.replace(config, expose=[python.parents[1]])
    ok, tail = _run(config, tree, str(python), "-c", code)
    assert not ok and "CONNECTED" not in tail and "Connection refused" in tail
    assert accepted == []
    # The same program reaches the listener outside the sandbox: the test can fail.
    socket.create_connection(("127.0.0.1", port), timeout=3).close()
    for _ in range(50):
        if accepted:
            break
        threading.Event().wait(0.05)
    assert len(accepted) == 1


def test_a_check_cannot_write_outside_its_tree(env):
    config, tree = env
    remote = Path(config.remote)
    for target in (remote / "planted", config.work_dir / "journal-planted", Path("/etc/planted")):
        ok, _tail = _run(config, tree, "/bin/sh", "-c", f"echo x > {target}")
        assert not ok
        assert not target.exists()


def test_a_check_cannot_make_namespaces(env):
    config, tree = env
    ok, tail = _run(config, tree, "unshare", "--user", "--map-root-user", "true")
    assert not ok, tail


def test_a_candidate_whose_check_steals_the_credential_is_sent_back(
    server: LiveServer, admin: httpx.Client, tmp_path: Path
):
    """The required check runs the tree's own check.sh; the candidate rewrites it to read the
    integrator's credential. The target's check.sh passes, so the candidate is blamed."""
    s = make_setup(tmp_path, server.url, admin)
    cred = s.root / "secrets" / "integrator.token"
    s.write_config({"script": ["/bin/sh", "./check.sh"]})
    before = s.push_to_target({"check.sh": "echo fine\n"}, "add the check")
    git(s.clone, "pull", "--quiet", "origin", "main")
    sub = s.approved({"check.sh": f"cat {cred} && env && echo STOLEN\n"})
    out = s.integrator("run", "--once")
    assert out.returncode == 0, out.stderr
    assert s.tip() == before and s.landings() == []
    assert s.task(sub["task"]["id"])["work_status"] == "ready"  # sent back to its implementer
    [sent] = s.reports()
    assert sent["event"] == "sent_back" and sent["reason"] == "check script failed (exit 1)"
    assert cred.name in sent["tail"] and "STOLEN" not in sent["tail"]
    logs = list((s.work_dir / "logs").rglob("*.log"))
    assert logs and all(s.token not in p.read_text() for p in logs)
    assert s.token not in (s.work_dir / "reports.jsonl").read_text()


def test_a_check_that_outlives_its_timeout_is_killed_and_fails(env):
    config, tree = env
    runner = CheckRunner(config)
    check = CheckConfig(
        argv=["/bin/sh", "-c", "echo waiting; sleep 297.125 & wait"], timeout_seconds=1
    )
    result = runner.run_one("slow", check, tree, tree.parent / "slow.log")
    assert (result.outcome, result.exit_code) == ("timed_out", None)
    assert "waiting" in result.tail
    # Nothing of the check is left: no process still runs in its tree.
    leftovers = subprocess.run(["pgrep", "-f", "sleep 297.125"], capture_output=True, text=True)
    assert leftovers.stdout.strip() == ""


def test_a_check_cannot_read_the_ssh_key(env, tmp_path: Path):
    config, tree = env
    keys = tmp_path / "keys"
    keys.mkdir(mode=0o700)
    key = keys / "id_ed25519"
    key.write_text("-----BEGIN OPENSSH " + "PRIVATE KEY-----\nsecret\n")  # no armour in the file
    key.chmod(0o600)
    config = dataclasses.replace(config, ssh_key=key)
    ok, tail = _run(config, tree, "/bin/cat", str(key))
    assert not ok and "secret" not in tail
