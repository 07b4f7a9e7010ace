"""A real supervised host for the root tests: every path below a throwaway root-owned folder,
four accounts with a unique prefix, ``agentc-host setup`` run for real, and a real release (the
wheel built from this checkout) installed by the updater's own installer and switched to."""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from agentc.host.settings import HostSettings
from agentc.host.update import install
from tests.host.kit import host

PATHS = (
    ("state_dir", "/var/lib/agentc"), ("etc_dir", "/etc/agentc"), ("opt_dir", "/opt/agentc"),
    ("systemd_dir", "/etc/systemd/system"), ("cron_dir", "/etc/cron.d"), ("log_dir", "/var/log"),
    ("run_dir", "/run"),
)  # fmt: skip


@dataclass
class RealHost:
    root: Path
    names: dict[str, str]
    config: Path
    settings: HostSettings

    def path(self, host_path: str) -> Path:
        return self.root / host_path.lstrip("/")

    def run(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """The installed release's agentc-host (``<bin>/agentc-host``), as root."""
        return subprocess.run(
            [str(self.settings.bin_dir / "agentc-host"), "--config", str(self.config), *args],
            capture_output=True, text=True, timeout=timeout, cwd="/",
            env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
        )  # fmt: skip


def write_host_toml(root: Path, names: dict[str, str], extra: str = "") -> Path:
    lines = [f'{key} = "{root}{path}"' for key, path in PATHS]
    lines += ['init = "cron"', "[accounts]"]
    lines += [f'{key} = "{name}"' for key, name in names.items()]
    path = root / "host.toml"
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


def install_release(settings: HostSettings, wheelhouse: Path, wheel: Path) -> None:
    """The checkout's wheel installed and switched to (the updater's installer)."""
    files = install.incoming(settings)
    for item in [*wheelhouse.glob("*.whl"), wheel]:
        shutil.copy(item, files / item.name)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    install.install(settings, "0.1.0", files, wheel.name, digest)
    shutil.rmtree(files, ignore_errors=True)
    install.switch(settings, "0.1.0")


def new_root() -> Path:
    """A throwaway root-owned folder outside /tmp (which every launch masks: the state tree
    must not be hidden by it, or a release that stops masking the state root would go unseen)."""
    root = Path(tempfile.mkdtemp(prefix="agentc-host-test-", dir="/srv"))
    os.chmod(root, 0o755)  # noqa: S103 - root's; the role accounts must traverse it
    return root


def new_names() -> dict[str, str]:
    tag = secrets.token_hex(3)
    return {"implementer": f"ahi{tag}", "reviewer": f"ahr{tag}", "push": f"ahp{tag}",
            "egress": f"ahe{tag}"}  # fmt: skip


def remove(config: Path, root: Path, names: dict[str, str]) -> None:
    host(config, "setup", "--uninstall")
    for name in names.values():
        subprocess.run(["userdel", name], capture_output=True)
        subprocess.run(["groupdel", name], capture_output=True)
    shutil.rmtree(root, ignore_errors=True)


@contextmanager
def real_host(wheelhouse: Path, wheel: Path, extra: str = "") -> Iterator[RealHost]:
    """Set up for real, a release installed and switched to, setup run again (it enables what
    is ready); uninstalled afterwards, whatever a test left."""
    root, names = new_root(), new_names()
    config = write_host_toml(root, names, extra)
    settings = HostSettings.load(config)
    try:
        done = host(config, "setup")
        assert done.returncode == 0, done.stdout + done.stderr
        install_release(settings, wheelhouse, wheel)
        done = host(config, "setup")
        assert done.returncode == 0, done.stdout + done.stderr
        yield RealHost(root, names, config, settings)
    finally:
        remove(config, root, names)
