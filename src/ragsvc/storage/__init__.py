"""The service's records: audit log, sessions, owner directory, custom templates, settings.

- backend.py    the `Backend` protocol every store uses; `WriteConflict`; `utc_now`
- database.py   `open_database(url_or_path)`: `postgresql://` selects PostgreSQL, anything else a SQLite path
- sqlite.py     the embedded default: one file, one connection, migrations by PRAGMA user_version
- postgres.py   shared by replicas: asyncpg pool, migrations under an advisory lock, one error boundary
- dialect.py    what differs between the two, in one place; schema.py: the migrations, written once
- answers.py    the audit log (rows committed before the answer goes out, group commit: group_commit.py)
- sessions.py, owners.py, templates.py, settings.py: the other stores; retention.py: the periodic purge
"""
