"""Fixtures for retrieval tests (the `embedder` and `engine` fixtures are in tests/conftest.py), and
`any_engine`: each test using it runs once on the embedded engine (qdrant-edge) and once on the Qdrant server
engine over qdrant-client's local mode (no Qdrant server can be installed where the tests run)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from qdrant_client import AsyncQdrantClient

from ragsvc.access import AccessPolicy
from ragsvc.domain import Chunk
from ragsvc.retrieval.base import IndexedChunk, VectorEngine
from ragsvc.retrieval.edge import EdgeEngine
from ragsvc.retrieval.embedders import MiniLMEmbedder
from ragsvc.retrieval.qdrant_server import QdrantServerEngine


@dataclass(frozen=True)
class EngineKind:
    """How to open one kind of engine on a directory: `persistent` engines keep their data in it across opens
    (qdrant-client's local mode then runs on `path=`, which writes slowly; else in memory)."""

    name: str

    async def open(
        self, path: Path, *, persistent: bool = False, access: AccessPolicy = AccessPolicy(), dimension: int = 384
    ) -> VectorEngine:
        if self.name == "edge":
            return EdgeEngine.open(path, dimension, access=access)
        client = AsyncQdrantClient(path=str(path)) if persistent else AsyncQdrantClient(location=":memory:")
        return await QdrantServerEngine.create(client, dimension=dimension, access=access)


ENGINE_KINDS = [EngineKind("edge"), EngineKind("qdrant-client")]


@pytest.fixture(params=ENGINE_KINDS, ids=lambda kind: kind.name)
def engine_kind(request: pytest.FixtureRequest) -> EngineKind:
    return request.param


@pytest.fixture
async def any_engine(engine_kind: EngineKind, tmp_path: Path) -> AsyncIterator[VectorEngine]:
    engine = await engine_kind.open(tmp_path / "engine")
    yield engine
    await engine.close()


async def store(engine: VectorEngine, embedder: MiniLMEmbedder, chunks: Sequence[Chunk]) -> None:
    """Embeds `chunks` and makes them their documents' chunks."""
    vectors = await embedder.embed_documents([c.text for c in chunks])
    by_document: dict[tuple[str, str], list[IndexedChunk]] = {}
    for chunk, vector in zip(chunks, vectors, strict=True):
        by_document.setdefault((chunk.tenant_id, chunk.document_id), []).append(IndexedChunk(chunk, vector))
    for (tenant_id, document_id), indexed in by_document.items():
        await engine.replace_document(tenant_id, document_id, indexed)
