"""The embedded records backend: one SQLite file, one connection, migrations by PRAGMA user_version at open.

SQLite calls block, so they run in a worker thread, one at a time; the database is small and written once per
request, which a single serialised connection in WAL mode serves comfortably.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ragsvc.errors import DatabaseUnavailable
from ragsvc.storage.backend import Row, WriteConflict
from ragsvc.storage.dialect import SQLITE_TYPES, render, sqlite_params, sqlite_row
from ragsvc.storage.schema import MIGRATIONS

T = TypeVar("T")
# A key taken meanwhile (by another process on the same file): the write may be retried.
_TAKEN_KEY = frozenset({"SQLITE_CONSTRAINT_PRIMARYKEY", "SQLITE_CONSTRAINT_UNIQUE"})


class SQLiteDatabase:
    """The `Backend` on one SQLite file (":memory:" for a private one)."""

    dialect = "sqlite"

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: Path | str) -> SQLiteDatabase:
        """Open (creating it if needed) and migrate the database at `path`; ":memory:" for a private one."""
        try:
            if str(path) != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            connection.row_factory = sqlite3.Row
            connection.execute("PRAGMA journal_mode=WAL")
            # In WAL mode NORMAL syncs at checkpoints, not at every commit: a commit survives a crash of the
            # process, and the database is never corrupted, but a power loss may undo the last few commits.
            # FULL cost each audited answer an fsync (~0.2 ms here) on its way to the caller.
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute("PRAGMA busy_timeout=5000")
            _migrate(connection)
        except (sqlite3.Error, OSError) as exc:
            raise DatabaseUnavailable(f"cannot open the database at {path}: {exc}") from exc
        return cls(connection)

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return await self._run(lambda c: c.execute(sql, sqlite_params(params)).rowcount)

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        def run(connection: sqlite3.Connection) -> None:
            with connection:
                connection.execute("BEGIN")
                connection.executemany(sql, (sqlite_params(row) for row in rows))

        await self._run(run)

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return await self._run(lambda c: [sqlite_row(row) for row in c.execute(sql, sqlite_params(params))])

    async def schema_version(self) -> int:
        return await self._run(_user_version)

    async def check_health(self) -> None:
        await self.fetch_all("SELECT 1")

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (synchronously: SQLite needs no event loop for it)."""
        with self._lock:
            self._connection.close()

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """The one boundary: every sqlite3 error leaves as DatabaseUnavailable (a constraint as WriteConflict)."""

        def locked() -> T:
            with self._lock:
                return work(self._connection)

        try:
            return await asyncio.to_thread(locked)
        except sqlite3.IntegrityError as exc:
            if exc.sqlite_errorname in _TAKEN_KEY:
                raise WriteConflict(f"database write conflict: {exc}") from exc
            raise DatabaseUnavailable(f"database error: {exc}") from exc
        except sqlite3.Error as exc:
            raise DatabaseUnavailable(f"database error: {exc}") from exc


def _user_version(connection: sqlite3.Connection) -> int:
    return int(connection.execute("PRAGMA user_version").fetchone()[0])


def _migrate(connection: sqlite3.Connection) -> None:
    version = _user_version(connection)
    for number, migration in enumerate(MIGRATIONS[version:], start=version + 1):
        connection.executescript(f"BEGIN; {render(migration, SQLITE_TYPES)} PRAGMA user_version = {number}; COMMIT;")
