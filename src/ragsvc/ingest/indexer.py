"""Ingestion: load a document, chunk it, embed the chunks (with their title and heading: `layout.indexed_text`) and
make them the document's chunks in the engine, which also indexes their terms for corpus statistics.

Each chunk is stored with its document's source: the content's SHA-256 and size, and a fingerprint of everything
the chunks are made from. Re-ingesting a document whose stored fingerprint is the same is skipped (`unchanged`);
any change (content, metadata, chunk settings) replaces its chunks.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time

from ragsvc.domain import Chunk, DocumentSource, IngestResult, SourceDocument
from ragsvc.errors import InvalidRequest
from ragsvc.ingest.chunker import chunk_sections, fenced_token_counts
from ragsvc.ingest.loaders import load_sections
from ragsvc.retrieval.base import Embedder, IndexedChunk, VectorEngine
from ragsvc.retrieval.layout import indexed_text

EMBED_BATCH = 64  # texts per embedder call; a cancelled ingest stops between calls


class Indexer:
    def __init__(self, embedder: Embedder, engine: VectorEngine, *, chunk_tokens: int, overlap_tokens: int) -> None:
        if not chunk_tokens > overlap_tokens >= 0:
            raise ValueError(f"need chunk_tokens > overlap_tokens >= 0, got {chunk_tokens} and {overlap_tokens}")
        self._embedder = embedder
        self._engine = engine
        self._chunk_tokens = chunk_tokens
        self._overlap_tokens = overlap_tokens

    async def ingest(self, document: SourceDocument) -> IngestResult:
        """Re-ingesting replaces the document's chunks, unless nothing changed since (then `unchanged`, and nothing
        is written). A document that cannot be read is reported in the result's `error`; EmbeddingFailed and
        RetrievalUnavailable propagate."""
        started = time.perf_counter()
        source = self.source(document)
        stored = await self._engine.get_document(document.tenant_id, document.document_id)
        if stored is not None and stored.source is not None and stored.source.fingerprint == source.fingerprint:
            return IngestResult(document.document_id, elapsed_ms=_since(started), unchanged=True)
        try:
            chunks = await asyncio.to_thread(self._chunks, document)
        except (InvalidRequest, UnicodeDecodeError) as exc:
            return IngestResult(document.document_id, elapsed_ms=_since(started), error=str(exc))
        if not chunks:
            return IngestResult(document.document_id, elapsed_ms=_since(started), error="the document has no text")
        vectors: list[list[float]] = []
        for start in range(0, len(chunks), EMBED_BATCH):
            batch = chunks[start : start + EMBED_BATCH]
            vectors += await self._embedder.embed_documents([indexed_text(c) for c in batch])
        indexed = [IndexedChunk(c, v, source) for c, v in zip(chunks, vectors, strict=True)]
        await self._engine.replace_document(document.tenant_id, document.document_id, indexed)
        return IngestResult(
            document.document_id,
            chunks_created=len(chunks),
            chunks_indexed=len(indexed),
            elapsed_ms=_since(started),
        )

    async def delete(self, tenant_id: str, document_id: str) -> int:
        """Removes the document's chunks; returns how many there were."""
        return await self._engine.delete_document(tenant_id, document_id)

    def source(self, document: SourceDocument) -> DocumentSource:
        """What the document's chunks are made from, as stored with them (ingested now)."""
        content_sha256 = hashlib.sha256(document.content).hexdigest()
        made_from = {
            "content_sha256": content_sha256,
            "name": document.name,
            "media_type": document.media_type,
            "tags": list(document.tags),
            "source_url": document.source_url,
            "title": document.title,
            "trust": document.trust,
            "published_at": document.published_at,
            "confidential": document.confidential,
            "chunk_tokens": self._chunk_tokens,
            "overlap_tokens": self._overlap_tokens,
        }
        fingerprint = hashlib.sha256(json.dumps(made_from, sort_keys=True).encode()).hexdigest()
        return DocumentSource(content_sha256, len(document.content), document.media_type, fingerprint, time.time())

    def _chunks(self, document: SourceDocument) -> list[Chunk]:
        drafts = chunk_sections(
            load_sections(document), chunk_tokens=self._chunk_tokens, overlap_tokens=self._overlap_tokens
        )
        counts = fenced_token_counts([draft.text for draft in drafts])
        return [
            Chunk(
                document_id=document.document_id,
                chunk_index=index,
                text=draft.text,
                document_name=document.name,
                tenant_id=document.tenant_id,
                tags=document.tags,
                source_url=document.source_url,
                page_title=document.title,
                section=draft.heading,
                page_number=draft.page_number,
                trust=document.trust,
                published_at=document.published_at,
                confidential=document.confidential,
                token_count=count,
            )
            for index, (draft, count) in enumerate(zip(drafts, counts, strict=True))
        ]


def _since(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0
