"""The embedded records backend: one SQLite file, one connection, migrations by PRAGMA user_version at open.

SQLite calls block, so they run in a worker thread, one at a time; the database is small and written once per
request, which a single serialised connection in WAL mode serves comfortably.

Two exceptions, on the event loop's own thread: `execute_many_now`, a short write, for the audit row an answer waits
for, and `fetch_all_now`, a point lookup, for the index version every answer reads. Committing a small row takes
~0.03 ms; through a worker thread the same commit took ~0.25 ms (p50 of 2,000 on 2 cores: the hand-over and the
wake-up back), and on a busy machine each wake-up is a chance to lose the CPU. Neither waits: when the connection is
busy in a worker thread or the database is locked (another connection's write lock, for a write), it does nothing
and the caller goes through the worker thread. A write never syncs the file either: the connection does not
checkpoint its WAL on commit (a checkpoint syncs: milliseconds); the worker thread does, after a write once
CHECKPOINT_EVERY writes have gone by, and `execute_many_now` declines that write so that it is one of the worker's.
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
BUSY_TIMEOUT_MS = 5000  # how long a write in a worker thread waits for another connection's write lock
# Writes between WAL checkpoints (SQLite's own default checkpoints at 1000 pages, a few hundred audit rows).
CHECKPOINT_EVERY = 200


class SQLiteDatabase:
    """The `Backend` on one SQLite file (":memory:" for a private one)."""

    dialect = "sqlite"

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection
        self._lock = threading.Lock()
        self._writes = 0  # since the last checkpoint

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
            connection.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            connection.execute("PRAGMA wal_autocheckpoint=0")  # see the module's docstring
            _migrate(connection)
        except (sqlite3.Error, OSError) as exc:
            raise DatabaseUnavailable(f"cannot open the database at {path}: {exc}") from exc
        return cls(connection)

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return await self._run(lambda c: c.execute(sql, sqlite_params(params)).rowcount, write=True)

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        await self._run(lambda c: _insert_all(c, "BEGIN", sql, rows), write=True)

    def execute_many_now(self, sql: str, rows: Iterable[Sequence[Any]]) -> bool:
        """`execute_many` on the calling thread, if it can be done without waiting (see the module's docstring):
        True when committed, False when nothing was done (the caller then uses `execute_many`). Keep it short."""
        if self._writes >= CHECKPOINT_EVERY or not self._lock.acquire(blocking=False):
            return False
        try:
            connection = self._connection
            connection.execute("PRAGMA busy_timeout=0")
            try:
                _insert_all(connection, "BEGIN IMMEDIATE", sql, rows)  # takes the write lock first, or fails busy
            finally:
                connection.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        except sqlite3.OperationalError as exc:
            if (exc.sqlite_errorname or "").startswith("SQLITE_BUSY"):  # its extended codes too
                return False
            raise _unavailable(exc) from exc
        except sqlite3.Error as exc:
            raise _unavailable(exc) from exc
        finally:
            self._lock.release()
        self._writes += 1
        return True

    def fetch_all_now(self, sql: str, params: Sequence[Any] = ()) -> list[Row] | None:
        """`fetch_all` on the calling thread, if it can be done without waiting (see the module's docstring); None
        when nothing was done (the caller then uses `fetch_all`). Only for a lookup of a few rows by key."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            connection = self._connection
            connection.execute("PRAGMA busy_timeout=0")
            try:
                return [sqlite_row(row) for row in connection.execute(sql, sqlite_params(params))]
            finally:
                connection.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        except sqlite3.OperationalError as exc:
            if (exc.sqlite_errorname or "").startswith("SQLITE_BUSY"):
                return None
            raise _unavailable(exc) from exc
        except sqlite3.Error as exc:
            raise _unavailable(exc) from exc
        finally:
            self._lock.release()

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

    async def _run(self, work: Callable[[sqlite3.Connection], T], *, write: bool = False) -> T:
        """`work` in a worker thread, then, after a `write` once CHECKPOINT_EVERY writes have gone by, a passive
        checkpoint. The one boundary with `execute_many_now`: every sqlite3 error leaves as DatabaseUnavailable
        (a constraint as WriteConflict)."""

        def locked() -> T:
            with self._lock:
                try:
                    return work(self._connection)
                finally:
                    if write:
                        self._writes += 1
                        if self._writes >= CHECKPOINT_EVERY:
                            self._connection.execute("PRAGMA wal_checkpoint(PASSIVE)")
                            self._writes = 0

        try:
            return await asyncio.to_thread(locked)
        except sqlite3.Error as exc:
            raise _unavailable(exc) from exc


def _insert_all(connection: sqlite3.Connection, begin: str, sql: str, rows: Iterable[Sequence[Any]]) -> None:
    """`sql` once per row, in one transaction opened with `begin`."""
    with connection:
        connection.execute(begin)
        connection.executemany(sql, (sqlite_params(row) for row in rows))


def _unavailable(exc: sqlite3.Error) -> DatabaseUnavailable:
    """What an sqlite3 error is to the stores: a constraint on a key taken meanwhile is a WriteConflict."""
    if isinstance(exc, sqlite3.IntegrityError) and exc.sqlite_errorname in _TAKEN_KEY:
        return WriteConflict(f"database write conflict: {exc}")
    return DatabaseUnavailable(f"database error: {exc}")


def _user_version(connection: sqlite3.Connection) -> int:
    return int(connection.execute("PRAGMA user_version").fetchone()[0])


def _migrate(connection: sqlite3.Connection) -> None:
    version = _user_version(connection)
    for number, migration in enumerate(MIGRATIONS[version:], start=version + 1):
        connection.executescript(f"BEGIN; {render(migration, SQLITE_TYPES)} PRAGMA user_version = {number}; COMMIT;")
