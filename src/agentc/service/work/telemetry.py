"""Cost rows and canary results reported by supervised hosts.

Each row is identified by the SHA-256 of its canonical JSON and stored once per project and
host however often it arrives, so a host may resend everything it is unsure of. A cost row
that names an attempt must carry that attempt's generation (its fencing token): a row claiming
a generation the attempt never had is rejected. Only the attempt's own agent may report what it
cost (`may_report`): its session while the attempt is active, or, in any state (a launch
reports after it ended, and a launch that submitted still cost money), a supervised-class
credential of the attempt's principal: the supervisor loop's. Any other caller's row naming the
attempt is rejected. Every number in a row has a range (the token
counts, calls and dollars of a cost row their own, any other number +-2**53; docs/api.md): a
row outside one is rejected with the field named, and the rest of the batch is kept.
"""

from __future__ import annotations

from typing import TypeGuard

from agentc.core.model import (
    CALLS_MAX,
    ID_MAX,
    ROW_NUMBER_MAX,
    TOKENS_MAX,
    USD_MAX,
    Access,
    AttemptState,
    CredentialClass,
    TelemetryStream,
)
from agentc.core.rules import canonical_json, is_id, sha256_hex
from agentc.service.auth import Actor, denied
from agentc.service.ops import JsonObject, Op, Result
from agentc.service.schemas import TelemetryIn
from agentc.service.work.views import project_row
from agentc.store import audit
from agentc.store.audit import TelemetryRow
from agentc.store.leases import Attempt
from agentc.store.sql import fetch_row

_COST_COUNTS = {
    "input_tokens": TOKENS_MAX,
    "output_tokens": TOKENS_MAX,
    "cache_read_tokens": TOKENS_MAX,
    "cache_write_tokens": TOKENS_MAX,
    "calls": CALLS_MAX,
}


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number_problem(row: dict[str, object]) -> str | None:
    """Any number in a row (at any depth) is at most 2**53 in magnitude (the request body
    parser has already refused NaN and the infinities)."""
    stack: list[tuple[str, object]] = list(row.items())
    while stack:
        name, value = stack.pop()
        if _is_number(value) and abs(value) > ROW_NUMBER_MAX:
            return f"{name}: must be between -2**53 and 2**53"
        if isinstance(value, dict):
            stack.extend((f"{name}.{k}", v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((f"{name}.{i}", v) for i, v in enumerate(value))
    return None


def _cost_problem(op: Op, project_id: str, row: dict[str, object]) -> str | None:
    session_id = row.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        return "session_id: required (the launch's session)"
    for name, most in _COST_COUNTS.items():
        value = row.get(name, 0)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= most:
            return f"{name}: must be an integer from 0 to {most}"
    usd = row.get("usd")
    if usd is not None and (not _is_number(usd) or not 0 <= usd <= USD_MAX):
        return f"usd: must be a number from 0 to {USD_MAX}"
    problem = _number_problem(row)
    if problem:
        return problem
    attempt_id = row.get("attempt_id")
    if attempt_id is not None:
        if not is_id(attempt_id):
            return f"attempt_id: not an id (1-{ID_MAX} visible ASCII characters)"
        att = fetch_row(op.conn, Attempt, attempt_id)
        if att is None or att.project_id != project_id:
            return "attempt_id: no such attempt in this project"
        if row.get("generation") != att.generation:
            return "generation: does not match the attempt's generation"
        if not may_report(op.actor, att):
            return (
                "attempt_id: only the attempt's own session while it is active, or a "
                "supervised credential of its agent, may report its cost"
            )
    return None


def may_report(actor: Actor, att: Attempt) -> bool:
    """Whether the caller may report a cost row for the attempt (see the module's doc)."""
    if actor.principal_id != att.owner_id:
        return False
    if actor.credential_class == CredentialClass.SUPERVISED:
        return True
    return actor.session_id == att.session_id and att.state == AttemptState.ACTIVE


def _canary_problem(row: dict[str, object]) -> str | None:
    for name in ("harness", "outcome"):
        value = row.get(name)
        if not isinstance(value, str) or not value:
            return f"{name}: required"
    return _number_problem(row)


def record(op: Op, project_id: str, stream: TelemetryStream, body: TelemetryIn) -> Result:
    project_row(op.conn, project_id)
    actor = op.actor
    if actor.is_human or actor.access != Access.WRITE:
        raise denied("telemetry comes from a host's agent credential with write access")
    if stream == TelemetryStream.CANARY and actor.name not in op.runtime.settings.canary_principals:
        raise denied("canary results come only from the configured canary agents")
    accepted = duplicates = 0
    rejected: list[JsonObject] = []
    for index, row in enumerate(body.rows):
        if stream == TelemetryStream.COST:
            problem = _cost_problem(op, project_id, row)
        else:
            problem = _canary_problem(row)
        if problem:
            rejected.append({"index": index, "problem": problem})
            continue
        text = canonical_json(row)
        where = (project_id, stream.value, body.host, sha256_hex(text))
        named = row.get("attempt_id")  # a cost row's, checked above
        attempt = named if isinstance(named, str) and stream == TelemetryStream.COST else None
        kept = TelemetryRow(*where, text, op.now, actor.principal_id, attempt)
        if audit.add_telemetry(op.conn, kept):
            accepted += 1
        else:
            duplicates += 1
    if accepted:
        op.event(f"telemetry.{stream}_rows", project_id, None, host=body.host, accepted=accepted)
    return Result({"accepted": accepted, "duplicates": duplicates, "rejected": rejected})
