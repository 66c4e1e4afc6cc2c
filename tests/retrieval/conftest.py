"""Fixtures for retrieval tests: one real MiniLM embedder per session, a real qdrant-edge shard per test."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from ragsvc.domain import Chunk
from ragsvc.retrieval.base import IndexedChunk
from ragsvc.retrieval.edge import EdgeEngine
from ragsvc.retrieval.embedders import MiniLMEmbedder


@functools.cache
def shared_embedder() -> MiniLMEmbedder:
    """Loaded once per test session, also by tests/ingest (loading costs ~0.5 s)."""
    return MiniLMEmbedder.load()


@pytest.fixture(scope="session")
def embedder() -> MiniLMEmbedder:
    return shared_embedder()


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[EdgeEngine]:
    engine = EdgeEngine.open(tmp_path / "shard")
    yield engine
    await engine.close()


async def store(engine: EdgeEngine, embedder: MiniLMEmbedder, chunks: Sequence[Chunk]) -> None:
    """Embeds `chunks` and makes them their documents' chunks."""
    vectors = await embedder.embed_documents([c.text for c in chunks])
    by_document: dict[tuple[str, str], list[IndexedChunk]] = {}
    for chunk, vector in zip(chunks, vectors, strict=True):
        by_document.setdefault((chunk.tenant_id, chunk.document_id), []).append(IndexedChunk(chunk, vector))
    for (tenant_id, document_id), indexed in by_document.items():
        await engine.replace_document(tenant_id, document_id, indexed)
