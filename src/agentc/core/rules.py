"""Validation rules of the work model that need no database. Pure functions."""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, TypeGuard

from agentc.core.errors import ConfigError, CoordinatorError
from agentc.core.model import (
    COUNTER_MAX,
    FINDING_PATH_MAX,
    ID_MAX,
    ActivityKind,
    ReviewMode,
    TaskKind,
)

_VISIBLE_ASCII = re.compile(r"^[\x21-\x7e]+$")
ID_PATTERN = rf"^[\x21-\x7e]{{1,{ID_MAX}}}$"
"""A record id: 1-128 visible ASCII characters (the ids the service makes are UUIDs; an agent
session's id is the agent's choice within these)."""
_ID = re.compile(ID_PATTERN)
NAME_PATTERN = r"^[A-Za-z0-9_.@-]{1,100}$"
"""A person's or an agent's name (and a credential's): ASCII letters, digits, ``_.@-``."""
NAME_RULE = "1-100 ASCII letters, digits, '_', '.', '@' or '-'"
_NAME = re.compile(NAME_PATTERN)
SAFE_ID_RULE = (
    "1-128 of A-Z a-z 0-9 _ . -, starting with a letter or digit, no '..', not ending in '.' "
    "or '.lock'"
)
"""An id a program puts in a URL path or a git ref (task, attempt, launch, activity, project):
one path segment and one ref component git accepts. The ids the service makes are UUIDs."""
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_ASCII_FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_TASK_CURSOR = re.compile(r"(0|[1-9][0-9]{0,18}):(.+)", re.DOTALL)
_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")


def invalid(field: str, message: str) -> CoordinatorError:
    return CoordinatorError(
        "invalid_input", f"{field}: {message}", status=422, details={"field": field}
    )


def check_idempotency_key(key: str | None) -> str:
    if key is None:
        raise CoordinatorError(
            "idempotency_key_required",
            "every mutation needs an Idempotency-Key header (1-128 visible ASCII characters)",
            status=400,
        )
    if not 1 <= len(key) <= 128 or not _VISIBLE_ASCII.fullmatch(key):
        raise CoordinatorError(
            "invalid_request",
            "Idempotency-Key must be 1-128 visible ASCII characters",
            status=400,
            details={"field": "Idempotency-Key"},
        )
    return key


def bad_request(field: str, problem: str) -> CoordinatorError:
    """400: the request line (a path id, a query parameter) or a header is malformed."""
    return CoordinatorError(
        "invalid_request", f"{field}: {problem}", status=400, details={"field": field}
    )


def is_name(value: str) -> bool:
    """Whether ``value`` is a valid person or agent name (:data:`NAME_PATTERN`)."""
    return _NAME.fullmatch(value) is not None


def fold_name(name: str) -> str:
    """A person's or an agent's name as names are compared: without regard to (ASCII) case, so
    ``ADMIN2`` is ``admin2``. Only ASCII letters fold, as SQLite's ``lower()`` does, so the
    key is the same whichever database computes it."""
    return name.translate(_ASCII_FOLD)


def whole_number(text: str) -> int | None:
    """The integer ``text`` spells in ASCII digits (an optional leading ``-``), else None; never
    raises (``"²".isdigit()`` is true but ``int`` refuses it, and ``int`` refuses more than
    4,300 digits)."""
    body = text.strip()
    digits = body[1:] if body.startswith("-") else body
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 40:
        return None
    return int(body)


def is_safe_id(value: object) -> TypeGuard[str]:
    """Whether ``value`` is an id safe in a URL path and a git ref (:data:`SAFE_ID_RULE`)."""
    return (
        isinstance(value, str)
        and _SAFE_ID.fullmatch(value) is not None
        and ".." not in value
        and not value.endswith((".", ".lock"))
    )


def check_id(what: str, value: str) -> str:
    """``value`` when it is a safe id (:func:`is_safe_id`), else :class:`ConfigError` naming
    ``what``: the one check the programs make before an id goes into a URL or a ref."""
    if not is_safe_id(value):
        raise ConfigError(f"{what} {value!r} is not a safe id ({SAFE_ID_RULE})")
    return value


def is_id(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and _ID.fullmatch(value) is not None


def check_path_id(field: str, value: str) -> str:
    """A record id from the request line, or 400 naming the field."""
    if not is_id(value):
        raise bad_request(field, f"not an id (1-{ID_MAX} visible ASCII characters)")
    return value


def task_cursor(created_at: int, task_id: str) -> str:
    """The cursor of a task page: where the next page starts (after this task)."""
    return f"{created_at}:{task_id}"


def parse_task_cursor(text: str) -> tuple[int, str]:
    """The (created_at, task id) a `task_cursor` holds, or 400 naming `cursor`."""
    found = _TASK_CURSOR.fullmatch(text)
    if found is None or int(found[1]) > COUNTER_MAX or not is_id(found[2]):
        raise bad_request("cursor", "not a cursor this service issued")
    return int(found[1]), found[2]


# Built once: json.dumps with options builds a new encoder on every call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """``value`` as JSON with sorted keys and no spaces: one text for one value."""
    return _CANONICAL.encode(value)


def sha256_hex(text: str | bytes) -> str:
    data = text.encode() if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def fingerprint(operation: str, body: Any, session_id: str | None, proof: str | None) -> str:
    """What a replay must match: the input, the session and the proof (as a digest)."""
    proof_digest = sha256_hex(proof) if proof else ""
    return sha256_hex(canonical_json([operation, body, session_id or "", proof_digest]))


def find_cycle(edges: Mapping[str, Iterable[str]], start: str) -> list[str] | None:
    """A path from `start` back to itself through `edges` (task -> prerequisites), if any."""
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for nxt in edges.get(node, ()):
            if nxt == start:
                return [*path, start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None


def check_evidence(criteria: list[str], evidence: list[tuple[str, str]]) -> None:
    """Each current criterion named exactly once, by exact text, and nothing else."""
    named = [c for c, _ in evidence]
    missing = [c for c in criteria if c not in named]
    unknown = [c for c in named if c not in criteria]
    dupes = sorted({c for c in named if named.count(c) > 1})
    if missing or unknown or dupes:
        raise CoordinatorError(
            "evidence_mismatch",
            "acceptance_evidence must name each acceptance criterion exactly once, by its "
            "exact text",
            status=422,
            details={"missing": missing, "unknown": unknown, "duplicated": dupes},
        )


def finding_place_problem(path: object, line: object, end_line: object) -> str | None:
    """What is wrong with a finding's place (its file ``path`` and lines ``line`` to
    ``end_line``, each optional), or None: the one rule of the wire's ``Finding`` and the
    supervisor's reviewer verdict."""
    if path is not None and (
        not isinstance(path, str) or not 1 <= len(path) <= FINDING_PATH_MAX or "\x00" in path
    ):
        return f"a finding's path must be 1-{FINDING_PATH_MAX} characters, none of them NUL"
    for name, value in (("line", line), ("end_line", end_line)):
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= COUNTER_MAX
        ):
            return f"a finding's {name} must be a whole number from 1 to {COUNTER_MAX}"
    if line is not None and path is None:
        return "a finding's line needs its path"
    if end_line is not None and not (
        isinstance(line, int) and isinstance(end_line, int) and line <= end_line
    ):
        return "a finding's end_line needs a line at or before it"
    return None


def check_revision_sha(field: str, value: str | None) -> str:
    if value is None or not _SHA.match(value):
        raise invalid(field, "must be a full 40- or 64-character lowercase hex revision")
    return value


def check_candidate_ref(ref: str | None, prefix: str) -> str:
    if ref is None or not ref.startswith(prefix) or len(ref) <= len(prefix):
        raise invalid("candidate_ref", f"must be a ref under {prefix}")
    if ".." in ref or ref.endswith("/") or any(c in ref for c in " ~^:?*[\\"):
        raise invalid("candidate_ref", "is not a valid git ref name")
    return ref


def review_activities(mode: ReviewMode, kind: TaskKind) -> list[ActivityKind]:
    """The activities a submission opens under a project's review mode."""
    reviews = {
        ReviewMode.NONE: [],
        ReviewMode.AGENT: [ActivityKind.AGENT_REVIEW],
        ReviewMode.HUMAN: [ActivityKind.HUMAN_REVIEW],
        ReviewMode.BOTH: [ActivityKind.AGENT_REVIEW, ActivityKind.HUMAN_REVIEW],
        ReviewMode.EITHER: [ActivityKind.EITHER_REVIEW],
    }[mode]
    return [*reviews, ActivityKind.INTEGRATION] if kind == TaskKind.CODE else list(reviews)


def may_review(kind: str, actor_is_human: bool) -> bool:
    """Agents take agent and either reviews; humans take human and either reviews."""
    if kind == ActivityKind.EITHER_REVIEW:
        return True
    return kind == (ActivityKind.HUMAN_REVIEW if actor_is_human else ActivityKind.AGENT_REVIEW)


def iso_week_start_ms(now_ms: int) -> int:
    """Monday 00:00 UTC of the ISO week containing now."""
    now = datetime.fromtimestamp(now_ms / 1000, tz=UTC)
    monday = (now - timedelta(days=now.weekday())).replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    return int(monday.timestamp() * 1000)


def rfc3339(ms: int | None) -> str | None:
    """A service time (ms since the epoch) as RFC 3339 UTC with milliseconds."""
    if ms is None:
        return None
    second, milli = divmod(ms, 1000)
    return f"{_rfc3339_second(second)}{milli:03d}Z"


def ms_of(text: object) -> int | None:
    """An RFC 3339 time (as :func:`rfc3339` writes it, or with an offset) in ms since the
    epoch; None for anything else (a time without an offset is not taken)."""
    if not isinstance(text, str):
        return None
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        return None
    if at.tzinfo is None:
        return None
    return int(at.timestamp() * 1000)


@functools.lru_cache(maxsize=1024)
def _rfc3339_second(second: int) -> str:
    # Every view formats several times from the last few seconds: formatting each second
    # once makes this 6 times faster (it was ~5 % of a lease operation's CPU on SQLite).
    at = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=second)  # exact, any year
    return at.isoformat(timespec="seconds").removesuffix("+00:00") + "."
