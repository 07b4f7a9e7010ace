"""The role's token file: every refusal the seed lists, each naming the file, never its bytes.

Host mode: ``root:<role group>`` mode exactly 0440 (the seed allows nothing else). Personal
mode: the user's own file with no group or other bits. Both: opened without following a
symlink or blocking on a FIFO, a regular single-link file of at most 4098 bytes on a
canonical path; after trailing whitespace is dropped, 1..4096 printable ASCII bytes.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from agentc.core.errors import SupervisorError
from agentc.supervisor.launch import tokens

pytestmark = pytest.mark.root  # host token files are chowned to root:<role gid>
ROLE_GID = 4242
SECRET = "sk-ant-oat01-" + "Zq9" * 20


def host_token(tmp_path: Path, data: bytes, mode: int = 0o440, uid: int = 0) -> Path:
    path = tmp_path / "claude-token"
    path.write_bytes(data)
    os.chown(path, uid, ROLE_GID)
    os.chmod(path, mode)
    return path


def refused(path: Path, mode: str = "host", gid: int | None = ROLE_GID) -> str:
    with pytest.raises(SupervisorError) as info:
        tokens.read_token(path, mode="host" if mode == "host" else "personal", group_gid=gid)
    message = str(info.value)
    assert message.startswith(f"token file {path}: "), message
    assert "Zq9" not in message and "sk-ant" not in message, message
    return message


def test_a_valid_host_token_is_read(tmp_path: Path) -> None:
    path = host_token(tmp_path, SECRET.encode())
    assert tokens.read_token(path, mode="host", group_gid=ROLE_GID) == SECRET


@pytest.mark.parametrize("tail", [b"\n", b"\r\n", b" ", b"\t\n"])
def test_trailing_whitespace_is_dropped(tmp_path: Path, tail: bytes) -> None:
    path = host_token(tmp_path, SECRET.encode() + tail)
    assert tokens.read_token(path, mode="host", group_gid=ROLE_GID) == SECRET


def test_a_4096_byte_token_with_crlf_is_accepted(tmp_path: Path) -> None:
    path = host_token(tmp_path, b"a" * 4096 + b"\r\n")
    assert tokens.read_token(path, mode="host", group_gid=ROLE_GID) == "a" * 4096


@pytest.mark.parametrize("uid", [1, 4242, 65534])
def test_owner_not_root_is_refused(tmp_path: Path, uid: int) -> None:
    message = refused(host_token(tmp_path, SECRET.encode(), uid=uid))
    assert f"is uid {uid}," in message and "must be owned by root" in message


def test_group_not_the_role_is_refused(tmp_path: Path) -> None:
    path = host_token(tmp_path, SECRET.encode())
    os.chown(path, 0, 0)
    assert "is uid 0, gid 0, mode 0440" in refused(path)


def test_group_must_match_even_when_the_role_gid_is_unknown(tmp_path: Path) -> None:
    path = host_token(tmp_path, SECRET.encode())
    assert "must be owned by root" in refused(path, gid=None)


@pytest.mark.parametrize("mode", [0o400, 0o444, 0o460, 0o640, 0o600, 0o644, 0o550, 0o2440])
def test_host_mode_other_than_0440_is_refused(tmp_path: Path, mode: int) -> None:
    message = refused(host_token(tmp_path, SECRET.encode(), mode=mode))
    assert f"mode {mode & 0o7777:04o})" in message


def test_personal_token_must_be_the_users_without_group_or_other_bits(tmp_path: Path) -> None:
    path = tmp_path / "claude-token"
    path.write_text(SECRET)
    os.chmod(path, 0o600)
    assert tokens.read_token(path, mode="personal", group_gid=None) == SECRET
    os.chmod(path, 0o400)
    assert tokens.read_token(path, mode="personal", group_gid=None) == SECRET
    for mode in (0o640, 0o604, 0o660):
        os.chmod(path, mode)
        assert f"(mode {mode:04o})" in refused(path, mode="personal", gid=None)
    os.chmod(path, 0o600)
    os.chown(path, 4242, 0)
    assert "must be yours" in refused(path, mode="personal", gid=None)


def test_a_symlink_is_refused_and_not_followed(tmp_path: Path) -> None:
    real = host_token(tmp_path, SECRET.encode())
    link = tmp_path / "link-token"
    os.symlink(real, link)
    assert "canonical" in refused(link)


def test_a_symlinked_directory_in_the_path_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    host_token(tmp_path / "real", SECRET.encode())
    os.symlink(tmp_path / "real", tmp_path / "alias")
    assert "canonical" in refused(tmp_path / "alias/claude-token")


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    path = tmp_path / "claude-token"
    os.mkfifo(path, 0o440)
    os.chown(path, 0, ROLE_GID)
    outcome: list[str] = []
    worker = threading.Thread(target=lambda: outcome.append(refused(path)), daemon=True)
    worker.start()
    worker.join(10)
    assert outcome and "not a regular file" in outcome[0], "read_token blocked on a FIFO"


def test_a_directory_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "claude-token"
    path.mkdir(mode=0o750)
    assert "not a regular file" in refused(path)


def test_a_hard_linked_token_is_refused(tmp_path: Path) -> None:
    path = host_token(tmp_path, SECRET.encode())
    os.link(path, tmp_path / "second-name")
    assert "more than one hard link" in refused(path)


def test_a_missing_token_is_refused(tmp_path: Path) -> None:
    assert refused(tmp_path / "claude-token").endswith(": missing")


@pytest.mark.parametrize("size", [4099, 5000, 1 << 20])
def test_an_oversized_file_is_refused(tmp_path: Path, size: int) -> None:
    message = refused(host_token(tmp_path, b"Zq9" * (size // 3) + b"a" * (size % 3)))
    assert "longer than 4098 bytes" in message


def test_a_token_of_4097_bytes_is_refused(tmp_path: Path) -> None:
    assert "token longer than 4096 bytes" in refused(host_token(tmp_path, b"a" * 4097))


@pytest.mark.parametrize("data", [b"", b"\n", b"  \r\n", b"\t\t"])
def test_an_empty_token_is_refused(tmp_path: Path, data: bytes) -> None:
    assert refused(host_token(tmp_path, data)).endswith(": empty")


@pytest.mark.parametrize(
    "data",
    [
        b"Zq9 Zq9",  # inner space
        b"Zq9\nZq9\n",  # two lines
        b"Zq9\tZq9",
        b"\nZq9",  # leading newline
        b" Zq9",
        b"Zq9\x00Zq9",
        b"Zq9\x1bZq9",
        b"Zq9\x7fZq9",
        "Zq9é".encode(),
        b"Zq9\xff",
    ],
)
def test_whitespace_control_and_non_ascii_bytes_are_refused(tmp_path: Path, data: bytes) -> None:
    assert "holds whitespace, control or non-ASCII bytes" in refused(host_token(tmp_path, data))


def test_an_unreadable_path_is_refused_naming_the_reason(tmp_path: Path) -> None:
    path = host_token(tmp_path, SECRET.encode())
    message = refused(path / "below-a-file")
    assert "cannot open (Not a directory)" in message
