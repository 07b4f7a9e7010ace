"""JSON lines: one compact JSON object per line, appended whole under a lock.

Every log and ledger agentc writes (the gateway's call log and ledger, the egress proxy's
decision log, the supervisor's records) uses this one writer, so each line is a complete object
(one ``write`` of the whole line, flushed) and the format is the same everywhere.
"""

from __future__ import annotations

import json
import os
import threading
from typing import IO, Any


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
