"""The kernel side: prctl numbers, the create call, procfs read-back, id synthesis, assay.

The prctl numbers are those of wintermute's ``include/uapi/linux/agent_namespaces.h``. On a stock
kernel the create call returns EINVAL (unknown option), which the resolver turns into a
synthesized id. Two environment seams stand in for the kernel in tests, as in the original:
``AGENTNS_PRCTL_MOCK_ERRNO`` (result of the create call) and ``AGENTNS_ASSAY_MOCK_VERDICT``.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Mapping

from agentc.agentns.errors import KernelError, SessionIdError

PR_AGENT_BASE = 0x41544E53  # "ATNS"
PR_GET_AGENT_SESSION_ID = PR_AGENT_BASE + 1
PR_SET_AGENT_INTENT_TAG = PR_AGENT_BASE + 2
PR_GET_AGENT_INTENT_TAG = PR_AGENT_BASE + 3
PR_SET_AGENT_BUDGET_LIMITS = PR_AGENT_BASE + 4
PR_GET_AGENT_COUNTERS = PR_AGENT_BASE + 5
PR_GET_AGENT_PARENT_ID = PR_AGENT_BASE + 6
PR_SET_AGENT_NS = PR_AGENT_BASE + 7

AGENT_NS_ID_BYTES = 16
AGENT_NS_INTENT_MAX = 63

DEFAULT_SESSION_PATH = "/proc/self/agent_session"
ASSAY_TIMEOUT_S = 10.0

# Test seams (names kept from the original).
ENV_SESSION_PATH = "AGENTNS_SESSION_PATH"
ENV_PRCTL_MOCK_ERRNO = "AGENTNS_PRCTL_MOCK_ERRNO"
ENV_ASSAY_MOCK_VERDICT = "AGENTNS_ASSAY_MOCK_VERDICT"

_HEX = frozenset("0123456789abcdef")


def session_path(env: Mapping[str, str]) -> str:
    """Where the session id is read back (``AGENTNS_SESSION_PATH`` overrides procfs)."""
    return env.get(ENV_SESSION_PATH) or DEFAULT_SESSION_PATH


def in_kernel_session(session_id: str, env: Mapping[str, str]) -> bool:
    """Whether this process is in the kernel agent session ``session_id`` (procfs says so)."""
    try:
        with open(session_path(env), encoding="ascii", errors="replace") as handle:
            return handle.read().strip() == session_id
    except OSError:
        return False


def _prctl(option: int, arg2: int = 0) -> int:
    """Call prctl(2); return 0 or the errno. Arguments 3 to 5 are always 0 here."""
    import ctypes  # only the kernel rungs need it; most launches never get here

    # use_errno=True makes ctypes save errno right after the call, before Python can clobber it.
    libc = ctypes.CDLL(None, use_errno=True)
    fn = libc.prctl
    # prctl is variadic; on Linux every argument is an unsigned long, so declare them so.
    fn.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
    fn.restype = ctypes.c_int
    if fn(option, arg2, 0, 0, 0) == -1:
        return ctypes.get_errno()
    return 0


def _mock_errno(value: str) -> int:
    name = value.strip()
    if name in ("", "0"):
        return 0
    if name in ("ENOSYS", "EINVAL", "EPERM"):
        return int(getattr(errno, name))
    return errno.EIO  # "anything else = I/O error", as the original's seam


def create_agent_ns(env: Mapping[str, str]) -> int:
    """``prctl(PR_SET_AGENT_NS, 0, 0, 0, 0)``; return 0 or the errno (seam: mock errno)."""
    mocked = env.get(ENV_PRCTL_MOCK_ERRNO)
    if mocked is not None:
        return _mock_errno(mocked)
    return _prctl(PR_SET_AGENT_NS)


def intent_bytes(intent: str) -> bytes | None:
    """The tag as the kernel stores it: UTF-8 cut to 63 bytes; ``None`` if it holds a NUL."""
    raw = intent.encode("utf-8", "surrogateescape")
    if b"\0" in raw:
        return None
    return raw[:AGENT_NS_INTENT_MAX]


def set_intent(intent: str, env: Mapping[str, str]) -> int:
    """``prctl(PR_SET_AGENT_INTENT_TAG, tag)``; return 0 or the errno. Best effort."""
    tag = intent_bytes(intent)
    if tag is None:
        return errno.EINVAL
    if env.get(ENV_PRCTL_MOCK_ERRNO) is not None:
        return 0  # the create call was simulated, so there is no namespace to tag
    import ctypes

    buf = ctypes.create_string_buffer(tag)  # NUL-terminated; kept alive for the call
    return _prctl(PR_SET_AGENT_INTENT_TAG, ctypes.addressof(buf))


def validate_session_id(raw: bytes, path: str) -> str:
    """Check a procfs read-back: 32 lowercase hex characters, not all zeros."""
    text = raw.strip()
    if len(text) != 2 * AGENT_NS_ID_BYTES:
        raise SessionIdError(f"agent_session: expected 32 hex chars, got {len(text)} in {path}")
    sid = text.decode("ascii", "replace")
    if not set(sid) <= _HEX:
        raise SessionIdError("agent_session: non-lowercase-hex character in id (expected 0-9, a-f)")
    if set(sid) == {"0"}:
        raise SessionIdError("agent_session: all-zero id — namespace was not initialised")
    return sid


def read_session_id(path: str) -> str:
    """Read and validate the id the kernel exposes for this process."""
    try:
        with open(path, "rb") as f:
            raw = f.read(4096)
    except OSError as exc:
        raise KernelError(f"agent_session: cannot read {path}: {exc.strerror}") from None
    return validate_session_id(raw, path)


def _boot_time_s() -> int:
    try:
        with open("/proc/stat", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("btime "):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError) as exc:
        raise KernelError(f"cannot read btime from /proc/stat: {exc}") from None
    raise KernelError("/proc/stat has no btime line")


def synthesize_session_id() -> str:
    """uid (8 hex) + boot time in seconds (8 hex) + CLOCK_MONOTONIC ns (16 hex)."""
    uid = os.getuid() & 0xFFFFFFFF
    btime = _boot_time_s() & 0xFFFFFFFF
    mono = time.clock_gettime_ns(time.CLOCK_MONOTONIC) & 0xFFFFFFFFFFFFFFFF
    return f"{uid:08x}{btime:08x}{mono:016x}"


def assay_verdict(env: Mapping[str, str]) -> str | None:
    """The ``verdict.type`` of ``assay agentns --json``, or ``None`` if it cannot be had.

    A non-zero exit is ignored (assay exits 1-5 for the non-Live verdicts) and the JSON is still
    read; a missing binary, a timeout, bad UTF-8 or a missing ``type`` all mean "not Live".
    """
    mocked = env.get(ENV_ASSAY_MOCK_VERDICT)
    if mocked is not None:
        return mocked.strip()
    # Imported here: only this rung needs them, and start-up time matters for a launcher.
    import json
    import subprocess

    try:
        proc = subprocess.run(
            ["assay", "agentns", "--json"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=ASSAY_TIMEOUT_S,
            check=False,
        )
        doc = json.loads(proc.stdout.decode("utf-8"))
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError, ValueError):
        return None
    verdict = doc.get("verdict") if isinstance(doc, dict) else None
    kind = verdict.get("type") if isinstance(verdict, dict) else None
    return kind if isinstance(kind, str) else None
