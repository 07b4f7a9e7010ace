"""``agentc-host setup`` for real, as root, in a throwaway environment: real accounts (a unique
prefix), real owners and modes, units written and enabled but not started (no systemd runs
here, and setup says so); host mode's own checks accept what it made; then ``--uninstall``
retires the accounts (their processes and their files in /tmp too) and nothing is left but the
owner's secrets."""

from __future__ import annotations

import grp
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentc.supervisor.config import SupervisorConfig
from agentc.supervisor.launch import preflight_host
from tests.host.kit import host, mode, tree

pytestmark = pytest.mark.root


@pytest.fixture
def env() -> Iterator[tuple[Path, dict[str, str]]]:
    root = Path(tempfile.mkdtemp(prefix="ah", dir="/tmp"))
    os.chmod(root, 0o755)  # noqa: S103 - root's; the role accounts must traverse it
    tag = secrets.token_hex(3)
    names = {"implementer": f"ahi{tag}", "reviewer": f"ahr{tag}", "push": f"ahp{tag}",
             "egress": f"ahe{tag}"}  # fmt: skip
    try:
        yield root, names
    finally:
        for name in names.values():  # whatever a failed test left
            subprocess.run(["userdel", name], capture_output=True)
            subprocess.run(["groupdel", name], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def _settings(root: Path, names: dict[str, str]) -> Path:
    lines = [f'{key} = "{root}{path}"' for key, path in (
        ("state_dir", "/var/lib/agentc"), ("etc_dir", "/etc/agentc"), ("opt_dir", "/opt/agentc"),
        ("systemd_dir", "/etc/systemd/system"), ("cron_dir", "/etc/cron.d"),
        ("log_dir", "/var/log"), ("run_dir", "/run"),
    )]  # fmt: skip
    lines += ['init = "systemd"', "[accounts]"]
    lines += [f'{key} = "{name}"' for key, name in names.items()]
    path = root / "host.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _owner(path: Path) -> tuple[str, str, int]:
    info = os.lstat(path)
    return pwd.getpwuid(info.st_uid).pw_name, grp.getgrgid(info.st_gid).gr_name, mode(path)


def _passwd_lines(tag: str) -> list[str]:
    lines = (
        Path("/etc/passwd").read_text().splitlines() + Path("/etc/group").read_text().splitlines()
    )
    return [line for line in lines if tag in line]


def test_setup_for_real_then_uninstall_leaves_nothing(env: tuple[Path, dict[str, str]]) -> None:
    root, names = env
    config = _settings(root, names)
    impl, rev, push, egress = (names[k] for k in ("implementer", "reviewer", "push", "egress"))
    done = host(config, "setup")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"made the implementer's account {impl} (useradd --system" in done.stdout
    assert "systemd is not running here: the units are written and enabled, not started" in (
        done.stdout
    )
    # The accounts: system accounts, each with a group of its own and nothing else, no login.
    for name in names.values():
        entry = pwd.getpwnam(name)
        assert entry.pw_uid != 0 and entry.pw_uid < 1000, entry
        assert grp.getgrgid(entry.pw_gid).gr_name == name
        assert entry.pw_shell in ("/usr/sbin/nologin", "/sbin/nologin", "/bin/false")
        assert not [g.gr_name for g in grp.getgrall() if name in g.gr_mem]
    assert pwd.getpwnam(impl).pw_dir == f"{root}/var/lib/agentc/impl/home"
    assert pwd.getpwnam(push).pw_dir == "/nonexistent"
    # Real owners and modes.
    state = root / "var/lib/agentc"
    assert _owner(state) == ("root", "root", 0o755)
    assert _owner(state / "impl") == ("root", impl, 0o750)
    assert _owner(state / "impl/runs") == (impl, impl, 0o700)
    assert _owner(state / "rev/clones") == (rev, rev, 0o700)
    assert _owner(state / "rev/claude-config") == ("root", rev, 0o750)
    assert _owner(state / "rev/claude-config/settings.json") == ("root", "root", 0o444)
    assert _owner(state / "push") == ("root", "root", 0o711)
    assert _owner(state / "egress") == (egress, egress, 0o700)
    assert _owner(root / "etc/agentc/impl") == ("root", "root", 0o700)
    assert _owner(root / "etc/agentc/supervisor.toml") == ("root", "root", 0o644)
    assert _owner(state / "host-setup.json") == ("root", "root", 0o600)
    # Host mode's own checks accept the accounts and the layout setup made.
    supervisor = SupervisorConfig.load(root / "etc/agentc/supervisor.toml")
    assert supervisor.push_helper.user == push
    assert (
        preflight_host.account_problems(supervisor, ["implementer", "reviewer"], push_helper=True)
        == []
    )
    for role in ("implementer", "reviewer"):
        assert preflight_host.layout_problems(supervisor, state, role) == [], role
    # The owner's secrets: held at their owners and modes.
    token, key = state / "impl/claude-token", root / "etc/agentc/push-key"
    for path in (token, key):
        path.write_text("secret-for-the-test\n")
        os.chmod(path, 0o600)
    done = host(config, "setup")
    assert done.returncode == 0, done.stderr
    assert _owner(token) == ("root", impl, 0o440) and _owner(key) == (push, push, 0o400)
    assert host(config, "setup").stdout.rstrip().endswith("nothing changed")
    # The implementer account runs something and leaves a file in /tmp: uninstall ends both.
    entry = pwd.getpwnam(impl)
    sleeper = subprocess.Popen(
        ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups",
         "sh", "-c", f"touch /tmp/{impl}-left; exec sleep 600"],
        cwd="/", start_new_session=True,
    )  # fmt: skip
    left = Path(f"/tmp/{impl}-left")
    try:
        for _ in range(100):
            if left.exists():
                break
            subprocess.run(["sleep", "0.1"])
        assert left.exists() and os.lstat(left).st_uid == entry.pw_uid
        done = host(config, "setup", "--uninstall")
        assert done.returncode == 0, done.stdout + done.stderr
        assert sleeper.wait(timeout=30) != 0  # killed
    finally:
        sleeper.kill()
        sleeper.wait()
        left.unlink(missing_ok=True)
    assert not left.exists()
    for name in names.values():
        with pytest.raises(KeyError):
            pwd.getpwnam(name)
        with pytest.raises(KeyError):
            grp.getgrnam(name)
    assert _passwd_lines(names["implementer"][3:]) == []
    # Nothing is left but the owner's secrets (root's now) and the folders holding them.
    assert tree(root) == {
        "host.toml", "etc", "etc/agentc", "etc/agentc/push-key", "etc/systemd", "opt", "var",
        "var/lib", "var/lib/agentc", "var/lib/agentc/impl", "var/lib/agentc/impl/claude-token",
    }  # fmt: skip
    assert _owner(token)[0::2] == ("root", 0o400) and os.lstat(token).st_gid == 0
    assert _owner(key) == ("root", "root", 0o400)
    assert "kept " in done.stdout and "left " in done.stdout
