"""Plain SQL on the driver's cursor, with `:name` parameters and typed rows.

The hot paths (authentication, receipts, leases) run here because SQLAlchemy's statement
machinery costs several times what the database does. Every query names the row type it
returns (a `typing.NamedTuple`, built positionally from the driver's tuple, so the columns are
selected in the row type's field order: `columns(Row)` writes that list).

Writes whose outcome the caller does not look at (audit events, receipts, updates of a row the
transaction has locked) can be deferred (`defer`, `insert(..., deferred=True)`): on PostgreSQL
they wait on the connection and go to the server in one psycopg pipeline with the transaction's
next statement or with its COMMIT (`commit`), so they cost no round trip of their own. Order
is kept and a later query sees them (they are sent before it); a deferred statement's error is
raised by the statement or commit it was sent with. SQLite runs them at once (no round trip).
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any, NamedTuple, Protocol, TypeVar

from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

R = TypeVar("R")
Value = str | int | float | bool | None | list[str]
"""A parameter the driver binds (both sqlite3 and psycopg take the scalars as they are; a list
is a PostgreSQL array, for PostgreSQL-only statements)."""

_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_][A-Za-z0-9_]*)")


@lru_cache(maxsize=512)
def _for_psycopg(sql: str) -> str:
    """`:name` parameters (sqlite3's named style) as psycopg's `%(name)s`."""
    return _NAMED.sub(r"%(\1)s", sql.replace("%", "%%"))


Statement = tuple[str, Mapping[str, object]]
# Each Connection's deferred statements. Keyed by the Connection (one per transaction of the
# executor), not kept on the pooled DBAPI connection: none can outlive its transaction.
_DEFERRED: weakref.WeakKeyDictionary[Connection, list[Statement]] = weakref.WeakKeyDictionary()


def _execute(conn: Connection, sql: str, params: Mapping[str, object]) -> Any:
    """The DB-API cursor after running sql (DB-API cursors are untyped: Any), after the
    connection's deferred statements in the same round trip. A driver error is raised as
    SQLAlchemy's (`IntegrityError`, `OperationalError`, ...), as a Core statement would raise
    it, so callers catch one kind whichever way a statement ran. Its message never shows the
    parameters (they may be credentials' digests or any input), like the engine's."""
    dbapi = conn.connection.dbapi_connection
    assert dbapi is not None
    cursor = dbapi.cursor()
    postgres = conn.dialect.name == "postgresql"
    pending = _DEFERRED.get(conn) if postgres else None
    sent: list[Statement] = []
    try:
        if not postgres:
            cursor.execute(sql, params)
        elif not pending:
            cursor.execute(_for_psycopg(sql), params)
        else:
            sent = [*pending, (sql, params)]
            pending.clear()
            _pipeline(dbapi, sent[:-1], cursor, sql, params)
    except conn.dialect.loaded_dbapi.Error as exc:
        shown = ";\n".join(s for s, _ in sent) if sent else sql
        raise DBAPIError.instance(
            shown,
            {} if sent else dict(params),
            exc,
            conn.dialect.loaded_dbapi.Error,
            hide_parameters=True,
            dialect=conn.dialect,
        ) from exc
    return cursor


def _pipeline(
    dbapi: Any, statements: list[Statement], cursor: Any, sql: str, params: Mapping[str, object]
) -> None:
    """Send statements and then sql (on cursor) in one psycopg pipeline: one round trip."""
    with dbapi.pipeline():
        for each, values in statements:
            dbapi.cursor().execute(_for_psycopg(each), values)
        cursor.execute(_for_psycopg(sql), params)


def defer(conn: Connection, sql: str, **params: Value) -> None:
    """Run a statement without rows whose outcome the caller does not need now: on PostgreSQL
    with the transaction's next statement or its commit (see the module's docstring)."""
    _defer(conn, sql, params)


def _defer(conn: Connection, sql: str, params: Mapping[str, object]) -> None:
    if conn.dialect.name != "postgresql":
        _execute(conn, sql, params)
        return
    _DEFERRED.setdefault(conn, []).append((sql, params))


_BEGIN: Statement = ("BEGIN", {})


def begin(conn: Connection) -> None:
    """PostgreSQL: start the transaction with its first query, in the same round trip. The
    driver is put in autocommit mode, so it sends no BEGIN of its own, and BEGIN is deferred:
    until it is sent nothing has run. `end` must follow, whatever happens."""
    dbapi = conn.connection.dbapi_connection
    assert dbapi is not None
    try:
        dbapi.autocommit = True
    except conn.dialect.loaded_dbapi.Error:  # it broke while pooled: take a fresh one
        conn.invalidate()
        dbapi = conn.connection.dbapi_connection
        assert dbapi is not None
        dbapi.autocommit = True
    _DEFERRED[conn] = [_BEGIN]


def commit(conn: Connection) -> None:
    """PostgreSQL: send the deferred statements and COMMIT in one round trip (the connection's
    transaction then ends; SQLAlchemy's own commit that follows finds nothing to do)."""
    pending = _DEFERRED.get(conn)
    if pending == [_BEGIN]:  # nothing ran: nothing to commit
        pending.clear()
    elif pending:
        _execute(conn, "COMMIT", {})


def end(conn: Connection) -> None:
    """After the transaction (committed or rolled back): forget what is still deferred and put
    the driver back in its own transaction mode."""
    _DEFERRED.pop(conn, None)
    if conn.dialect.name != "postgresql" or conn.invalidated:  # (a broken one is replaced)
        return
    dbapi = conn.connection.dbapi_connection
    if dbapi is None or not dbapi.autocommit:
        return
    try:
        dbapi.autocommit = False
    except conn.dialect.loaded_dbapi.Error:  # still in a transaction: the connection broke
        conn.invalidate()


def fetch_all(conn: Connection, sql: str, make: Callable[..., R], **params: Value) -> list[R]:
    """Every row of sql, each built by make from the selected columns in order."""
    return [make(*row) for row in _execute(conn, sql, params).fetchall()]


def fetch_one(conn: Connection, sql: str, make: Callable[..., R], **params: Value) -> R | None:
    """The first row of sql built by make, or None."""
    row = _execute(conn, sql, params).fetchone()
    return None if row is None else make(*row)


def fetch_count(conn: Connection, sql: str, **params: Value) -> int:
    """The one number a ``SELECT COUNT(*) ...`` answers."""
    count: int = _execute(conn, sql, params).fetchone()[0]
    return count


def fetch_exists(conn: Connection, sql: str, **params: Value) -> bool:
    """Whether sql yields a row."""
    return _execute(conn, sql, params).fetchone() is not None


def run(conn: Connection, sql: str, **params: Value) -> int:
    """A statement without rows; the row count."""
    count: int = _execute(conn, sql, params).rowcount
    return count


class Row(Protocol):
    """A typed row: a `typing.NamedTuple` whose fields are its table's columns."""

    def _asdict(self) -> dict[str, Any]: ...


RowT = TypeVar("RowT", bound=Row)


def columns(row: type[Row], alias: str = "") -> str:
    """The select list for row's fields, in order (prefixed by `alias.` when given; a trailing
    `_` is dropped from a field named after a Python keyword, e.g. `class_`)."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + name for name in _column_names(row))


def _column_names(row: type[Row]) -> list[str]:
    # A NamedTuple's annotations are its fields, in order.
    return [name.rstrip("_") for name in row.__annotations__]


class _Table(NamedTuple):
    by_key: str  # SELECT every column WHERE the key column = :key
    insert: str  # INSERT every column
    name: str
    key: str | None


_TABLES: dict[type[Row], _Table] = {}


def table(name: str, key: str | None = "id") -> Callable[[type[RowT]], type[RowT]]:
    """Class decorator: the row type holds the rows of the table `name`, keyed by the column
    `key` (None: a composite key, the row is only inserted this way). `fetch_row`,
    `Tx.lock`, `insert` and `update` then find the table by the row type."""

    def register(row: type[RowT]) -> type[RowT]:
        names = _column_names(row)
        _TABLES[row] = _Table(
            f"SELECT {columns(row)} FROM {name} WHERE {key} = :key" if key else "",
            f"INSERT INTO {name} ({', '.join(names)}) "
            f"VALUES ({', '.join(':' + n for n in row.__annotations__)})",
            name,
            key,
        )
        return row

    return register


def by_key_sql(row: type[Row]) -> str:
    """The query that reads one row of row's table by its key (parameter `:key`)."""
    sql = _TABLES[row].by_key
    assert sql, f"{row.__name__} has no single-column key"
    return sql


def fetch_row(conn: Connection, row: type[RowT], key: str) -> RowT | None:
    """The row of row's table whose key is key, or None."""
    return fetch_one(conn, by_key_sql(row), row, key=key)


def fetch_in_project(conn: Connection, row: type[RowT], key: str, project_id: str) -> RowT | None:
    """The row of row's table whose key is key, if it belongs to the project, or None."""
    sql = by_key_sql(row) + " AND project_id = :project_id"
    return fetch_one(conn, sql, row, key=key, project_id=project_id)


def insert(conn: Connection, row: Row, *, deferred: bool = False) -> None:
    """Insert the row into its table (deferred: see `defer`)."""
    sql, params = _TABLES[type(row)].insert, row._asdict()
    if deferred:
        _defer(conn, sql, params)
    else:
        _execute(conn, sql, params)


@lru_cache(maxsize=128)
def _update_sql(table: str, key: str, names: tuple[str, ...]) -> str:
    sets = ", ".join(f"{n} = :{n}" for n in names)
    return f"UPDATE {table} SET {sets} WHERE {key} = :key_"


def update(conn: Connection, row: type[Row], key: str, changes: Mapping[str, object]) -> None:
    """Set the given columns of the row of row's table whose key is key. The column names come
    from the caller's typed change set (a TypedDict of the table's columns), never from input."""
    t = _TABLES[row]
    assert t.key is not None
    _execute(conn, _update_sql(t.name, t.key, tuple(changes)), {**changes, "key_": key})


def placeholders(prefix: str, values: Iterable[Value]) -> tuple[str, dict[str, Value]]:
    """`:p0, :p1, ...` for an IN list, with the parameters they bind."""
    params = {f"{prefix}{i}": v for i, v in enumerate(values)}
    return ", ".join(":" + name for name in params), params
