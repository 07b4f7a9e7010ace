"""``launch-root`` in host mode, for real: throwaway role accounts, the seed's layout, and a
launch that runs as the role uid with its token validated; plus its refusals and the host-mode
preflight checks of that layout's owners and modes.

The accounts are ``agentc-impl-<hex>`` / ``agentc-rev-<hex>``, created once per module and
removed with ``userdel`` even when a test fails.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.supervisor.kit import (
    MOCK,
    PORTABLE_PYTHON,
    Account,
    mkdir_owned,
    throwaway_accounts,
)

pytestmark = pytest.mark.root

ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}


@dataclass
class Host:
    root: Path
    state: Path
    config: Path
    accounts: dict[str, Account]
    tokens: dict[str, str]
    settings: dict[str, Any]

    def role_dir(self, role: str) -> Path:
        return self.state / ("impl" if role == "implementer" else "rev")

    def write_config(self) -> None:
        lines = [f"{k} = {json.dumps(v)}" for k, v in self.settings.items() if k != "harness"]
        lines += ["[harness_paths]"]
        lines += [f"{k} = {json.dumps(v)}" for k, v in self.settings["harness"].items()]
        self.config.write_text("\n".join(lines) + "\n")
        os.chmod(self.config, 0o644)

    def new_run(self, prompt: str, role: str = "implementer") -> tuple[Path, Path]:
        account = self.accounts[role]
        name = f"r{len(os.listdir(self.role_dir(role) / 'runs'))}"
        run = self.role_dir(role) / "runs" / name
        clone = self.role_dir(role) / "clones" / name
        for path in (run, clone):
            path.mkdir(mode=0o700)
            os.chown(path, account.uid, account.gid)
        (run / "prompt.md").write_text(prompt)
        os.chown(run / "prompt.md", account.uid, account.gid)
        return run, clone

    def argv(self, cmd: str, run: Path, clone: Path, role: str = "implementer") -> list[str]:
        return [*PORTABLE_PYTHON, "-m", "agentc.supervisor.cli", "--config", str(self.config),
                cmd, "--role", role, "--run", str(run), "--clone", str(clone)]  # fmt: skip

    def run(
        self, cmd: str, run: Path, clone: Path, role: str = "implementer", as_: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        argv = self.argv(cmd, run, clone, role)
        if as_ is not None:
            who = self.accounts[as_]
            argv = ["setpriv", f"--reuid={who.uid}", f"--regid={who.gid}", "--clear-groups",
                    *argv]  # fmt: skip
        result = subprocess.run(argv, env=ENV, capture_output=True, text=True, timeout=120, cwd="/")
        assert "Traceback" not in result.stderr, result.stderr
        return result


@pytest.fixture(scope="module")
def accounts() -> Iterator[dict[str, Account]]:
    with throwaway_accounts({"implementer": "agentc-impl-", "reviewer": "agentc-rev-"}) as found:
        yield found


def _file(path: Path, data: str, uid: int, gid: int, mode: int) -> None:
    path.write_text(data)
    os.chown(path, uid, gid)
    os.chmod(path, mode)


@pytest.fixture
def host(accounts: dict[str, Account]) -> Iterator[Host]:
    """The seed's protected layout under a root-owned 0755 base the role accounts can reach."""
    root = Path(tempfile.mkdtemp(prefix="agentc-host-", dir="/tmp"))
    try:
        os.chmod(root, 0o755)  # noqa: S103 - root-owned, readable so the roles can traverse
        bin_dir = root / "bin"
        mkdir_owned(bin_dir, 0, 0, 0o755)
        for name in ("claude", "codex", "pi"):
            _file(bin_dir / name, MOCK, 0, 0, 0o755)
        state = root / "state"
        mkdir_owned(state, 0, 0, 0o755)
        tokens: dict[str, str] = {}
        for role, account in accounts.items():
            role_dir = state / ("impl" if role == "implementer" else "rev")
            mkdir_owned(role_dir, 0, account.gid, 0o750)
            for sub in ("runs", "clones", "home"):
                mkdir_owned(role_dir / sub, account.uid, account.gid, 0o700)
            mkdir_owned(role_dir / "claude-config", 0, account.gid, 0o750)
            _file(role_dir / "claude-config/settings.json", "{}\n", 0, 0, 0o444)
            _file(role_dir / "claude-config/CLAUDE.md", "# contract\n", 0, 0, 0o444)
            tokens[role] = "dummy-host-token-" + os.urandom(6).hex()
            _file(role_dir / "claude-token", tokens[role] + "\n", 0, account.gid, 0o440)
        settings: dict[str, Any] = {
            "mode": "host",
            "state_dir": str(state),
            "bin_dir": str(bin_dir),
            "egress_listen": "",
            # The mock harness needs no model: no gateway; the token goes in the environment
            # (the opt-in path), so the test can see it was validated and passed.
            "gateway_listen": "",
            "token_in_env": True,
            "implementer_user": accounts["implementer"].name,
            "reviewer_user": accounts["reviewer"].name,
            "supervisor_program": [*PORTABLE_PYTHON, "-m", "agentc.supervisor.cli"],
            "harness": {n: str(bin_dir / n) for n in ("claude", "codex", "pi")},
        }
        built = Host(root, state, root / "supervisor.toml", accounts, tokens, settings)
        built.write_config()
        yield built
    finally:
        shutil.rmtree(root, ignore_errors=True)


PROBE = (
    'id -u > "$HOME/uid"\n'
    'printf %s "$CLAUDE_CODE_OAUTH_TOKEN" | sha256sum | cut -d" " -f1 > "$HOME/token"\n'
    "exit 0\n"
)


@pytest.mark.parametrize("role", ["implementer", "reviewer"])
def test_launch_root_runs_the_harness_as_the_role_uid_with_its_token(host: Host, role: str) -> None:
    run, clone = host.new_run(PROBE, role)
    result = host.run("launch-root", run, clone, role)
    assert result.returncode == 0, result.stderr
    account = host.accounts[role]
    home = run / "state/home"
    assert (home / "uid").read_text().strip() == str(account.uid)
    digest = hashlib.sha256(host.tokens[role].encode()).hexdigest()
    assert (home / "token").read_text().strip() == digest
    # The launch itself ran as the role: it created the markers and private trees.
    for name in (".state-started", ".state-terminal.json", "events.jsonl", "state/home"):
        assert os.lstat(run / name).st_uid == account.uid, name
    end = json.loads((run / ".state-terminal.json").read_text())
    assert (end["reason"], end["exit_code"]) == ("exited", 0)
    assert json.loads(result.stdout.splitlines()[-1])["reason"] == "exited"


def test_launch_root_gives_the_role_launch_its_agent_session(host: Host) -> None:
    """launch-root (root, which may create a real namespace) establishes the session once;
    the role account's launch inherits it instead of establishing another."""
    mock_id = "0badc0de" * 4
    run, clone = host.new_run('env > "$HOME/env.txt"\n')
    env = {**ENV, "AGENTNS_SESSION_ID_OVERRIDE": mock_id}
    argv = host.argv("launch-root", run, clone)
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd="/")
    assert result.returncode == 0, result.stderr
    assert result.stderr.count(f"MOCK MODE: session_id={mock_id}") == 1
    lines = (run / "state/home/env.txt").read_text().splitlines()
    seen = dict(line.split("=", 1) for line in lines if "=" in line)
    assert seen["AGENTNS_SESSION_ID"] == mock_id
    assert (seen["AGENTNS_INTENT"], seen["AGENTNS_MODE"]) == ("headless:implementer", "mock")
    assert "AGENTNS_SESSION_ID_OVERRIDE" not in seen
    end = json.loads((run / ".state-terminal.json").read_text())
    assert (end["agentns_session_id"], end["agentns_mode"]) == (mock_id, "mock")
    assert os.lstat(run / ".state-terminal.json").st_uid == host.accounts["implementer"].uid


def test_launch_root_passes_the_harness_exit_code_through(host: Host) -> None:
    run, clone = host.new_run("exit 9\n")
    assert host.run("launch-root", run, clone).returncode == 9


# Four processes of 112 MiB each: every one is within the per-process RLIMIT_DATA (256 MiB)
# the role's launch sets itself, together they pass the launch's 256 MiB: only a cgroup around
# the whole launch stops them. Bounded (448 MiB), so a broken limit cannot harm the machine.
MEMORY_HOG = """
import os, time
for _ in range(4):
    if os.fork() == 0:
        blocks = [bytearray(16 << 20) for _ in range(7)]
        time.sleep(30)
        os._exit(0)
os.wait()
"""
PIDS_MAX = (
    'cg=$(sed -n "s/^[0-9]*:pids://p" /proc/self/cgroup)\n'
    'cat "/sys/fs/cgroup/pids$cg/pids.max" > "$HOME/pids.max"\n'
)


def test_launch_root_bounds_the_whole_launch_in_its_cgroup(host: Host) -> None:
    """The role account cannot make a cgroup: launch-root makes it as root, the role's launch
    runs in it, and the limit it hit is named in the run's terminal record."""
    from agentc.sandbox.limits import detect_backend

    if detect_backend() != "cgroup1":
        pytest.skip("this test reads the cgroup v1 layout (limits.backend_note)")
    with host.config.open("a") as config:
        config.write("[limits]\nmemory_mib = 256\nprocesses = 64\n")
    run, clone = host.new_run(f"{PIDS_MAX}/usr/bin/python3 - <<'HOG'\n{MEMORY_HOG}HOG\n")
    result = host.run("launch-root", run, clone)
    assert (run / "state/home/pids.max").read_text() == "64\n"  # its own cgroup, whole
    end = json.loads((run / ".state-terminal.json").read_text())
    assert end["limit"] == "memory", (end, result.stderr)
    info = os.lstat(run / ".state-terminal.json")  # still the role's record, its mode kept
    assert info.st_uid == host.accounts["implementer"].uid and info.st_mode & 0o777 == 0o600
    # A launch within its limits records none.
    run, clone = host.new_run("exit 0\n")
    assert host.run("launch-root", run, clone).returncode == 0
    assert json.loads((run / ".state-terminal.json").read_text())["limit"] is None


def test_preflight_as_the_role_on_the_seed_layout_is_clean(host: Host) -> None:
    for role in ("implementer", "reviewer"):
        run, clone = host.new_run("exit 0\n", role)
        result = host.run("preflight", run, clone, role, as_=role)
        assert json.loads(result.stdout) == {"ok": True, "problems": []}, result.stderr
        assert result.returncode == 0


def test_preflight_as_root_in_host_mode_names_the_account(host: Host) -> None:
    run, clone = host.new_run("exit 0\n")
    result = host.run("preflight", run, clone)
    report = json.loads(result.stdout)
    name = host.accounts["implementer"].name
    assert result.returncode == 1
    assert report["problems"] == [
        f"running as root; implementer launches run as {name} (use launch-root, or mode = "
        "'personal')"
    ]


def test_launch_root_refuses_a_non_root_caller(host: Host) -> None:
    run, clone = host.new_run("touch $HOME/ran\n")
    result = host.run("launch-root", run, clone, as_="implementer")
    assert result.returncode == 1
    assert result.stderr.strip() == "agentc-supervisor: launch-root must run as root"
    assert sorted(os.listdir(run)) == ["prompt.md"]


def test_launch_root_refuses_a_missing_role_account(host: Host) -> None:
    run, clone = host.new_run("exit 0\n")
    host.settings["implementer_user"] = "agentc-impl-missing0"
    host.write_config()
    result = host.run("launch-root", run, clone)
    assert result.returncode == 1
    assert "role account agentc-impl-missing0 does not exist" in result.stderr


def test_launch_root_refuses_personal_mode(host: Host) -> None:
    run, clone = host.new_run("exit 0\n")
    host.settings["mode"] = "personal"
    host.write_config()
    result = host.run("launch-root", run, clone)
    assert result.returncode == 1
    assert "launch-root is for host mode" in result.stderr


def _break(host: Host, how: str) -> tuple[Path, str]:
    """Plant one layout problem; return the path it concerns and the expected message part."""
    impl = host.accounts["implementer"]
    role_dir = host.role_dir("implementer")
    config = role_dir / "claude-config"
    if how == "role dir 0755":
        os.chmod(role_dir, 0o755)  # noqa: S103 - the hostile state under test
        return role_dir, "has mode 0755, expected 0750"
    if how == "role dir group root":
        os.chown(role_dir, 0, 0)
        return role_dir, f"is owned by 0:0, expected 0:{impl.gid}"
    if how == "role dir owned by the role":
        os.chown(role_dir, impl.uid, impl.gid)
        return role_dir, f"is owned by {impl.uid}:{impl.gid}, expected 0:{impl.gid}"
    if how == "runs owned by root":
        os.chown(role_dir / "runs", 0, 0)
        return role_dir / "runs", f"is owned by 0:0, expected {impl.uid}:None"
    if how == "clones 0750":
        os.chmod(role_dir / "clones", 0o750)  # noqa: S103 - the hostile state under test
        return role_dir / "clones", "has mode 0750, expected 0700"
    if how == "claude-config owned by the role":
        os.chown(config, impl.uid, impl.gid)
        return config, f"is owned by {impl.uid}:{impl.gid}, expected 0:{impl.gid}"
    if how == "claude-config symlink":
        shutil.move(config, role_dir / "elsewhere")
        os.symlink(role_dir / "elsewhere", config)
        return config, "must not be a symlink"
    if how == "unexpected config entry":
        _file(config / "hooks.json", "{}\n", 0, 0, 0o444)
        return config / "hooks.json", "unexpected entry in claude-config"
    if how == "retired credentials":
        _file(config / ".credentials.json", "{}\n", 0, 0, 0o444)
        return config / ".credentials.json", "retired claude auth login credential"
    if how == "settings writable":
        os.chmod(config / "settings.json", 0o644)
        return config / "settings.json", "has mode 0644, expected 0444"
    if how == "token owned by the role":
        os.chown(role_dir / "claude-token", impl.uid, impl.gid)
        return role_dir / "claude-token", "must be owned by root"
    if how == "token 0444":
        os.chmod(role_dir / "claude-token", 0o444)
        return role_dir / "claude-token", "mode 0444"
    if how == "state group-writable":
        os.chmod(host.state, 0o775)  # noqa: S103 - the hostile state under test
        return host.state, "is group- or world-writable"
    if how == "state owned by a user":
        os.chown(host.state, impl.uid, impl.gid)
        return host.state, f"is owned by uid {impl.uid}"
    raise AssertionError(how)


BREAKS = [
    "role dir 0755",
    "role dir group root",
    "role dir owned by the role",
    "runs owned by root",
    "clones 0750",
    "claude-config owned by the role",
    "claude-config symlink",
    "unexpected config entry",
    "retired credentials",
    "settings writable",
    "token owned by the role",
    "token 0444",
    "state group-writable",
    "state owned by a user",
]


@pytest.mark.parametrize("how", BREAKS)
def test_launch_root_refuses_a_wrong_layout_before_anything_runs(host: Host, how: str) -> None:
    run, clone = host.new_run("touch $HOME/ran\n")
    path, expected = _break(host, how)
    result = host.run("launch-root", run, clone)
    assert result.returncode == 1, result.stdout
    line = result.stderr.strip()
    assert line.startswith("agentc-supervisor: host checks failed: "), line
    assert str(path) in line and expected in line, line
    assert host.tokens["implementer"] not in line
    assert sorted(os.listdir(run)) == ["prompt.md"]


@pytest.mark.parametrize("how", ["role dir 0755", "unexpected config entry", "token 0444"])
def test_preflight_as_the_role_reports_a_wrong_layout(host: Host, how: str) -> None:
    run, clone = host.new_run("exit 0\n")
    path, expected = _break(host, how)
    result = host.run("preflight", run, clone, as_="implementer")
    report = json.loads(result.stdout)
    assert result.returncode == 1 and report["ok"] is False
    assert any(str(path) in p and expected in p for p in report["problems"]), report


def test_the_portable_python_is_what_the_roles_run() -> None:
    """The role accounts cannot run the venv's interpreter (it lives under /root)."""
    assert PORTABLE_PYTHON[-1] == "/usr/bin/python3" and sys.version_info[:2] == (3, 11)
