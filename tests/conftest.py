"""Fixtures shared across packages: one real MiniLM embedder per session (loading costs ~0.5 s), a real
qdrant-edge shard per test, a records database of each kind per test, and the real PostgreSQL and Redis servers.

`postgres_server` and `redis_server` are one server each for the whole session, started on first use (PostgreSQL
~1-2 s with initdb, Valkey ~10 ms). Each test gets state of its own on them: `postgres_url` is a fresh schema
(dropped afterwards), `redis_url` an emptied server. Both start the server again first if a fault test left it
stopped.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from ragsvc.retrieval.edge import EdgeEngine
from ragsvc.retrieval.embedders import MiniLMEmbedder
from ragsvc.storage.backend import Backend
from ragsvc.storage.database import open_database
from tests.support.postgres_server import PostgresServer
from tests.support.redis_server import RedisServer

_schemas = itertools.count(1)


@functools.cache
def shared_embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder.load()


@pytest.fixture(scope="session")
def embedder() -> MiniLMEmbedder:
    return shared_embedder()


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[EdgeEngine]:
    engine = EdgeEngine.open(tmp_path / "shard")
    yield engine
    await engine.close()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh, empty schema on the session's server."""
    postgres_server.start()
    name = f"test_{next(_schemas)}"
    url = postgres_server.create_schema(name)
    yield url
    postgres_server.start()
    postgres_server.drop_schema(name)


@pytest.fixture
async def records(tmp_path: Path) -> AsyncIterator[Backend]:
    """An SQLite records backend of its own, for a component that keeps records but whose test is not about them."""
    db = await open_database(tmp_path / "records.sqlite3")
    yield db
    await db.aclose()


@pytest.fixture(params=["sqlite", "postgresql"])
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """An open, migrated records backend of each kind: every test using it runs on both."""
    target = tmp_path / "ragsvc.sqlite3" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    db = await open_database(target)
    yield db
    await db.aclose()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The server's URL, running and empty (a plain fixture, so that async fixtures may ask for it by name)."""
    redis_server.start()
    redis_server.flush()
    return redis_server.url
