"""The retrieval interfaces: an embedder turns text into dense vectors, an engine stores and queries chunks,
a retriever answers a RetrievalQuery with the best visible evidence."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ragsvc.domain import Chunk, DocumentSource, IndexStats, Retrieval, RetrievalQuery, ScoredChunk, StoredDocument, TermCounts


class Embedder(Protocol):
    """Dense text embeddings. Raises EmbeddingFailed."""

    @property
    def dimension(self) -> int: ...

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...

    async def embed_query(self, text: str) -> list[float]: ...

    async def check_health(self) -> None:
        """Returns when the embedder embeds text now; raises EmbeddingFailed otherwise."""
        ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class IndexedChunk:
    """A chunk ready to store: its dense vector (the engine derives the sparse BM25 vector from the text), and
    its document's source (None for chunks stored without one: their documents list without hash or date)."""

    chunk: Chunk
    dense: Sequence[float]
    source: DocumentSource | None = None


@dataclass(frozen=True, slots=True)
class DocumentPage:
    """One page of a tenant's documents in document-id order; `next_after` continues it (None on the last)."""

    documents: list[StoredDocument]
    next_after: str | None


@dataclass(frozen=True, slots=True)
class Candidate:
    """One result of an engine query: the chunk (already redacted when the caller may not read it), the cosine
    similarity of its dense vector to the query's, and that stored vector (unit length), which the retriever
    compares between candidates to drop near-duplicates."""

    chunk: Chunk
    score: float
    dense: np.ndarray = field(compare=False, repr=False)
    redacted: bool = False

    @property
    def scored(self) -> ScoredChunk:
        return ScoredChunk(self.chunk, self.score)


class VectorEngine(Protocol):
    """A Qdrant engine holding chunks of every tenant. Raises RetrievalUnavailable."""

    async def replace_document(self, tenant_id: str, document_id: str, chunks: Sequence[IndexedChunk]) -> None:
        """Make `chunks` the document's only chunks (idempotent re-ingest)."""
        ...

    async def delete_document(self, tenant_id: str, document_id: str) -> int:
        """Remove every chunk of the document; returns how many were removed."""
        ...

    async def query(self, query: RetrievalQuery, dense: Sequence[float], limit: int) -> list[Candidate]:
        """Hybrid dense + sparse query fused with RRF, filtered by access and metadata inside the engine, in
        fused order; each result's score is the cosine similarity of its dense vector to `dense`. Confidential
        chunks the caller may not read come back redacted (see `layout.AccessPolicy`)."""
        ...

    async def term_counts(self, query: RetrievalQuery, terms: Sequence[str]) -> TermCounts:
        """How many chunks visible to the query's caller (tenant, tags, metadata filters) carry index terms, and
        in how many of them each of `terms` (`lexical.index_terms`) occurs."""
        ...

    async def count(self, tenant_id: str | None = None) -> int: ...

    async def list_documents(self, tenant_id: str, *, after: str = "", limit: int) -> DocumentPage:
        """The tenant's documents whose id sorts after `after`, at most `limit` of them, in id order."""
        ...

    async def get_document(self, tenant_id: str, document_id: str) -> StoredDocument | None:
        """The document, or None when the tenant has no chunk of it."""
        ...

    async def stats(self, tenant_id: str) -> IndexStats:
        """The tenant's documents, chunks and content bytes."""
        ...

    async def check_health(self) -> None:
        """Returns when the engine answers a query; raises RetrievalUnavailable otherwise."""
        ...

    async def analyser_version(self) -> int:
        """The version of the analyser the stored index terms were written with (see `stored_terms`)."""
        ...

    async def close(self) -> None: ...


class Retriever(Protocol):
    """Finds the evidence for a query. Raises EmbeddingFailed or RetrievalUnavailable."""

    async def retrieve(self, query: RetrievalQuery) -> Retrieval: ...

    async def term_counts(self, query: RetrievalQuery, terms: Sequence[str]) -> TermCounts:
        """Corpus statistics of `terms` over what the query's caller can see (see VectorEngine.term_counts)."""
        ...

    async def retrieve_selection(
        self, query: str, selection: str, *, top_k: int, score_threshold: float | None = None
    ) -> Retrieval:
        """Selected-text mode: passages of `selection` only (never the engine), scored against `query`."""
        ...

    async def check_health(self) -> None: ...
