"""Fixtures shared across packages: one real MiniLM embedder per session (loading costs ~0.5 s), a real
qdrant-edge shard per test, and a SQLite records database per test."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from ragsvc.retrieval.edge import EdgeEngine
from ragsvc.retrieval.embedders import MiniLMEmbedder
from ragsvc.storage.database import Database


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


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    db = Database.open(tmp_path / "ragsvc.sqlite3")
    yield db
    db.close()
