"""The records backend: the one interface every store (audit log, sessions, owners, templates, settings) uses.

Two implementations: `SQLiteDatabase` (ragsvc.storage.sqlite, one file, the embedded default) and
`PostgresDatabase` (ragsvc.storage.postgres, shared by replicas). `open_database` (ragsvc.storage.database)
picks one from a URL or path.

The stores write SQL in the subset both dialects read alike: `?` placeholders, `INSERT ... ON CONFLICT (...)
DO UPDATE SET x = excluded.x` / `DO NOTHING`, no dialect functions. Parameters are Python values (str, int,
float, None, and aware `datetime` for timestamps); rows come back as dicts with timestamps as aware UTC
`datetime`. What differs between the dialects is translated in ragsvc.storage.dialect, nowhere else.

Every failure of the database or its driver surfaces as `DatabaseUnavailable` (a conflicting concurrent write
as its subclass `WriteConflict`), raised at one boundary in each implementation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from ragsvc.errors import DatabaseUnavailable

Row = dict[str, Any]


class WriteConflict(DatabaseUnavailable):
    """A write lost a race with a concurrent one (a unique key taken meanwhile, a serialization failure): the
    transaction was rolled back and may be retried as it is."""


class Backend(Protocol):
    """A records database. Statements run one at a time per call; `execute_many` is one transaction."""

    dialect: str  # "sqlite" or "postgresql"

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; returns the number of rows it changed."""
        ...

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement per row, all in one transaction."""
        ...

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """The rows of one query, as dicts by column name."""
        ...

    async def schema_version(self) -> int:
        """The number of migrations applied."""
        ...

    async def check_health(self) -> None:
        """Return when the database answers; DatabaseUnavailable when it does not."""
        ...

    async def aclose(self) -> None:
        """Release the connection(s); the backend is unusable afterwards."""
        ...


def utc_now() -> datetime:
    """Now in UTC, to the millisecond: what both backends store exactly, so a timestamp reads back as written."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)
