"""Release verification against hostile indexes (no root): each attack is published for real
(``agentc-host release``), tampered with, and re-signed with the trusted key where the attack
needs a valid signature, so only the later checks can stop it; each is refused with its reason
and leaves nothing but the private download folder."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import zipfile
from pathlib import Path

import pytest

from agentc.host.settings import HostSettings, Update
from agentc.host.update import release
from tests.host.kit import host, write_settings
from tests.host.update_kit import ssh_key

DEP = "dep_pkg-1.0-py3-none-any.whl"


def _wheel(path: Path, members: dict[str, bytes], record: str | None = None) -> Path:
    lines = []
    for name, data in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.append(f"{name},sha256={digest},{len(data)}")
    info = path.name.split("-")[0] + "-" + path.name.split("-")[1] + ".dist-info"
    lines.append(f"{info}/RECORD,,")
    with zipfile.ZipFile(path, "w") as wheel:
        for name, data in members.items():
            wheel.writestr(name, data)
        wheel.writestr(f"{info}/RECORD", record if record is not None else "\n".join(lines))
    return path


@pytest.fixture
def kit(tmp_path: Path) -> dict[str, Path]:
    key = tmp_path / "key"
    public = ssh_key(key, "release")
    signers = tmp_path / "signers"
    signers.write_text(f'agentc-release namespaces="agentc-release" {public}\n')
    deps = tmp_path / "deps"
    deps.mkdir()
    _wheel(deps / DEP, {"dep_pkg/__init__.py": b"X = 1\n"})
    wheel = _wheel(tmp_path / "agentc-0.2.0-py3-none-any.whl", {"agentc/__init__.py": b""})
    claude = tmp_path / "claude"
    claude.write_text("#!/bin/sh\necho 2.2.0\n")
    index = tmp_path / "index"
    config = write_settings(tmp_path / "host.toml")
    done = host(config, "release", "--index", str(index), "--wheel", str(wheel),
                "--dependencies", str(deps), "--key", str(key),
                "--harness", f"claude=2.2.0={claude}")  # fmt: skip
    assert done.returncode == 0, done.stderr
    return {"key": key, "signers": signers, "index": index, "tmp": tmp_path}


def _settings(kit: dict[str, Path], **update: object) -> HostSettings:
    keys: dict[str, object] = {"index": str(kit["index"]), "signers": kit["signers"], **update}
    return HostSettings(etc_dir=kit["tmp"], update=Update(**keys))  # type: ignore[arg-type]


def _fetch(kit: dict[str, Path], **update: object) -> release.Release:
    settings = _settings(kit, **update)
    work = kit["tmp"] / f"work-{len(list(kit['tmp'].glob('work-*')))}"
    work.mkdir()
    index = release.Index(settings)
    return release.fetch(settings, index, release.latest(index), work)


def _resign(kit: dict[str, Path], folder: Path, namespace: str = "agentc-release") -> None:
    (folder / "SHA256SUMS.sig").unlink()
    subprocess.run(
        ["ssh-keygen", "-q", "-Y", "sign", "-f", str(kit["key"]), "-n", namespace,
         str(folder / "SHA256SUMS")],
        check=True, capture_output=True,
    )  # fmt: skip


def _relist(kit: dict[str, Path], folder: Path) -> None:
    """SHA256SUMS written again for the folder's files as they now are, and signed."""
    names = sorted(
        p.relative_to(folder).as_posix() for p in folder.rglob("*")
        if p.is_file() and not p.name.startswith("SHA256SUMS")
    )  # fmt: skip
    lines = [f"{hashlib.sha256((folder / n).read_bytes()).hexdigest()}  {n}" for n in names]
    (folder / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    _resign(kit, folder)


def test_a_published_release_verifies(kit: dict[str, Path]) -> None:
    found = _fetch(kit)
    assert found.version == "0.2.0" and found.wheel == "agentc-0.2.0-py3-none-any.whl"
    assert found.harnesses["claude"].version == "2.2.0"
    assert sorted(p.name for p in found.files.iterdir()) == [
        "agentc-0.2.0-py3-none-any.whl", DEP, "harness", "release.json"]  # fmt: skip
    wheel = kit["tmp"] / "agentc-0.2.0-py3-none-any.whl"
    again = host(kit["tmp"] / "host.toml", "release", "--index", str(kit["index"]),
                 "--wheel", str(wheel), "--key", str(kit["key"]))  # fmt: skip
    assert again.returncode == 2 and "already published" in again.stderr


def test_a_signature_in_another_namespace_or_by_another_key_is_refused(kit):
    folder = kit["index"] / "0.2.0"
    _resign(kit, folder, namespace="file")
    with pytest.raises(release.Refused, match="signature does not verify"):
        _fetch(kit)
    other = kit["tmp"] / "other"
    ssh_key(other, "someone")
    kit2 = {**kit, "key": other}
    _resign(kit2, folder)
    with pytest.raises(release.Refused, match="signature does not verify"):
        _fetch(kit)
    (kit["signers"]).unlink()
    with pytest.raises(release.Refused, match="no release signers file"):
        _fetch(kit)


@pytest.mark.parametrize(
    "name", ["../x", "/etc/passwd", "a/b/c", "harness/..", ".hidden", "a\\b", "x y"]
)
def test_names_that_leave_the_release_are_refused_even_when_signed(kit, name: str) -> None:
    folder = kit["index"] / "0.2.0"
    sums = folder / "SHA256SUMS"
    sums.write_text(sums.read_text() + f"{'0' * 64}  {name}\n")
    _resign(kit, folder)
    with pytest.raises(release.Refused, match="SHA256SUMS line|not a plain relative name"):
        _fetch(kit)


def test_a_wheel_member_outside_the_wheel_or_off_its_record_is_refused(kit) -> None:
    folder = kit["index"] / "0.2.0"
    _wheel(folder / DEP, {"dep_pkg/__init__.py": b"X = 1\n", "../../evil.pth": b"import os\n"})
    _relist(kit, folder)
    with pytest.raises(release.Refused, match="leaves the wheel"):
        _fetch(kit)
    good = {"dep_pkg/__init__.py": b"X = 1\n"}
    _wheel(folder / DEP, good, record="dep_pkg/__init__.py,sha256=AAAA,6\n")
    _relist(kit, folder)
    with pytest.raises(release.Refused, match="is not as its RECORD says"):
        _fetch(kit)


def test_a_harness_that_is_one_of_agentc_s_programs_is_refused(kit) -> None:
    folder = kit["index"] / "0.2.0"
    data = json.loads((folder / "release.json").read_text())
    data["harnesses"] = {"agentc-supervisor": {"file": "harness/claude", "version": "1"}}
    (folder / "release.json").write_text(json.dumps(data))
    _relist(kit, folder)
    with pytest.raises(release.Refused, match="'agentc-supervisor' is not a harness"):
        _fetch(kit)


def test_a_manifest_for_another_version_and_an_oversized_release_are_refused(kit) -> None:
    folder = kit["index"] / "0.2.0"
    data = json.loads((folder / "release.json").read_text())
    (folder / "release.json").write_text(json.dumps({**data, "version": "0.1.0"}))
    _relist(kit, folder)
    with pytest.raises(release.Refused, match="its version is not 0.2.0"):
        _fetch(kit)
    (folder / "release.json").write_text(json.dumps(data))
    (folder / "big.bin").write_bytes(b"\0" * (2 * 1024 * 1024))
    _relist(kit, folder)
    with pytest.raises(release.Refused, match="larger than"):
        _fetch(kit, max_release_mib=1)


def test_a_name_that_is_also_a_folder_is_refused(kit) -> None:
    folder = kit["index"] / "0.2.0"
    sums = folder / "SHA256SUMS"
    sums.write_text(sums.read_text() + f"{hashlib.sha256(b'').hexdigest()}  harness\n")
    _resign(kit, folder)
    with pytest.raises(release.Refused):
        _fetch(kit)


def test_latest_must_be_a_plain_version(kit) -> None:
    (kit["index"] / "latest").write_text("../../etc\n")
    with pytest.raises(release.Refused, match="not a version"):
        _fetch(kit)
