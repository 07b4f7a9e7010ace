"""The audit trail, idempotency receipts and telemetry rows: rows and queries."""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy.engine import Connection

from agentc.core.rules import canonical_json
from agentc.store.sql import (
    columns,
    defer,
    fetch_all,
    fetch_exists,
    fetch_one,
    insert,
    placeholders,
    table,
)


class Event(NamedTuple):
    seq: int
    kind: str
    actor_id: str | None
    credential_class: str | None
    record_id: str | None
    data_json: str
    created_at: int


@table("receipts", key=None)
class Receipt(NamedTuple):
    principal_id: str
    operation: str
    key: str
    fingerprint: str
    status: int
    body: str | None  # None once compacted after the retention period
    created_at: int
    credential_id: str | None  # the agent credential that wrote it (None: a person, or older)
    authority_epoch: str  # the epoch it was made under (agentc.store.epoch)


@table("telemetry_rows", key=None)
class TelemetryRow(NamedTuple):
    project_id: str
    stream: str
    host: str
    identity: str
    row_json: str
    received_at: int
    principal_id: str
    attempt_id: str | None = None  # a cost row's attempt (the service checked it)


_EVENT = (
    "INSERT INTO events (project_id, actor_id, credential_class, kind, record_id, data_json, "
    "created_at) VALUES (:project_id, :actor_id, :credential_class, :kind, :record_id, "
    ":data_json, :created_at)"
)
_RECEIPT = (
    f"SELECT {columns(Receipt)} FROM receipts "
    "WHERE principal_id = :principal_id AND operation = :operation AND key = :key"
)
_EVENTS_AFTER = (
    f"SELECT {columns(Event)} FROM events WHERE project_id = :project_id "
    "AND seq > :after ORDER BY seq LIMIT :limit"
)
_TELEMETRY_SEEN = (
    "SELECT identity FROM telemetry_rows WHERE project_id = :project_id AND stream = :stream "
    "AND host = :host AND identity = :identity"
)


def write_event(
    conn: Connection,
    now: int,
    actor_id: str | None,
    credential_class: str | None,
    kind: str,
    project_id: str | None,
    record_id: str | None,
    data: dict[str, object],
) -> None:
    """Append one audit event (in the caller's transaction, sent with its next statement or
    its commit: `agentc.store.sql.defer`); data is any JSON object."""
    defer(
        conn,
        _EVENT,
        project_id=project_id,
        actor_id=actor_id,
        credential_class=credential_class,
        kind=kind,
        record_id=record_id,
        data_json=canonical_json(data),
        created_at=now,
    )


def events_after(conn: Connection, project_id: str, after_seq: int, limit: int) -> list[Event]:
    """The project's events after seq, in order, at most limit."""
    return fetch_all(
        conn, _EVENTS_AFTER, Event, project_id=project_id, after=after_seq, limit=limit
    )


def get_receipt(conn: Connection, principal_id: str, operation: str, key: str) -> Receipt | None:
    return fetch_one(
        conn, _RECEIPT, Receipt, principal_id=principal_id, operation=operation, key=key
    )


def add_telemetry(conn: Connection, row: TelemetryRow) -> bool:
    """Store the row unless the same row (by identity) came from the host before; returns
    whether it was new."""
    key = row._asdict()
    del key["row_json"], key["received_at"], key["principal_id"], key["attempt_id"]
    if fetch_exists(conn, _TELEMETRY_SEEN, **key):
        return False
    insert(conn, row)
    return True


_TELEMETRY_SINCE = (
    f"SELECT {columns(TelemetryRow)} FROM telemetry_rows WHERE project_id = :project_id "
    "AND stream = :stream AND received_at >= :since ORDER BY received_at DESC LIMIT :limit"
)
_HOSTS_LAST_SEEN = (
    "SELECT host, MAX(received_at) FROM telemetry_rows WHERE project_id = :project_id "
    "GROUP BY host ORDER BY host"
)
_RECENT_EVENTS = (
    f"SELECT {columns(Event)} FROM events WHERE project_id = :project_id "
    "AND kind IN ({kinds}) AND created_at >= :since ORDER BY seq DESC LIMIT :limit"
)


class HostSeen(NamedTuple):
    host: str
    last_seen: int


def telemetry_since(
    conn: Connection, project_id: str, stream: str, since: int, limit: int
) -> list[TelemetryRow]:
    """The project's rows of one stream received since the given time, newest first."""
    return fetch_all(
        conn,
        _TELEMETRY_SINCE,
        TelemetryRow,
        project_id=project_id,
        stream=stream,
        since=since,
        limit=limit,
    )


_COST_OF_ATTEMPT = (
    f"SELECT {columns(TelemetryRow)} FROM telemetry_rows WHERE attempt_id = :attempt_id "
    "AND project_id = :project_id AND stream = 'cost' ORDER BY received_at, identity LIMIT :limit"
)


def costs_of_attempt(
    conn: Connection, project_id: str, attempt_id: str, limit: int
) -> list[TelemetryRow]:
    """The cost rows that name the attempt, oldest first (the cost ledger of one attempt)."""
    return fetch_all(
        conn,
        _COST_OF_ATTEMPT,
        TelemetryRow,
        project_id=project_id,
        attempt_id=attempt_id,
        limit=limit,
    )


def hosts_last_seen(conn: Connection, project_id: str) -> list[HostSeen]:
    """Every host that reported telemetry for the project, with when it last did."""
    return fetch_all(conn, _HOSTS_LAST_SEEN, HostSeen, project_id=project_id)


def recent_events(
    conn: Connection, project_id: str, kinds: list[str], since: int, limit: int
) -> list[Event]:
    """The project's events of the given kinds since the given time, newest first."""
    marks, params = placeholders("k", kinds)
    sql = _RECENT_EVENTS.format(kinds=marks)
    return fetch_all(conn, sql, Event, project_id=project_id, since=since, limit=limit, **params)
