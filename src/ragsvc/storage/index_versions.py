"""The version of each tenant's index (R-003-13): a counter in the records database, raised by every ingest or
delete that changes the tenant's documents (ragsvc.ingest.indexer), and read by every answer, which reports the
version its evidence was searched in.

In the records database rather than the engine so that every replica sharing the database (PostgreSQL) reads the
same version, and it survives restarts. A tenant never written to since versions were kept is at version 0.
Reading costs one indexed lookup per answer (bench/audit_commit.py's SQLite figures: ~0.05 ms), made on the event
loop's thread when the database can without waiting (`ReadsNow`: SQLite, see storage/sqlite.py), which spares the
answer a worker thread's hand-over and wake-up (~0.25 ms).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from ragsvc.storage.backend import Backend, Row, utc_now

_CURRENT = "SELECT version FROM index_versions WHERE tenant_id = ?"


@runtime_checkable
class ReadsNow(Protocol):
    def fetch_all_now(self, sql: str, params: Sequence[Any] = ()) -> list[Row] | None:
        """`fetch_all` on the calling thread when it needs no waiting: None (nothing done) when it would."""
        ...


class IndexVersions:
    def __init__(self, database: Backend) -> None:
        self._db = database
        self._now = database if isinstance(database, ReadsNow) else None

    async def current(self, tenant_id: str) -> str:
        """The tenant's index version, as answers report it ("0" before its first change)."""
        rows = self._now.fetch_all_now(_CURRENT, (tenant_id,)) if self._now is not None else None
        if rows is None:
            rows = await self._db.fetch_all(_CURRENT, (tenant_id,))
        return str(rows[0]["version"]) if rows else "0"

    async def bump(self, tenant_id: str) -> None:
        """Record that the tenant's documents changed (atomic on both backends)."""
        await self._db.execute(
            "INSERT INTO index_versions (tenant_id, version, updated_at) VALUES (?, 1, ?) "
            "ON CONFLICT (tenant_id) DO UPDATE SET version = index_versions.version + 1, updated_at = excluded.updated_at",
            (tenant_id, utc_now()),
        )
