"""The retrieval interfaces: an embedder turns text into dense vectors, an engine stores and queries chunks,
a retriever answers a RetrievalQuery with the best visible evidence."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ragsvc.domain import Chunk, Retrieval, RetrievalQuery, ScoredChunk


class Embedder(Protocol):
    """Dense text embeddings. Raises EmbeddingFailed."""

    @property
    def dimension(self) -> int: ...

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...

    async def embed_query(self, text: str) -> list[float]: ...


@dataclass(frozen=True, slots=True)
class IndexedChunk:
    """A chunk ready to store: its dense vector (the engine derives the sparse BM25 vector from the text)."""

    chunk: Chunk
    dense: Sequence[float]


class VectorEngine(Protocol):
    """A Qdrant engine holding chunks of every tenant. Raises RetrievalUnavailable."""

    async def replace_document(self, tenant_id: str, document_id: str, chunks: Sequence[IndexedChunk]) -> None:
        """Make `chunks` the document's only chunks (idempotent re-ingest)."""
        ...

    async def delete_document(self, tenant_id: str, document_id: str) -> int:
        """Remove every chunk of the document; returns how many were removed."""
        ...

    async def query(self, query: RetrievalQuery, dense: Sequence[float], limit: int) -> list[ScoredChunk]:
        """Hybrid dense + sparse query fused with RRF, filtered by access and metadata inside the engine;
        each result's score is the cosine similarity of its dense vector to `dense`."""
        ...

    async def count(self, tenant_id: str | None = None) -> int: ...

    async def check_health(self) -> None:
        """Returns when the engine answers a query; raises RetrievalUnavailable otherwise."""
        ...

    async def close(self) -> None: ...


class Retriever(Protocol):
    """Finds the evidence for a query. Raises EmbeddingFailed or RetrievalUnavailable."""

    async def retrieve(self, query: RetrievalQuery) -> Retrieval: ...

    async def check_health(self) -> None: ...
