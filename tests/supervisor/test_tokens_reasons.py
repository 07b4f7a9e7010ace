"""Token-file refusals name their reason, the byte rule's exact edges, and no descriptor leaks
(tests written for the mutants the mutation run found surviving in tokens.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_tokens import ROLE_GID, host_token, refused

from agentc.supervisor import tokens

PRINTABLE = bytes(range(0x21, 0x7F))  # every byte the rule allows, '!' through '~'


def test_every_printable_byte_is_accepted(tmp_path: Path) -> None:
    path = host_token(tmp_path, PRINTABLE + b"\n")
    assert tokens.read_token(path, mode="host", group_gid=ROLE_GID) == PRINTABLE.decode()


@pytest.mark.parametrize("bad", [b"\x20", b"\x7f", b"\x80", b"\x1f"])
def test_the_edges_of_the_byte_rule_are_refused(tmp_path: Path, bad: bytes) -> None:
    message = refused(host_token(tmp_path, b"abc" + bad + b"def"))
    assert message.endswith("holds whitespace, control or non-ASCII bytes"), message


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
    assert refused(tmp_path / "d").endswith("not a regular file")
    linked = host_token(tmp_path, b"tok\n")
    os.link(linked, tmp_path / "second")
    assert refused(linked).endswith("has more than one hard link")
    os.unlink(tmp_path / "second")
    assert refused(tmp_path / "missing").endswith("missing")
    (tmp_path / "d" / "tok").write_bytes(b"tok\n")
    (tmp_path / "via").symlink_to(tmp_path / "d")
    assert refused(tmp_path / "via" / "tok").endswith(
        "the path must be canonical and contain no symlinks"
    )
    wrong = refused(linked, gid=ROLE_GID + 1)
    assert f"must be owned by root, group gid {ROLE_GID + 1}, mode 0440" in wrong
    assert f"(is uid 0, gid {ROLE_GID}, mode 0440)" in wrong
    os.chmod(linked, 0o444)
    assert refused(linked).endswith(f"(is uid 0, gid {ROLE_GID}, mode 0444)")
    big = host_token(tmp_path, b"x" * 4099)
    assert refused(big).endswith("longer than 4098 bytes")
    assert refused(host_token(tmp_path, b"y" * 4097)).endswith("token longer than 4096 bytes")
    assert refused(host_token(tmp_path, b"\n")).endswith("empty")


def test_personal_refusal_names_the_mode(tmp_path: Path) -> None:
    path = tmp_path / "mine"
    path.write_bytes(b"tok\n")
    os.chmod(path, 0o640)
    message = refused(path, mode="personal", gid=None)
    assert message.endswith("must be yours with no group or other access (mode 0640)"), message
