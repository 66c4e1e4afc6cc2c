"""Fixtures for ingestion tests: the session's real embedder and a real qdrant-edge shard per test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ragsvc.retrieval.edge import EdgeEngine
from ragsvc.retrieval.embedders import MiniLMEmbedder
from tests.retrieval.conftest import shared_embedder


@pytest.fixture(scope="session")
def embedder() -> MiniLMEmbedder:
    return shared_embedder()


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[EdgeEngine]:
    engine = EdgeEngine.open(tmp_path / "shard")
    yield engine
    await engine.close()
