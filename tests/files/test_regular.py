"""``agentc.files.regular``: a regular file, or its tail, read without following a link or
blocking on a FIFO; anything else is an OSError."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentc.files import open_regular, read_tail


def test_the_tail_is_the_last_bytes_or_the_whole_of_a_shorter_file(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"0123456789")
    assert read_tail(path, 4) == b"6789"
    assert read_tail(path, 100) == b"0123456789"
    with open_regular(path) as handle:
        assert handle.read() == b"0123456789"


def test_a_link_a_fifo_a_directory_and_a_missing_file_are_refused(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_bytes(b"secret")
    (tmp_path / "link").symlink_to(target)
    os.mkfifo(tmp_path / "fifo")  # opened O_NONBLOCK: refused, never waited on
    (tmp_path / "dir").mkdir()
    for name in ("link", "fifo", "dir", "missing"):
        with pytest.raises(OSError):
            read_tail(tmp_path / name, 10)
    with pytest.raises(OSError, match="is not a regular file"):
        open_regular(tmp_path / "fifo")
