"""Releases on disk: ``<opt>/releases/<version>/`` holds the verified files (``files/``) and the
release's own virtual environment (``venv/``, made with ``host.toml`` ``python`` and filled by
pip from ``files/`` alone, never an index); ``installed.json`` is written last, so a folder
without it is an install that did not finish. ``<opt>/current`` names the live release; the
switch is one atomic rename of a new symlink over it. Old releases are removed past ``keep``,
never the live one or the one a rollback needs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

from agentc.core.errors import AgentcError
from agentc.files import write_atomic
from agentc.files.procs import run_check
from agentc.host.settings import HostSettings

VENV = "venv"
FILES = "files"
DONE = "installed.json"
VERSION = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._+-]{0,63}$")
PIP_SECONDS = 1800.0


class InstallError(AgentcError):
    """A release could not be installed or switched to; the message says why."""


def check_version(version: str) -> str:
    if not VERSION.match(version) or ".." in version:
        raise InstallError(f"release version {version!r} is not a plain version")
    return version


def release_dir(settings: HostSettings, version: str) -> Path:
    return settings.releases / check_version(version)


def incoming(settings: HostSettings) -> Path:
    """A fresh private folder beside the releases for a download being verified."""
    settings.releases.mkdir(mode=0o755, parents=True, exist_ok=True)
    path = settings.releases / f".incoming-{os.getpid()}-{os.urandom(4).hex()}"
    path.mkdir(mode=0o700)
    return path


def current_version(settings: HostSettings) -> str | None:
    try:
        target = os.readlink(settings.current)
    except OSError:
        return None
    name = Path(target).name
    return name if VERSION.match(name) else None


def installed(settings: HostSettings, version: str) -> bool:
    return (release_dir(settings, version) / DONE).is_file()


def install(settings: HostSettings, version: str, files: Path, wheel: str, sha256: str) -> Path:
    """Make ``<releases>/<version>`` from the verified ``files`` (moved in) and install
    ``wheel`` from them; the live release is never touched."""
    target = release_dir(settings, version)
    if current_version(settings) == version:
        raise InstallError(f"release {version} is the live one; not reinstalled")
    if _done(target).get("sha256") == sha256 and _done(target).get("wheel") == wheel:
        return target  # installed by an earlier run (a deferred one) from the same wheel
    if target.exists() or target.is_symlink():
        shutil.rmtree(target) if target.is_dir() and not target.is_symlink() else target.unlink()
    target.mkdir(mode=0o755)
    try:
        os.rename(files, target / FILES)
        os.chmod(target / FILES, 0o755)  # noqa: S103 - every account runs the release
        _run([str(settings.python), "-m", "venv", str(target / VENV)], "making its venv")
        pip = [str(target / VENV / "bin/python"), "-m", "pip", "install", "--no-index",
               "--find-links", str(target / FILES), "--no-cache-dir", "--no-input",
               "--disable-pip-version-check", str(target / FILES / wheel)]  # fmt: skip
        _run(pip, "installing its wheel")
        record = {"version": version, "wheel": wheel, "sha256": sha256, "at": int(time.time())}
        write_atomic(target / DONE, json.dumps(record).encode() + b"\n", mode=0o644)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return target


def _done(target: Path) -> dict[str, object]:
    try:
        data = json.loads((target / DONE).read_bytes())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _run(argv: list[str], what: str) -> None:
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PIP_NO_INDEX": "1"}
    done = run_check(argv, env=env, timeout=PIP_SECONDS, preexec_fn=_readable)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-500:]
        raise InstallError(f"{what} failed ({done.returncode}): {tail}")


def _readable() -> None:
    os.umask(0o022)  # every account runs the release's programs


def switch(settings: HostSettings, version: str) -> None:
    """Point ``<opt>/current`` at the installed ``version``: one atomic rename."""
    if not installed(settings, version):
        raise InstallError(f"release {version} is not installed")
    temp = settings.opt_dir / f".current-{os.getpid()}-{os.urandom(4).hex()}"
    os.symlink(f"releases/{version}", temp)
    try:
        os.replace(temp, settings.current)
    except OSError:
        temp.unlink(missing_ok=True)
        raise


def prune(settings: HostSettings, keep: int, protect: set[str]) -> list[str]:
    """Remove the oldest installed releases beyond ``keep`` (never one in ``protect`` or the
    live one) and any unfinished folder; the versions removed."""
    live = current_version(settings)
    done = []
    entries = sorted(settings.releases.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True)
    kept = 0
    for entry in entries:
        if entry.name.startswith(".incoming-") or entry.is_symlink():
            continue
        if not (entry / DONE).is_file():
            shutil.rmtree(entry, ignore_errors=True)
            continue
        if entry.name == live or entry.name in protect or kept < keep:
            kept += 1
            continue
        shutil.rmtree(entry, ignore_errors=True)
        done.append(entry.name)
    return done
