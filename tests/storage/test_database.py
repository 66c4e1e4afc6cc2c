from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ragsvc.errors import DatabaseUnavailable
from ragsvc.storage.database import MIGRATIONS, Database


def test_migrations_run_once_and_survive_reopen(tmp_path: Path) -> None:
    path = tmp_path / "db" / "ragsvc.sqlite3"
    first = Database.open(path)
    assert first.schema_version == len(MIGRATIONS)
    first.close()
    again = Database.open(path)
    assert again.schema_version == len(MIGRATIONS)
    again.close()


def test_an_old_database_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    connection = sqlite3.connect(path)
    connection.executescript(f"BEGIN; {MIGRATIONS[0]} PRAGMA user_version = 1; COMMIT;")
    connection.execute("INSERT INTO answers (created_at, request_id, tenant_id, session_id, query, outcome, answer, "
                       "grounded, refusal_reason, action, confidence, citations, flags, model, template_version, "
                       "timings, error_reason, error_message) VALUES "
                       "('t', 'r', 'acme', '', 'q', 'answered', 'a', 1, 'none', 'cite', '{}', '[]', '{}', 'm', 'v', "
                       "'{}', '', '')")
    connection.commit()
    connection.close()
    db = Database.open(path)
    assert db.schema_version == len(MIGRATIONS)
    db.close()
    assert sqlite3.connect(path).execute("SELECT tenant_id FROM answers").fetchall() == [("acme",)]


async def test_errors_become_database_unavailable(tmp_path: Path) -> None:
    db = Database.open(tmp_path / "x.sqlite3")
    with pytest.raises(DatabaseUnavailable):
        await db.fetch_all("SELECT * FROM no_such_table")
    await db.check_health()
    db.close()
    with pytest.raises(DatabaseUnavailable):
        await db.check_health()
