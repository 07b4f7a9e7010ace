"""Test kit: a real state layout, a mock harness, and real ``agentc-supervisor launch`` runs.

The mock harness (installed as claude, codex and pi) runs its stdin, the sealed prompt, as a
shell script: a containment row is a prompt that attempts something and exits non-zero
when the attempt fails.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
VENV_SITE = REPO / ".venv/lib/python3.11/site-packages"
HARNESS_BIN = REPO / "tools/harnesses/node_modules/.bin"
MOCK = "#!/bin/sh\nexec /bin/sh -s\n"
# A python an unprivileged account can run (the venv's base interpreter lives under /root).
PORTABLE_PYTHON = ["/usr/bin/env", f"PYTHONPATH={VENV_SITE}:{REPO / 'src'}", "/usr/bin/python3"]


@dataclass
class Kit:
    root: Path
    state: Path
    bin: Path
    config: Path
    mode: str
    uid: int = 0
    gid: int = 0
    user: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    counter: int = 0

    def role_dir(self, role: str) -> Path:
        return self.state / ("impl" if role == "implementer" else "rev")

    def new_run(self, prompt: str | bytes, role: str = "implementer") -> tuple[Path, Path]:
        self.counter += 1
        name = f"r{self.counter}-{secrets.token_hex(3)}"
        run = self.role_dir(role) / "runs" / name
        clone = self.role_dir(role) / "clones" / name
        for path in (run, clone):
            path.mkdir(mode=0o700)
            os.chown(path, self.uid, self.gid)
        data = prompt.encode() if isinstance(prompt, str) else prompt
        (run / "prompt.md").write_bytes(data)
        os.chown(run / "prompt.md", self.uid, self.gid)
        return run, clone

    def argv(
        self, run: Path, clone: Path, *extra: str, role: str = "implementer", cmd: str = "launch"
    ) -> list[str]:
        base = (
            [*PORTABLE_PYTHON, "-m", "agentc.supervisor.cli"]
            if self.user
            else [
                sys.executable,
                "-m",
                "agentc.supervisor.cli",
            ]
        )
        return [*base, "--config", str(self.config), cmd, "--role", role,
                "--run", str(run), "--clone", str(clone), *extra]  # fmt: skip

    def launch(
        self,
        run: Path,
        clone: Path,
        *extra: str,
        role: str = "implementer",
        cmd: str = "launch",
        timeout: float = 120,
        **popen: Any,
    ) -> subprocess.CompletedProcess[str]:
        argv = self.argv(run, clone, *extra, role=role, cmd=cmd)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
        if self.user:
            home = pwd.getpwnam(self.user).pw_dir
            argv = ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups",
                    *argv]  # fmt: skip
            env["HOME"] = home
        return subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=timeout, cwd="/", **popen
        )

    def run_row(self, script: str, role: str = "implementer") -> tuple[int, Path]:
        run, clone = self.new_run(script, role)
        result = self.launch(run, clone, role=role)
        return result.returncode, run


def write_config(kit: Kit) -> None:
    lines = [f"{k} = {json.dumps(v)}" for k, v in kit.settings.items() if not isinstance(v, dict)]
    for key, value in kit.settings.items():
        if isinstance(value, dict):  # a TOML table; json strings and lists are valid TOML
            lines += [f"[{key}]", *(f"{k} = {json.dumps(v)}" for k, v in value.items())]
    kit.config.write_text("\n".join(lines) + "\n")
    os.chmod(kit.config, 0o644)


def make_kit(root: Path, mode: str = "personal", user: str | None = None, **settings: Any) -> Kit:
    """A state tree under ``root`` (personal: owned by ``user`` or root), mock harnesses."""
    uid = gid = 0
    if user:
        entry = pwd.getpwnam(user)
        uid, gid = entry.pw_uid, entry.pw_gid
    root.mkdir(parents=True, exist_ok=True)
    bin_dir = root / "bin"
    bin_dir.mkdir(mode=0o755)
    for name in ("claude", "codex", "pi"):
        (bin_dir / name).write_text(MOCK)
        os.chmod(bin_dir / name, 0o755)  # noqa: S103 - the mock must be executable
    state = root / "state"
    state.mkdir(mode=0o700)
    for role in ("impl", "rev"):
        for sub in ("", "/runs", "/clones"):
            (state / f"{role}{sub}").mkdir(mode=0o700)
            os.chown(state / f"{role}{sub}", uid, gid)
        token = state / role / "claude-token"
        token.write_text("dummy-test-token-" + secrets.token_hex(8) + "\n")
        os.chmod(token, 0o600)
        os.chown(token, uid, gid)
    os.chown(state, uid, gid)
    if user:
        os.chown(root, uid, gid)
    kit = Kit(root, state, bin_dir, root / "supervisor.toml", mode, uid, gid, user)
    kit.settings = {
        "mode": mode,
        "state_dir": str(state),
        "egress_listen": "",
        # The mock harness needs no model: no gateway; the rows exercise the token opt-in
        # (its confinement: candidate commands never see it). Gateway launches pass both.
        "gateway_listen": "",
        "token_in_env": True,
        "harness_paths": {n: str(bin_dir / n) for n in ("claude", "codex", "pi")},
        **settings,
    }
    if user:
        kit.settings.setdefault("supervisor_program", [*PORTABLE_PYTHON, "-m",
                                                       "agentc.supervisor.cli"])  # fmt: skip
    write_config(kit)
    return kit


def script_report(script: str, *args: str) -> dict[str, Any]:
    """Run ``script`` in a Python process of its own (one that marks itself the child
    subreaper, which the test runner must not) and return the JSON its last line printed."""
    result = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return report


def cleanup(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)


def terminal(run: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run / ".state-terminal.json").read_text())
    return data


def create_user(prefix: str) -> str:
    name = f"{prefix}{secrets.token_hex(3)}"
    subprocess.run(
        ["useradd", "--create-home", "--shell", "/usr/sbin/nologin", "--user-group", name],
        check=True,
        capture_output=True,
    )
    return name


def delete_user(name: str) -> None:
    subprocess.run(["userdel", "--remove", name], capture_output=True)
    subprocess.run(["groupdel", name], capture_output=True)


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int


@contextmanager
def throwaway_accounts(prefixes: dict[str, str]) -> Iterator[dict[str, Account]]:
    """One new account per key (named ``<prefix><random>``), deleted afterwards, and checked
    gone."""
    made: list[str] = []
    try:
        found: dict[str, Account] = {}
        for key, prefix in prefixes.items():
            name = create_user(prefix)
            made.append(name)
            entry = pwd.getpwnam(name)
            found[key] = Account(name, entry.pw_uid, entry.pw_gid)
        yield found
    finally:
        for name in made:
            delete_user(name)
        for name in made:
            assert subprocess.run(["id", name], capture_output=True).returncode != 0


def mkdir_owned(path: Path, uid: int, gid: int, mode: int) -> Path:
    """``path`` made with exactly ``mode`` (no umask) and owned by ``uid:gid``."""
    path.mkdir(mode=mode)
    os.chown(path, uid, gid)
    os.chmod(path, mode)
    return path
