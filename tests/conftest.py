"""Fixtures shared by the retrieval and ingestion tests: one real MiniLM embedder per session (loading costs
~0.5 s) and a real qdrant-edge shard per test."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ragsvc.retrieval.edge import EdgeEngine
from ragsvc.retrieval.embedders import MiniLMEmbedder


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
