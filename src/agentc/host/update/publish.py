"""``agentc-host release``: publish a release into an index folder, signed.

Copies the agentc wheel, its dependency wheels and any harness files into
``<index>/<version>/``, writes ``release.json`` and ``SHA256SUMS`` (every file), signs the
latter with ``ssh-keygen -Y sign`` (the key's owner is the release signer the hosts trust), and
points ``<index>/latest`` at the version. The folder is the index a host reads directly, or
what an https server serves. The version is the wheel's; a version already published is refused.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

from agentc.core.errors import ConfigError
from agentc.files import write_atomic
from agentc.host.update.install import check_version
from agentc.host.update.release import MANIFEST, SIGNATURE, SUMS, safe_name

_WHEEL = re.compile(r"^agentc-([^-]+)-.+\.whl$")


def publish(
    index: Path,
    wheel: Path,
    key: Path,
    *,
    dependencies: list[Path],
    harnesses: dict[str, tuple[str, Path]],
    namespace: str,
    latest: bool = True,
) -> str:
    found = _WHEEL.match(wheel.name)
    if found is None:
        raise ConfigError(f"{wheel.name}: not an agentc wheel (agentc-<version>-...whl)")
    version = check_version(found.group(1))
    out = index / version
    if out.exists():
        raise ConfigError(f"{out} exists: release {version} is already published")
    out.mkdir(parents=True)
    try:
        names = []
        for item in [wheel, *dependencies]:
            shutil.copyfile(item, out / safe_name(item.name))
            names.append(item.name)
        pins = {}
        for name, (pin, source) in sorted(harnesses.items()):
            target = f"harness/{safe_name(name)}"
            (out / "harness").mkdir(exist_ok=True)
            shutil.copyfile(source, out / target)
            pins[name] = {"file": target, "version": pin}
            names.append(target)
        manifest = {"version": version, "wheel": wheel.name, "harnesses": pins}
        (out / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        names.append(MANIFEST)
        lines = [f"{_digest(out / n)}  {n}" for n in sorted(names)]
        (out / SUMS).write_text("\n".join(lines) + "\n")
        done = subprocess.run(
            ["ssh-keygen", "-Y", "sign", "-f", str(key), "-n", namespace, str(out / SUMS)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        if done.returncode != 0 or not (out / SIGNATURE).exists():
            raise ConfigError(f"ssh-keygen -Y sign failed: {done.stderr.strip()[-300:]}")
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    if latest:
        write_atomic(index / "latest", f"{version}\n".encode(), mode=0o644)
    return version


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
