"""Token-file refusals name their reason, the byte rule's exact edges, and no descriptor leaks
(tests written for the mutants the mutation run found surviving in tokens.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentc.supervisor.launch import tokens
from tests.supervisor.test_tokens import ROLE_GID, host_token, refused

pytestmark = pytest.mark.root  # host token files are chowned to root:<role gid>
PRINTABLE = bytes(range(0x21, 0x7F))  # every byte the rule allows, '!' through '~'


def reason(path: Path, mode: str = "host", gid: int | None = ROLE_GID) -> str:
    """The refusal's text after the `token file <path>: ` prefix, for exact comparison."""
    return refused(path, mode, gid).removeprefix(f"token file {path}: ")


def test_every_printable_byte_is_accepted(tmp_path: Path) -> None:
    path = host_token(tmp_path, PRINTABLE + b"\n")
    assert tokens.read_token(path, mode="host", group_gid=ROLE_GID) == PRINTABLE.decode()


@pytest.mark.parametrize("bad", [b"\x20", b"\x7f", b"\x80", b"\x1f"])
def test_the_edges_of_the_byte_rule_are_refused(tmp_path: Path, bad: bytes) -> None:
    assert reason(host_token(tmp_path, b"abc" + bad + b"def")) == (
        "holds whitespace, control or non-ASCII bytes"
    )


def test_reads_and_refusals_leave_no_descriptor_open(tmp_path: Path) -> None:
    good = host_token(tmp_path, b"tokenvalue\n")
    other = tmp_path / "big"
    other.write_bytes(b"x" * 5000)
    os.chown(other, 0, ROLE_GID)
    os.chmod(other, 0o440)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(50):
        tokens.read_token(good, mode="host", group_gid=ROLE_GID)
        refused(other)
        refused(good, gid=ROLE_GID + 1)
    assert len(os.listdir("/proc/self/fd")) == before


def test_each_refusal_names_its_reason(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    assert reason(tmp_path / "d") == "not a regular file"
    linked = host_token(tmp_path, b"tok\n")
    os.link(linked, tmp_path / "second")
    assert reason(linked) == "has more than one hard link"
    os.unlink(tmp_path / "second")
    assert reason(tmp_path / "missing") == "missing"
    (tmp_path / "d" / "tok").write_bytes(b"tok\n")
    (tmp_path / "via").symlink_to(tmp_path / "d")
    assert reason(tmp_path / "via" / "tok") == (
        "the path must be canonical and contain no symlinks"
    )
    assert reason(linked, gid=ROLE_GID + 1) == (
        f"must be owned by root, group gid {ROLE_GID + 1}, mode 0440 "
        f"(is uid 0, gid {ROLE_GID}, mode 0440)"
    )
    os.chmod(linked, 0o444)
    assert reason(linked) == (
        f"must be owned by root, group gid {ROLE_GID}, mode 0440 "
        f"(is uid 0, gid {ROLE_GID}, mode 0444)"
    )
    big = host_token(tmp_path, b"x" * 4099)
    assert reason(big) == "longer than 4098 bytes"
    assert reason(host_token(tmp_path, b"y" * 4097)) == "token longer than 4096 bytes"
    assert reason(host_token(tmp_path, b"\n")) == "empty"


def test_personal_refusal_names_the_mode(tmp_path: Path) -> None:
    path = tmp_path / "mine"
    path.write_bytes(b"tok\n")
    os.chmod(path, 0o640)
    assert reason(path, mode="personal", gid=None) == (
        "must be yours with no group or other access (mode 0640)"
    )


def test_an_unopenable_path_names_the_system_reason(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_bytes(b"x")
    assert reason(plain / "token") == "cannot open (Not a directory)"
