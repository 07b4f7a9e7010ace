"""Real wheels for the updater's tests: agentc built from this checkout with ``uv build`` (or from
a copy with another version and a patch applied, for a release that must fail), and its
dependencies as wheels made from the test environment's own installed distributions (the
machine has no package index; each is a valid wheel: its files, and a RECORD of their hashes)."""

from __future__ import annotations

import base64
import hashlib
import re
import shutil
import subprocess
import zipfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SITE = REPO / ".venv/lib/python3.11/site-packages"
UV = shutil.which("uv") or str(Path.home() / ".local/bin/uv")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_requirements() -> dict[str, str]:
    """agentc's runtime dependencies as locked (name -> version), for this platform."""
    out = subprocess.run(
        [UV, "export", "--frozen", "--no-dev", "--no-emit-project", "--format",
         "requirements-txt", "--no-hashes"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    found: dict[str, str] = {}
    for line in out.splitlines():
        if "==" not in line or line.startswith(("#", " ")):
            continue
        spec, _, marker = line.partition(";")
        if "== 'win32'" in marker or "== 'emscripten'" in marker:
            continue  # not this platform
        name, _, version = spec.strip().partition("==")
        found[_normal(name)] = version
    return found


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def wheel_of(dist: metadata.Distribution, out: Path) -> Path:
    """A wheel of an installed distribution: its files (not its scripts or byte code)."""
    info = Path(str(dist._path))  # type: ignore[attr-defined]
    tags = [line.split(":", 1)[1].strip() for line in (info / "WHEEL").read_text().splitlines()
            if line.startswith("Tag:")]  # fmt: skip
    name = re.sub(r"[-.]+", "_", dist.metadata["Name"])
    target = out / f"{name}-{dist.version}-{tags[0]}.whl"
    record_name = f"{info.name}/RECORD"
    lines = []
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as wheel:
        for item in dist.files or []:
            rel = str(item)
            if rel.startswith("..") or "__pycache__" in rel or rel == record_name:
                continue
            data = (SITE / rel).read_bytes()
            wheel.writestr(rel, data)
            lines.append(_record_line(rel, data))
        lines.append(f"{record_name},,")
        wheel.writestr(record_name, "\n".join(lines) + "\n")
    return target


def dependency_wheels(out: Path) -> list[Path]:
    wanted = runtime_requirements()
    made = []
    for dist in metadata.distributions(path=[str(SITE)]):
        name = _normal(dist.metadata["Name"])
        if wanted.get(name) == dist.version:
            made.append(wheel_of(dist, out))
            del wanted[name]
    assert not wanted, f"not installed in the test environment: {wanted}"
    return made


def agentc_wheel(
    out: Path, version: str | None = None, patch: Callable[[Path], None] | None = None
) -> Path:
    """``uv build --wheel`` of this checkout, or of a copy with ``version`` and ``patch``."""
    source = REPO
    if version is not None or patch is not None:
        source = out / "source"
        shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
            ".venv", ".git", "node_modules", "tools", "dist", "__pycache__", ".mypy_cache",
            ".ruff_cache", "tests", "bench"))  # fmt: skip
        if version is not None:
            project = source / "pyproject.toml"
            text = project.read_text()
            project.write_text(text.replace('version = "0.1.0"', f'version = "{version}"', 1))
        if patch is not None:
            patch(source)
    subprocess.run(
        [UV, "build", "--wheel", "--offline", "--out-dir", str(out), str(source)],
        cwd=source, capture_output=True, text=True, check=True,
    )  # fmt: skip
    if source != REPO:
        shutil.rmtree(source)
    [wheel] = [p for p in out.glob("agentc-*.whl")]
    return wheel
