"""The schema's Alembic migrations, run only by :func:`agentc.store.engine.migrate`.

Each revision in ``versions/`` is frozen once released: it spells out its own DDL (in the frozen
words of :mod:`agentc.store.migrations.ddl`) instead of importing :mod:`agentc.store.schema`, so
a later change to the live tables cannot rewrite history.
``tests/store/test_migrations.py`` checks that the chain builds exactly the live schema.
"""

HEAD = "0013"
"""The newest revision. A database stamped with it needs no migration, which
:func:`agentc.store.engine.migrate` sees without importing Alembic (a fifth of a command's start);
``tests/store/test_migrations.py`` checks that it is the chain's head."""
