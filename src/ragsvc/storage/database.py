"""Opening the records database: `open_database` picks the backend from where the records live.

`postgresql://` (or `postgres://`) URLs open the shared PostgreSQL backend; anything else is a SQLite path
(":memory:" for a private in-memory one). Both implement ragsvc.storage.backend.Backend.
"""

from __future__ import annotations

from pathlib import Path

from ragsvc.config import POSTGRES_SCHEMES
from ragsvc.storage.backend import Backend
from ragsvc.storage.sqlite import SQLiteDatabase


def is_postgres_url(target: str | Path) -> bool:
    return isinstance(target, str) and target.startswith(POSTGRES_SCHEMES)


async def open_database(
    target: str | Path,
    *,
    pool_min_size: int = 1,
    pool_max_size: int = 10,
    connect_timeout_s: float = 5.0,
    command_timeout_s: float = 30.0,
) -> Backend:
    """The records database at `target`, open and migrated; the pool options apply to PostgreSQL only.
    DatabaseUnavailable when it cannot be opened."""
    if is_postgres_url(target):
        from ragsvc.storage.postgres import PostgresDatabase  # asyncpg is imported only when PostgreSQL is used

        return await PostgresDatabase.open(
            str(target),
            min_size=pool_min_size,
            max_size=pool_max_size,
            connect_timeout_s=connect_timeout_s,
            command_timeout_s=command_timeout_s,
        )
    return SQLiteDatabase.open(target)
