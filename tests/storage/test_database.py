"""The backends themselves: migrations, the error boundary, timestamps, the factory. SQLite's own upgrade path
is tested here; PostgreSQL's own behaviour (advisory lock, server down and back) in test_postgres.py."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ragsvc.errors import DatabaseUnavailable
from ragsvc.storage.backend import Backend, WriteConflict, utc_now
from ragsvc.storage.database import open_database
from ragsvc.storage.dialect import SQLITE_TYPES, numbered_placeholders, postgres_rowcount, render
from ragsvc.storage.schema import MIGRATIONS
from ragsvc.storage.sqlite import SQLiteDatabase
from tests.support.local_server import free_port


async def test_migrations_run_once_and_survive_reopen(tmp_path: Path) -> None:
    path = tmp_path / "db" / "ragsvc.sqlite3"
    first = await open_database(path)
    assert await first.schema_version() == len(MIGRATIONS)
    await first.aclose()
    again = await open_database(path)
    assert await again.schema_version() == len(MIGRATIONS)
    await again.aclose()


async def test_an_old_database_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    connection = sqlite3.connect(path)
    connection.executescript(f"BEGIN; {render(MIGRATIONS[0], SQLITE_TYPES)} PRAGMA user_version = 1; COMMIT;")
    connection.execute("INSERT INTO answers (created_at, request_id, tenant_id, session_id, query, outcome, answer, "
                       "grounded, refusal_reason, action, confidence, citations, flags, model, template_version, "
                       "timings, error_reason, error_message) VALUES "
                       "('2026-01-02T03:04:05.678+00:00', 'r', 'acme', '', 'q', 'answered', 'a', 1, 'none', 'cite', "
                       "'{}', '[]', '{}', 'm', 'v', '{}', '', '')")  # fmt: skip
    connection.commit()
    connection.close()
    db = await open_database(path)
    assert await db.schema_version() == len(MIGRATIONS)
    [row] = await db.fetch_all("SELECT tenant_id, created_at FROM answers")
    assert row == {"tenant_id": "acme", "created_at": datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)}
    await db.aclose()


def test_the_sqlite_schema_is_the_one_that_shipped() -> None:
    """Rendering for SQLite gives back the column types the first releases wrote."""
    rendered = render(MIGRATIONS[0], SQLITE_TYPES)
    assert "id INTEGER PRIMARY KEY," in rendered and "created_at TEXT NOT NULL" in rendered


async def test_errors_become_database_unavailable(database: Backend) -> None:
    with pytest.raises(DatabaseUnavailable):
        await database.fetch_all("SELECT * FROM no_such_table")
    await database.check_health()
    await database.aclose()
    with pytest.raises(DatabaseUnavailable):
        await database.check_health()
    with pytest.raises(DatabaseUnavailable):
        await database.execute("DELETE FROM settings")


async def test_values_round_trip_alike(database: Backend) -> None:
    stamp = utc_now()
    changed = await database.execute(
        "INSERT INTO settings (name, value, updated_at) VALUES (?, ?, ?)", ("k?", "it's a ? and a \x00", stamp)
    )
    assert changed == 1
    rows = await database.fetch_all("SELECT name, value, updated_at FROM settings WHERE name = 'k?' AND name = ?",
                                    ("k?",))  # fmt: skip
    value = "it's a ? and a \x00" if database.dialect == "sqlite" else "it's a ? and a \ufffd"
    assert rows == [{"name": "k?", "value": value, "updated_at": stamp}]
    assert await database.execute("DELETE FROM settings WHERE name = ?", ("nothing",)) == 0


async def test_the_factory_picks_the_backend_by_url(tmp_path: Path, postgres_url: str) -> None:
    memory = await open_database(":memory:")
    assert isinstance(memory, SQLiteDatabase) and memory.dialect == "sqlite"
    await memory.aclose()
    shared = await open_database(postgres_url)
    assert shared.dialect == "postgresql"
    await shared.aclose()
    with pytest.raises(DatabaseUnavailable):
        await open_database(tmp_path)  # a directory, not a database file
    with pytest.raises(DatabaseUnavailable):
        await open_database(f"postgresql://postgres@127.0.0.1:{free_port()}/none", connect_timeout_s=1)


def test_placeholders_are_numbered_outside_quotes() -> None:
    assert numbered_placeholders("SELECT ? , '?', \"a?\" FROM t WHERE a = ? AND b = 'it''s ?'") == (
        "SELECT $1 , '?', \"a?\" FROM t WHERE a = $2 AND b = 'it''s ?'"
    )
    assert [postgres_rowcount(tag) for tag in ("INSERT 0 1", "DELETE 3", "UPDATE 0", "CREATE TABLE")] == [1, 3, 0, 0]


async def test_execute_many_is_one_transaction(database: Backend) -> None:
    rows = [("u1", "a@example.com"), ("u2", "b@example.com"), ("u1", "again@example.com")]
    with pytest.raises(WriteConflict):
        await database.execute_many("INSERT INTO users (id, email) VALUES (?, ?)", rows)
    assert await database.fetch_all("SELECT id FROM users") == [], "nothing of a failed batch stays"
    await database.execute_many("INSERT INTO users (id, email) VALUES (?, ?)", rows[:2])
    assert len(await database.fetch_all("SELECT id FROM users")) == 2
