"""A release from the index, verified before anything on the host changes.

The index (``[update] index``: an absolute folder or an ``https://`` URL) holds ``latest`` (one
line: the newest version; only a pointer, trusted for nothing) and a folder per version::

    <index>/<version>/SHA256SUMS       "<sha256>  <name>" per file of the release
    <index>/<version>/SHA256SUMS.sig   ssh-keygen -Y sign over SHA256SUMS (the manifest)
    <index>/<version>/release.json     {"version", "wheel", "harnesses": {name: {file, version}}}
    <index>/<version>/<name>           the wheels (agentc and its dependencies), harness files

Checked in this order, and the first refusal ends the run with nothing changed: the manifest's
signature against the signers the host trusts (``ssh-keygen -Y verify`` with ``[update]
signers``, ``signer`` and ``namespace``); every name in it (plain relative names, at most one
folder deep, no ``..``, no duplicates, at most :data:`MAX_FILES`); each file's size (the
release at most ``max_release_mib``) and SHA-256 as downloaded; ``release.json`` (its version is
the folder's, its wheel is ``agentc-<version>-*.whl`` and listed, each harness file listed);
then every wheel's own ``RECORD``: each member's hash and size, no member unlisted, none outside
the wheel.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import re
import ssl
import subprocess
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import httpx

from agentc.core.errors import AgentcError
from agentc.host.settings import HostSettings
from agentc.host.update.install import check_version
from agentc.supervisor.harness import registry

SUMS = "SHA256SUMS"
SIGNATURE = "SHA256SUMS.sig"
MANIFEST = "release.json"
MAX_FILES = 256
MAX_SMALL = 1024 * 1024  # latest, the sums, the signature, release.json
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
_LINE = re.compile(r"^([0-9a-f]{64})  (\S+)$")


class Refused(AgentcError):
    """The release failed a check; nothing on the host was changed."""


@dataclass
class Harness:
    name: str
    file: str
    version: str


@dataclass
class Release:
    version: str
    wheel: str
    wheel_sha256: str
    files: Path  # the verified files, by their names
    harnesses: dict[str, Harness] = field(default_factory=dict)


class Index:
    """Reads the index: a folder, or an https server (the system's CAs, or ``ca_file``)."""

    def __init__(self, settings: HostSettings) -> None:
        update = settings.update
        if update.index is None:
            raise Refused("no release index: set [update] index in host.toml")
        self.base = update.index
        self.timeout = update.fetch_timeout_seconds
        self.client: httpx.Client | None = None
        if self.base.startswith("https://"):
            context = ssl.create_default_context(
                cafile=str(update.ca_file) if update.ca_file else None
            )
            self.client = httpx.Client(
                verify=context, timeout=self.timeout, follow_redirects=False, trust_env=False
            )

    def close(self) -> None:
        if self.client is not None:
            self.client.close()

    def fetch(self, name: str, limit: int, out: Path | None = None) -> bytes | int:
        """The index's ``name`` (a checked relative name): its bytes, or, with ``out``, its
        size once written there. More than ``limit`` bytes is refused."""
        if self.client is None:
            return self._read(Path(self.base) / name, limit, out)
        url = f"{self.base}/{name}"
        try:
            with self.client.stream("GET", url) as answer:
                if answer.status_code != 200:
                    raise Refused(f"{url}: answered {answer.status_code}")
                return _copy(answer.iter_bytes(), limit, url, out)
        except httpx.HTTPError as exc:
            raise Refused(f"{url}: {type(exc).__name__}: {exc}") from None

    def _read(self, path: Path, limit: int, out: Path | None) -> bytes | int:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise Refused(f"{path}: {exc.strerror}") from None
        with os.fdopen(fd, "rb") as handle:
            return _copy(iter(lambda: handle.read(1 << 20), b""), limit, str(path), out)


def _copy(chunks: Any, limit: int, where: str, out: Path | None) -> bytes | int:
    total, kept = 0, []
    sink = open(out, "xb") if out is not None else None  # noqa: SIM115 - closed below
    try:
        for chunk in chunks:
            total += len(chunk)
            if total > limit:
                raise Refused(f"{where}: larger than {limit} bytes")
            if sink is not None:
                sink.write(chunk)
            else:
                kept.append(chunk)
    finally:
        if sink is not None:
            sink.close()
    return total if out is not None else b"".join(kept)


def latest(index: Index) -> str:
    raw = index.fetch("latest", 256)
    assert isinstance(raw, bytes)
    try:
        return check_version(raw.decode("ascii").strip())
    except (UnicodeDecodeError, AgentcError) as exc:
        raise Refused(f"the index's latest is not a version ({exc})") from None


def safe_name(name: str) -> str:
    """A release file's name: plain components, at most one folder deep, nothing escaping."""
    parts = PurePosixPath(name).parts
    if (
        not 1 <= len(parts) <= 2
        or name.startswith("/")
        or "\\" in name
        or any(not _NAME.match(p) or p in (".", "..") for p in parts)
    ):
        raise Refused(f"the manifest names {name!r}: not a plain relative name (a path escape)")
    return name


def parse_sums(text: bytes) -> dict[str, str]:
    """name -> sha256 from the manifest, every line checked."""
    sums: dict[str, str] = {}
    for number, raw in enumerate(text.decode("utf-8", "replace").splitlines(), 1):
        found = _LINE.match(raw)
        if found is None:
            raise Refused(f"{SUMS} line {number} is not '<sha256>  <name>'")
        name = safe_name(found.group(2))
        if name in sums:
            raise Refused(f"{SUMS} names {name} twice")
        sums[name] = found.group(1)
    if not sums or len(sums) > MAX_FILES:
        raise Refused(f"{SUMS} must name 1 to {MAX_FILES} files")
    if MANIFEST not in sums:
        raise Refused(f"{SUMS} does not name {MANIFEST}")
    return sums


def verify_signature(settings: HostSettings, sums: bytes, signature: bytes, work: Path) -> None:
    signers = settings.signers_file
    if not signers.is_file():
        raise Refused(f"no release signers file {signers} (ssh-keygen allowed_signers)")
    (work / SIGNATURE).write_bytes(signature)
    argv = ["ssh-keygen", "-Y", "verify", "-f", str(signers), "-I", settings.update.signer,
            "-n", settings.update.namespace, "-s", str(work / SIGNATURE)]  # fmt: skip
    try:  # the signed data on standard input
        done = subprocess.run(
            argv, input=sums, capture_output=True, timeout=60, cwd="/",
            env={"PATH": "/usr/bin:/bin", "LANG": "C"}, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        raise Refused(f"ssh-keygen -Y verify could not run: {exc}") from None
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).decode("utf-8", "replace").strip().splitlines()
        raise Refused(f"the manifest's signature does not verify: {(lines or ['?'])[-1][:200]}")


def fetch(settings: HostSettings, index: Index, version: str, work: Path) -> Release:
    """Download and verify ``version`` into ``work/files``; raises :class:`Refused`."""
    sums_raw = index.fetch(f"{version}/{SUMS}", MAX_SMALL)
    signature = index.fetch(f"{version}/{SIGNATURE}", MAX_SMALL)
    assert isinstance(sums_raw, bytes) and isinstance(signature, bytes)
    verify_signature(settings, sums_raw, signature, work)
    sums = parse_sums(sums_raw)
    files = work / "files"
    files.mkdir(mode=0o700)
    budget = settings.update.max_release_mib * 1024 * 1024
    for name, digest in sums.items():
        target = files / name
        try:
            target.parent.mkdir(mode=0o755, exist_ok=True)
            size = index.fetch(f"{version}/{name}", budget, target)
        except OSError as exc:  # e.g. a name that is also another name's folder
            raise Refused(f"{name}: cannot be stored ({exc.strerror})") from None
        assert isinstance(size, int)
        budget -= size
        if _sha256(target) != digest:
            raise Refused(f"{name}: its SHA-256 is not the one {SUMS} gives")
    release = read_manifest(files / MANIFEST, version, sums)
    for name in sums:
        if name.endswith(".whl"):
            check_wheel(files / name)
    release.files = files
    return release


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_manifest(path: Path, version: str, sums: dict[str, str]) -> Release:
    try:
        data = json.loads(path.read_bytes())
        if not isinstance(data, dict) or data.get("version") != version:
            raise ValueError(f"its version is not {version}")
        wheel = str(data["wheel"])
        harnesses = {
            str(name): Harness(str(name), safe_name(str(h["file"])), str(h["version"]))
            for name, h in dict(data.get("harnesses") or {}).items()
        }
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise Refused(f"{MANIFEST}: {exc}") from None
    if wheel not in sums or not re.fullmatch(rf"agentc-{re.escape(version)}-[^/]+\.whl", wheel):
        raise Refused(f"{MANIFEST}: its wheel {wheel!r} is not agentc {version}'s, or not listed")
    for harness in harnesses.values():
        if harness.name not in registry.names():  # never one of agentc's own programs
            raise Refused(f"{MANIFEST}: {harness.name!r} is not a harness agentc runs")
        if harness.file not in sums:
            raise Refused(f"{MANIFEST}: harness {harness.name!r}: its file is not listed")
    return Release(version, wheel, sums[wheel], path.parent, harnesses)


def check_wheel(path: Path) -> None:
    """Every member of the wheel is in its RECORD with that SHA-256 and size, and stays inside."""
    try:
        with zipfile.ZipFile(path) as wheel:
            names = wheel.namelist()
            records = [n for n in names if n.endswith(".dist-info/RECORD") and n.count("/") == 1]
            if len(records) != 1:
                raise Refused(f"{path.name}: not one .dist-info/RECORD")
            listed = _record(wheel.read(records[0]), path.name)
            for name in names:
                if name.startswith("/") or ".." in PurePosixPath(name).parts or "\\" in name:
                    raise Refused(f"{path.name}: member {name!r} leaves the wheel (a path escape)")
                if name == records[0] or name.endswith("/"):
                    continue
                data = wheel.read(name)
                want = listed.pop(name, None)
                got = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
                if want is None or want[0] != "sha256=" + got.decode() or want[1] != str(len(data)):
                    raise Refused(f"{path.name}: {name} is not as its RECORD says")
    except (zipfile.BadZipFile, OSError) as exc:
        raise Refused(f"{path.name}: not a wheel ({exc})") from None


def _record(raw: bytes, wheel: str) -> dict[str, tuple[str, str]]:
    rows: dict[str, tuple[str, str]] = {}
    for row in csv.reader(io.StringIO(raw.decode("utf-8", "replace"))):
        if len(row) == 3 and row[1]:
            rows[row[0]] = (row[1], row[2])
        elif len(row) != 3:
            raise Refused(f"{wheel}: a RECORD row is not path,hash,size")
    return rows
