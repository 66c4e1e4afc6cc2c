"""The retrieval interfaces: an embedder turns text into dense vectors, an engine stores and queries chunks,
a retriever answers a RetrievalQuery with the best visible evidence."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ragsvc.domain import Chunk, DocumentSource, IndexStats, Retrieval, RetrievalQuery, ScoredChunk, StoredDocument, TermCounts
from ragsvc.metadata import MetadataType, MetadataValue

if TYPE_CHECKING:  # layout imports this module
    from ragsvc.access import AccessPolicy


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
    """A chunk ready to store: its dense vector (the engine derives the sparse BM25 vector from the text), its
    document's source (None for chunks stored without one: their documents list without hash or date) and its
    document's metadata."""

    chunk: Chunk
    dense: Sequence[float]
    source: DocumentSource | None = None
    metadata: Mapping[str, MetadataValue] = field(default_factory=dict)


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
    rank_score: float | None = None  # set by the retriever's ranking (quality.rank)
    reading: str | None = field(default=None, compare=False, repr=False)  # as stored (ScoredChunk.reading)

    @property
    def scored(self) -> ScoredChunk:
        return ScoredChunk(self.chunk, self.score, self.rank_score, self.reading)

    def ranked(self, rank_score: float) -> Candidate:
        """The candidate with its rank score (`dataclasses.replace` without its per-call look at the fields)."""
        return Candidate(self.chunk, self.score, self.dense, self.redacted, rank_score, self.reading)


class VectorEngine(Protocol):
    """A Qdrant engine holding chunks of every tenant. Raises RetrievalUnavailable.

    The document calls (delete, list, get, stats) take the tags of the key calling IndexService: `tags` None is
    every document of the tenant; a set of tags, the documents `access.shows` to a key holding them."""

    @property
    def access(self) -> AccessPolicy:
        """Who sees and reads what within a tenant: the rule every query and document call applies."""
        ...

    async def replace_document(self, tenant_id: str, document_id: str, chunks: Sequence[IndexedChunk]) -> None:
        """Make `chunks` the document's only chunks (idempotent re-ingest)."""
        ...

    async def ensure_metadata_index(self, key: str, kind: MetadataType) -> None:
        """Create the payload index of a metadata key of type `kind` (a no-op when it exists)."""
        ...

    async def delete_document(self, tenant_id: str, document_id: str, *, tags: Collection[str] | None = None) -> int:
        """Remove every chunk of the document; returns how many were removed (0 when `tags` do not show it)."""
        ...

    async def query(self, query: RetrievalQuery, dense: Sequence[float], limit: int) -> list[Candidate]:
        """Hybrid dense + sparse query fused by the legs' scores (`layout.fused_ids`), filtered by access and
        metadata inside the engine, in fused order; each result's score is the cosine similarity of its dense vector
        to `dense`. Confidential chunks the caller may not read come back redacted (see
        `ragsvc.access.AccessPolicy`)."""
        ...

    async def term_counts(self, query: RetrievalQuery, terms: Sequence[str]) -> TermCounts:
        """How many chunks visible to the query's caller (tenant, tags, metadata filters) carry index terms, and
        in how many of them each of `terms` (`lexical.index_terms`) occurs."""
        ...

    async def count(self, tenant_id: str | None = None) -> int: ...

    async def list_documents(
        self, tenant_id: str, *, after: str = "", limit: int, tags: Collection[str] | None = None
    ) -> DocumentPage:
        """The tenant's documents whose id sorts after `after`, at most `limit` of them, in id order."""
        ...

    async def get_document(
        self, tenant_id: str, document_id: str, *, tags: Collection[str] | None = None
    ) -> StoredDocument | None:
        """The document, or None when the tenant has no chunk of it (or `tags` do not show it)."""
        ...

    async def stats(self, tenant_id: str, *, tags: Collection[str] | None = None) -> IndexStats:
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
