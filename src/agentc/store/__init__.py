"""The storage boundary: opening the database and migrating it (`engine`), transactions
(`tx`), the table definitions (`schema`), and the typed queries the service runs, one module
per family (`projects`, `tasks`, `leases`, `workflow`, `accounts`, `audit`) over the
driver-level SQL layer (`sql`). Rows are `typing.NamedTuple`s that name their table; nothing
above this package writes SQL.
"""
