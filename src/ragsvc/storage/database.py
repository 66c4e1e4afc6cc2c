"""The service's SQLite database: one file, one connection, schema migrations applied in order at open.

SQLite calls block, so they run in a worker thread, one at a time; the database is small and written once per
request, which a single serialised connection in WAL mode serves comfortably.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ragsvc.errors import DatabaseUnavailable

# Each entry upgrades the schema by one version (PRAGMA user_version); never edit one that has shipped.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE answers (
        id INTEGER PRIMARY KEY,
        created_at TEXT NOT NULL,
        request_id TEXT NOT NULL,
        tenant_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        query TEXT NOT NULL,
        outcome TEXT NOT NULL,
        answer TEXT NOT NULL,
        grounded INTEGER NOT NULL,
        refusal_reason TEXT NOT NULL,
        action TEXT NOT NULL,
        confidence TEXT NOT NULL,
        citations TEXT NOT NULL,
        flags TEXT NOT NULL,
        model TEXT NOT NULL,
        template_version TEXT NOT NULL,
        timings TEXT NOT NULL,
        error_reason TEXT NOT NULL,
        error_message TEXT NOT NULL,
        packed_chunks TEXT
    );
    CREATE INDEX answers_by_tenant ON answers (tenant_id, created_at);
    CREATE INDEX answers_by_request ON answers (request_id);
    """,
    """
    CREATE TABLE session_messages (
        tenant_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (tenant_id, session_id, seq)
    );
    CREATE INDEX session_messages_by_age ON session_messages (created_at);
    """,
    """
    CREATE TABLE users (
        id TEXT PRIMARY KEY,
        email TEXT NOT NULL
    );
    CREATE TABLE tags (
        name TEXT PRIMARY KEY,
        owner_user_id TEXT
    );
    """,
    """
    CREATE TABLE prompt_templates (
        id TEXT PRIMARY KEY,
        display_name TEXT NOT NULL,
        instructions TEXT NOT NULL,
        user_prompt TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE TABLE settings (
        name TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    """,
    """
    ALTER TABLE answers ADD COLUMN search_query TEXT NOT NULL DEFAULT '';
    ALTER TABLE answers ADD COLUMN query_rewrite TEXT NOT NULL DEFAULT '';
    ALTER TABLE answers ADD COLUMN draft TEXT NOT NULL DEFAULT '';
    """,
)


class Database:
    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: Path | str) -> Database:
        """Open (creating it if needed) and migrate the database at `path`; ":memory:" for a private one."""
        try:
            if str(path) != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
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

    @property
    def schema_version(self) -> int:
        return int(self._connection.execute("PRAGMA user_version").fetchone()[0])

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; returns the number of rows it changed."""
        return int(await self._run(lambda c: c.execute(sql, params).rowcount))

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement per row, all in one transaction."""

        def run(connection: sqlite3.Connection) -> None:
            with connection:
                connection.execute("BEGIN")
                connection.executemany(sql, rows)

        await self._run(run)

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        def run(connection: sqlite3.Connection) -> list[sqlite3.Row]:
            cursor = connection.execute(sql, params)
            cursor.row_factory = sqlite3.Row
            return cursor.fetchall()

        rows: list[sqlite3.Row] = await self._run(run)
        return rows

    async def check_health(self) -> None:
        await self.fetch_all("SELECT 1")

    def close(self) -> None:
        with self._lock:
            self._connection.close()

    async def _run(self, work: Any) -> Any:
        def locked() -> Any:
            with self._lock:
                return work(self._connection)

        try:
            return await asyncio.to_thread(locked)
        except sqlite3.Error as exc:
            raise DatabaseUnavailable(f"database error: {exc}") from exc


def _migrate(connection: sqlite3.Connection) -> None:
    version = int(connection.execute("PRAGMA user_version").fetchone()[0])
    for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
        connection.executescript(f"BEGIN; {script} PRAGMA user_version = {number}; COMMIT;")
