"""JSON lines: one compact JSON object per line, appended whole under a lock.

Every log and ledger agentc writes (the gateway's call log and ledger, the egress proxy's
decision log, the supervisor's records) uses this one writer, so each line is a complete object
(one ``write`` of the whole line, flushed) and the format is the same everywhere. Their readers
take the objects back with :func:`json_objects` (or :func:`tail_objects`, of a file's tail),
which pass over a line that is not one: the torn last line of a crash, or the first line a tail
cut.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from agentc.files.regular import read_tail


def json_line(record: Any) -> str:
    """The compact one-line JSON text of ``record``, newline included."""
    return json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n"


class JsonLines:
    """Append JSON lines to an open text stream, or to a file opened ``O_APPEND`` (mode 0600)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: os.PathLike[str] | str) -> JsonLines:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, flags, 0o600)
        return cls(os.fdopen(fd, "a", encoding="utf-8"))

    def write(self, record: Any) -> None:
        text = json_line(record)
        with self._lock:
            self._stream.write(text)
            self._stream.flush()

    def close(self) -> None:
        with self._lock:
            self._stream.close()


def json_objects(lines: Iterable[str | bytes]) -> Iterator[dict[str, Any]]:
    """The JSON objects among ``lines``; a line that is not one is passed over."""
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            yield row


def tail_objects(path: Path, limit: int) -> list[dict[str, Any]]:
    """The JSON objects of the last ``limit`` bytes of the regular file at ``path``
    (:func:`agentc.files.read_tail`); none when there is no such file."""
    try:
        raw = read_tail(path, limit)
    except FileNotFoundError:
        return []
    return list(json_objects(raw.decode("utf-8", errors="replace").splitlines()))
