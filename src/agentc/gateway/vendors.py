"""``vendors.json``: which vendor is exhausted until when, from 429 answers' reset headers.

Format (shared with the supervisor): ``{"exhausted_until": {"claude": ms, "codex": ms},
"expiry_checked_ms": ms}``, written atomically and durably (:func:`agentc.files.write_atomic`,
0600); an unreadable file counts as empty. The key is the upstream's name in the gateway
config (``claude``, ``codex``).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from agentc.files import write_atomic

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


def _duration_ms(text: str) -> int | None:
    """OpenAI's ``x-ratelimit-reset-*`` durations: ``1s``, ``6m0s``, ``20ms``."""
    parts = _DURATION.findall(text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        return None
    return int(sum(float(n) * _UNIT_MS[u] for n, u in parts))


def reset_from_headers(headers: Mapping[str, str], now_ms: int) -> int | None:
    """The reset time (epoch ms) the rate-limit headers announce.

    Absolute resets (``anthropic-ratelimit-unified-reset`` epoch seconds, the RFC 3339
    ``anthropic-ratelimit-*-reset``) win over relative ones (``retry-after`` seconds, OpenAI's
    ``x-ratelimit-reset-*`` durations), which drift by the time the answer took; the latest
    future value of the chosen kind is used.
    """
    absolute: list[int] = []
    relative: list[int] = []
    retry = headers.get("retry-after")
    if retry and retry.strip().isdigit():
        relative.append(now_ms + int(retry.strip()) * 1000)
    for name, value in headers.items():
        low = name.lower()
        if low == "anthropic-ratelimit-unified-reset":
            if value.strip().isdigit():
                absolute.append(int(value.strip()) * 1000)
        elif low.startswith("anthropic-ratelimit-") and low.endswith("-reset"):
            try:
                absolute.append(int(datetime.fromisoformat(value.strip()).timestamp() * 1000))
            except ValueError:
                pass
        elif low.startswith("x-ratelimit-reset-"):
            ms = _duration_ms(value)
            if ms is not None:
                relative.append(now_ms + ms)
    for found in (absolute, relative):
        future = [t for t in found if t > now_ms]
        if future:
            return max(future)
    return None


class VendorState:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def read(self) -> dict[str, object]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {"exhausted_until": {}}
        if not isinstance(data, dict) or not isinstance(data.get("exhausted_until"), dict):
            return {"exhausted_until": {}}
        return data

    def mark_exhausted(self, vendor: str, until_ms: int) -> int:
        """Record the vendor exhausted until ``until_ms`` (never shortens a later one)."""
        with self._lock:
            data = self.read()
            until = data["exhausted_until"]
            assert isinstance(until, dict)
            current = until.get(vendor)
            if isinstance(current, int) and current > until_ms:
                until_ms = current
            until[vendor] = until_ms
            self._write(data)
        return until_ms

    def _write(self, data: dict[str, object]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, json.dumps(data).encode())
