"""The words the revisions in ``versions/`` spell their tables in, frozen with them.

A revision is history: the tables it made must come out the same for every installation, on
SQLite and PostgreSQL alike, whenever it runs. So the revisions cannot borrow the live table
definitions of :mod:`agentc.store.schema` (they change with each revision), and this module,
which they share instead, never changes what a name here makes: a new kind of column gets a
new name, an old one is never edited.

The column functions make the coordinator's usual kinds of column, not null unless ``null``;
:func:`new_table` makes a table a revision adds, which its upgrade creates and its downgrade
drops (:func:`adding`, for a revision that does nothing else).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from alembic import op

Column = sa.Column[Any]


def ident(name: str, *, null: bool = False) -> Column:
    """A record's id, or a reference to one: 64 characters."""
    return sa.Column(name, sa.String(length=64), nullable=null)


def string(name: str, length: int, *, null: bool = False) -> Column:
    return sa.Column(name, sa.String(length=length), nullable=null)


def text(name: str, *, null: bool = False) -> Column:
    return sa.Column(name, sa.Text(), nullable=null)


def integer(name: str, *, null: bool = False) -> Column:
    return sa.Column(name, sa.Integer(), nullable=null)


def ms(name: str, *, null: bool = False) -> Column:
    """A time: integer milliseconds since the epoch."""
    return sa.Column(name, sa.BigInteger(), nullable=null)


def counter(name: str, default: int) -> Column:
    """A number, not null, that the existing rows get as ``default`` when the column is added."""
    return sa.Column(name, sa.Integer(), nullable=False, server_default=sa.text(str(default)))


def serial(name: str) -> Column:
    """An ascending key the database assigns: 64-bit on PostgreSQL; on SQLite the rowid."""
    return sa.Column(
        name,
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        autoincrement=True,
        nullable=False,
    )


def where(condition: str) -> dict[str, Any]:
    """The keywords that make an index partial, holding only the rows that meet the condition,
    on both databases."""
    return {"sqlite_where": sa.text(condition), "postgresql_where": sa.text(condition)}


def refers(column: str, table: str) -> sa.ForeignKeyConstraint:
    """The column holds the id of a row of ``table``."""
    return sa.ForeignKeyConstraint([column], [f"{table}.id"])


def new_table(name: str, *items: sa.schema.SchemaItem) -> sa.Table:
    """A table a revision adds, with its indexes: ``create`` it on ``op.get_bind()`` in the
    upgrade, ``drop`` it in the downgrade (or let :func:`adding` do both). It stands on a
    MetaData of its own, beside a stand-in for each existing table its foreign keys name (their
    DDL reads only the names)."""
    tables = sa.MetaData()
    table = sa.Table(name, tables, *items)
    for key in table.foreign_keys:
        target, column = key.target_fullname.split(".")
        if target not in tables.tables:
            sa.Table(target, tables, sa.Column(column, sa.String(length=64), primary_key=True))
    return table


def adding(table: sa.Table) -> tuple[Callable[[], None], Callable[[], None]]:
    """The upgrade and the downgrade of a revision that adds just the table: create it, with its
    indexes; drop it."""

    def upgrade() -> None:
        table.create(op.get_bind())

    def downgrade() -> None:
        table.drop(op.get_bind())

    return upgrade, downgrade
