"""The shared records backend: PostgreSQL through asyncpg and its connection pool.

- Open: the pool connects `min_size` connections (DatabaseUnavailable when the server cannot be reached), then
  the migrations of ragsvc.storage.schema run under a session-level advisory lock, so replicas starting together
  apply each migration once: the first takes the lock and migrates, the others wait and find nothing to do.
  Applied versions are rows of `schema_migrations`.
- Failures: every asyncpg, socket and timeout error leaves `_run`, the one boundary, as DatabaseUnavailable
  (`raise ... from exc`); a unique-key, serialization or deadlock failure as its subclass WriteConflict.
- Recovery: the pool drops a connection that broke (asyncpg notices a server shutdown on idle connections too)
  and connects a new one at the next acquire, so once the server is back the next call works, no restart.
- Timeouts: against a hung server (or a partition) a call fails after `command_timeout_s` (a statement) or
  `connect_timeout_s` (a new connection), and `check_health` after about `health_timeout_s` + 1 s (asyncpg then
  waits for the cancelled query): keep that under the health monitor's probe timeout (5 s).
- Statements are prepared and cached per connection by asyncpg (a transaction-pooling PgBouncer in front
  needs `statement_cache_size=0`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

import asyncpg

from ragsvc.errors import DatabaseUnavailable
from ragsvc.storage.backend import Row, WriteConflict
from ragsvc.storage.dialect import (
    POSTGRESQL_TYPES,
    numbered_placeholders,
    postgres_params,
    postgres_rowcount,
    render,
)
from ragsvc.storage.schema import MIGRATIONS

T = TypeVar("T")
# pg_advisory_lock key held while migrating (any constant shared by every replica: "ragsvc" in ASCII).
MIGRATION_LOCK = 0x726167737663
_CONFLICTS = (
    asyncpg.UniqueViolationError,
    asyncpg.SerializationError,
    asyncpg.DeadlockDetectedError,
)
# Everything the driver raises: server errors, client-side errors, sockets, timeouts.
_DRIVER_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, OSError)
_log = logging.getLogger(__name__)


class PostgresDatabase:
    """The `Backend` on a PostgreSQL server (asyncpg pool)."""

    dialect = "postgresql"

    def __init__(self, pool: asyncpg.Pool, *, acquire_timeout_s: float, health_timeout_s: float) -> None:
        self._pool = pool
        self._acquire_timeout_s = acquire_timeout_s
        self._health_timeout_s = health_timeout_s

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout_s: float = 5.0,
        command_timeout_s: float = 30.0,
        health_timeout_s: float = 2.0,
    ) -> PostgresDatabase:
        """Connect a pool to `url` (postgresql://user:password@host:port/db) and migrate the schema."""
        try:
            pool = await asyncpg.create_pool(
                url,
                min_size=min_size,
                max_size=max_size,
                timeout=connect_timeout_s,
                command_timeout=command_timeout_s,
            )
        except _DRIVER_ERRORS as exc:
            raise DatabaseUnavailable(f"cannot connect to PostgreSQL: {exc}") from exc
        database = cls(pool, acquire_timeout_s=connect_timeout_s, health_timeout_s=health_timeout_s)
        try:
            await database._run(_migrate)
        except BaseException:
            pool.terminate()
            raise
        return database

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        query, values = numbered_placeholders(sql), postgres_params(params)

        async def run(connection: asyncpg.Connection) -> int:
            return postgres_rowcount(await connection.execute(query, *values))

        return await self._run(run)

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        query, values = numbered_placeholders(sql), [postgres_params(row) for row in rows]

        async def run(connection: asyncpg.Connection) -> None:
            # Atomic without BEGIN/COMMIT: asyncpg sends every row then one Sync, and PostgreSQL runs everything
            # before a Sync in one implicit transaction; one round trip instead of three.
            await connection.executemany(query, values)

        await self._run(run)

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        query, values = numbered_placeholders(sql), postgres_params(params)

        async def run(connection: asyncpg.Connection) -> list[Row]:
            return [dict(record) for record in await connection.fetch(query, *values)]

        return await self._run(run)

    async def schema_version(self) -> int:
        async def run(connection: asyncpg.Connection) -> int:
            return int(await connection.fetchval("SELECT COALESCE(MAX(version), 0) FROM schema_migrations"))

        return await self._run(run)

    async def check_health(self) -> None:
        """`SELECT 1`, waiting at most `health_timeout_s` for a connection and as long for the answer. (Not one
        timeout around it all: cancelling asyncpg while it releases a connection leaves a task failing unseen.)"""

        async def run(connection: asyncpg.Connection) -> None:
            await connection.fetchval("SELECT 1", timeout=self._health_timeout_s)

        await self._run(run, acquire_timeout_s=self._health_timeout_s)

    async def aclose(self, timeout_s: float = 5.0) -> None:
        """Close the pool once its connections are released; after `timeout_s`, close them regardless."""
        try:
            await asyncio.wait_for(self._pool.close(), timeout_s)
        except (*_DRIVER_ERRORS, TimeoutError) as exc:  # stuck, or the server went away: nothing to wait for
            _log.warning("closing the PostgreSQL pool: %s", exc or type(exc).__name__)
            self._pool.terminate()

    async def _run(self, work: Callable[[asyncpg.Connection], Awaitable[T]], *, acquire_timeout_s: float | None = None) -> T:
        """The one boundary: a pooled connection for `work`, and every driver error as DatabaseUnavailable."""
        try:
            async with self._pool.acquire(timeout=acquire_timeout_s or self._acquire_timeout_s) as connection:
                return await work(connection)
        except _CONFLICTS as exc:
            raise WriteConflict(f"database write conflict: {exc}") from exc
        except _DRIVER_ERRORS as exc:
            raise DatabaseUnavailable(f"PostgreSQL error: {type(exc).__name__}: {exc}") from exc


async def _migrate(connection: asyncpg.Connection) -> None:
    """Apply the migrations not applied yet, each in its own transaction, holding the migration lock."""
    await connection.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK)
    try:
        await connection.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        version = int(await connection.fetchval("SELECT COALESCE(MAX(version), 0) FROM schema_migrations"))
        if version > len(MIGRATIONS):
            _log.warning("the database schema (version %d) is newer than this release knows (%d)", version,
                         len(MIGRATIONS))  # fmt: skip
        for number, migration in enumerate(MIGRATIONS[version:], start=version + 1):
            async with connection.transaction():
                await connection.execute(render(migration, POSTGRESQL_TYPES))
                await connection.execute("INSERT INTO schema_migrations (version) VALUES ($1)", number)
            _log.info("applied migration %d", number)
    finally:
        await connection.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK)
