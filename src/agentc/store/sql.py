"""Plain SQL on the driver's cursor, with `:name` parameters and typed rows.

The hot paths (authentication, receipts, leases) run here because SQLAlchemy's statement
machinery costs several times what the database does. Every query names the row type it
returns (a `typing.NamedTuple`, built positionally from the driver's tuple, so the columns are
selected in the row type's field order: `columns(Row)` writes that list).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any, NamedTuple, TypeVar

from sqlalchemy.engine import Connection

R = TypeVar("R")
Value = str | int | float | bool | None
"""A parameter the driver binds (both sqlite3 and psycopg take these as they are)."""

_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_][A-Za-z0-9_]*)")


@lru_cache(maxsize=512)
def _for_psycopg(sql: str) -> str:
    """`:name` parameters (sqlite3's named style) as psycopg's `%(name)s`."""
    return _NAMED.sub(r"%(\1)s", sql.replace("%", "%%"))


def _execute(conn: Connection, sql: str, params: Mapping[str, object]) -> Any:
    """The DB-API cursor after running sql (DB-API cursors are untyped: Any)."""
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    cursor.execute(_for_psycopg(sql) if conn.dialect.name == "postgresql" else sql, params)
    return cursor


def fetch_all(conn: Connection, sql: str, make: Callable[..., R], **params: Value) -> list[R]:
    """Every row of sql, each built by make from the selected columns in order."""
    return [make(*row) for row in _execute(conn, sql, params).fetchall()]


def fetch_one(conn: Connection, sql: str, make: Callable[..., R], **params: Value) -> R | None:
    """The first row of sql built by make, or None."""
    row = _execute(conn, sql, params).fetchone()
    return None if row is None else make(*row)


def fetch_exists(conn: Connection, sql: str, **params: Value) -> bool:
    """Whether sql yields a row."""
    return _execute(conn, sql, params).fetchone() is not None


def fetch_values(conn: Connection, sql: str, **params: Value) -> list[Any]:
    """The first column of every row (the column's driver type: the caller's annotation)."""
    return [row[0] for row in _execute(conn, sql, params).fetchall()]


def run(conn: Connection, sql: str, **params: Value) -> int:
    """A statement without rows; the row count."""
    count: int = _execute(conn, sql, params).rowcount
    return count


def columns(row: type[NamedTuple], alias: str = "") -> str:
    """The select list for row's fields, in order (prefixed by `alias.` when given; a trailing
    `_` is dropped from a field named after a Python keyword, e.g. `class_`)."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + name.rstrip("_") for name in row._fields)


@lru_cache(maxsize=64)
def _insert_sql(table: str, names: tuple[str, ...]) -> str:
    return (
        f"INSERT INTO {table} ({', '.join(n.rstrip('_') for n in names)}) "
        f"VALUES ({', '.join(':' + n for n in names)})"
    )


def insert(conn: Connection, table: str, row: NamedTuple) -> None:
    """Insert one row whose fields are the table's columns (a trailing `_` is dropped from a
    field name that is a Python keyword, e.g. `class_`)."""
    values: dict[str, Value] = row._asdict()
    run(conn, _insert_sql(table, tuple(values)), **values)


def insert_many(conn: Connection, table: str, rows: Iterable[NamedTuple]) -> None:
    for row in rows:
        insert(conn, table, row)


@lru_cache(maxsize=128)
def _update_sql(table: str, key: str, names: tuple[str, ...]) -> str:
    sets = ", ".join(f"{n} = :{n}" for n in names)
    return f"UPDATE {table} SET {sets} WHERE {key} = :key_"


def update(
    conn: Connection, table: str, key: str, key_value: str, changes: Mapping[str, object]
) -> int:
    """Set the given columns of the row whose column `key` is key_value. The column names come
    from the caller's typed change set (a TypedDict of the table's columns), never from input."""
    sql = _update_sql(table, key, tuple(changes))
    count: int = _execute(conn, sql, {**changes, "key_": key_value}).rowcount
    return count


def placeholders(prefix: str, values: Iterable[Value]) -> tuple[str, dict[str, Value]]:
    """`:p0, :p1, ...` for an IN list, with the parameters they bind."""
    params = {f"{prefix}{i}": v for i, v in enumerate(values)}
    return ", ".join(":" + name for name in params), params
