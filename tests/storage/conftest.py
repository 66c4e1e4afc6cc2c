"""The records backends under test: every store test runs on SQLite and on a real PostgreSQL server.

`postgres_server` is one PostgreSQL for the whole session (started on first use); each test gets a database of
its own on it (`postgres_url`: an empty schema, dropped afterwards), so tests never see each other's rows.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from ragsvc.storage.backend import Backend
from ragsvc.storage.database import open_database
from tests.support.postgres_server import PostgresServer

_numbers = itertools.count(1)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh, empty schema on the session's server (started again first if a fault test left it stopped)."""
    postgres_server.start()
    name = f"test_{next(_numbers)}"
    url = postgres_server.create_schema(name)
    yield url
    postgres_server.start()
    postgres_server.drop_schema(name)


@pytest.fixture(params=["sqlite", "postgresql"])
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """An open, migrated records backend of each kind."""
    target = tmp_path / "ragsvc.sqlite3" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    db = await open_database(target)
    yield db
    await db.aclose()
