"""Ingestion: load a document, chunk it, embed the chunks (with their title and heading: `layout.indexed_text`) and
make them the document's chunks in the engine, which also indexes their terms for corpus statistics.

Each chunk is stored with its document's source: the content's SHA-256 and size, and a fingerprint of everything
the chunks are made from. Re-ingesting a document whose stored fingerprint is the same is skipped (`unchanged`);
any change (content, metadata, chunk settings) replaces its chunks.

Several documents are ingested as a pipeline (`ingest_many`): the next documents are read and chunked in worker
threads while the embedder works on the chunks before them, and the chunks of consecutive documents are embedded
together, EMBED_BATCH at a time, so that short documents fill a batch. Each document's chunks are written as soon
as they are all embedded. Embedding takes ~95% of the time (bench/ingest.py).

A caller that wants to follow an ingest (a long-running operation) passes `progress`: it is awaited with the
`IngestProgress` after each embedding batch and each document's result, and may raise to stop the ingest there.
Since a document's chunks are written at once, after all of them were embedded, an ingest stopped that way leaves
the documents finished before whole and writes nothing of the next one.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from ragsvc.domain import Chunk, DocumentSource, IngestProgress, IngestResult, SourceDocument
from ragsvc.errors import InvalidRequest
from ragsvc.ingest.chunker import chunk_sections, fenced_token_counts
from ragsvc.ingest.loaders import load_sections
from ragsvc.retrieval.base import Embedder, IndexedChunk, VectorEngine
from ragsvc.retrieval.layout import indexed_text

EMBED_BATCH = 64  # texts per embedder call, across documents; a cancelled ingest stops between calls
READ_AHEAD = 4  # documents taken up (read and chunked) ahead of the one whose chunks are next to embed

ProgressSink = Callable[[IngestProgress], Awaitable[None]]


@dataclass(slots=True)
class _Pending:
    """A document read and chunked, its chunks' vectors as they are embedded."""

    document: SourceDocument
    source: DocumentSource
    chunks: list[Chunk]
    started: float
    vectors: list[list[float]] = field(default_factory=list)


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
        [result] = await self.ingest_many([document])
        return result

    async def ingest_many(
        self, documents: Sequence[SourceDocument], *, progress: ProgressSink | None = None
    ) -> list[IngestResult]:
        """Each document as `ingest` does it, in a pipeline (see the module's docstring); the results in the
        documents' order, each one's `elapsed_ms` from when it was taken up to its write. The documents must have
        distinct (tenant, id). When EmbeddingFailed or RetrievalUnavailable propagates, or `progress` raises, the
        documents written before stay written."""
        if len({(d.tenant_id, d.document_id) for d in documents}) < len(documents):
            raise ValueError("ingest_many needs documents of distinct (tenant, id)")
        results: dict[tuple[str, str], IngestResult] = {}
        pending: deque[_Pending] = deque()

        async def report() -> None:
            if progress is not None:
                written = sum(result.chunks_indexed for result in results.values())
                await progress(IngestProgress(
                    documents_done=len(results),
                    documents_total=len(documents),
                    chunks_done=written + sum(len(p.vectors) for p in pending),
                    chunks_total=written + sum(len(p.chunks) for p in pending),
                    current_document_id=pending[0].document.document_id if pending else "",
                ))  # fmt: skip

        ahead = deque(asyncio.ensure_future(self._take(d)) for d in documents[:READ_AHEAD])
        try:
            for position, document in enumerate(documents):
                taken = await ahead.popleft()  # the document's
                if position + READ_AHEAD < len(documents):
                    ahead.append(asyncio.ensure_future(self._take(documents[position + READ_AHEAD])))
                if isinstance(taken, IngestResult):
                    results[_key(document)] = taken
                else:
                    pending.append(taken)
                await report()
                while sum(len(p.chunks) - len(p.vectors) for p in pending) >= EMBED_BATCH:
                    results |= await self._embed_next(pending)
                    await report()
            while pending:
                results |= await self._embed_next(pending)
                await report()
        finally:
            for task in ahead:
                task.cancel()
            await asyncio.gather(*ahead, return_exceptions=True)
        return [results[_key(d)] for d in documents]

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

    def chunks(self, document: SourceDocument) -> list[Chunk]:
        """The document read and chunked. Raises InvalidRequest or UnicodeDecodeError for a document that cannot be
        read."""
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

    async def _take(self, document: SourceDocument) -> _Pending | IngestResult:
        """The document taken up: its chunks to embed, or already its result (unchanged, or unreadable)."""
        started = time.perf_counter()
        source = self.source(document)
        stored = await self._engine.get_document(document.tenant_id, document.document_id)
        if stored is not None and stored.source is not None and stored.source.fingerprint == source.fingerprint:
            return IngestResult(document.document_id, elapsed_ms=_since(started), unchanged=True)
        try:
            chunks = await asyncio.to_thread(self.chunks, document)
        except (InvalidRequest, UnicodeDecodeError) as exc:
            return IngestResult(document.document_id, elapsed_ms=_since(started), error=str(exc))
        if not chunks:
            return IngestResult(document.document_id, elapsed_ms=_since(started), error="the document has no text")
        return _Pending(document, source, chunks, started)

    async def _embed_next(self, pending: deque[_Pending]) -> dict[tuple[str, str], IngestResult]:
        """Embeds the next EMBED_BATCH chunks of the pending documents, in their order, in one embedder call; writes
        the documents whose chunks are all embedded now (taken off `pending`) and returns their results."""
        batch: list[tuple[_Pending, str]] = []
        for waiting in pending:
            start = len(waiting.vectors)
            batch += [(waiting, indexed_text(c)) for c in waiting.chunks[start : start + EMBED_BATCH - len(batch)]]
            if len(batch) == EMBED_BATCH:
                break
        vectors = await self._embedder.embed_documents([text for _, text in batch])
        for (waiting, _), vector in zip(batch, vectors, strict=True):
            waiting.vectors.append(vector)
        written: dict[tuple[str, str], IngestResult] = {}
        while pending and len(pending[0].vectors) == len(pending[0].chunks):
            done = pending.popleft()
            written[_key(done.document)] = await self._write(done)
        return written

    async def _write(self, done: _Pending) -> IngestResult:
        indexed = [IndexedChunk(c, v, done.source) for c, v in zip(done.chunks, done.vectors, strict=True)]
        await self._engine.replace_document(done.document.tenant_id, done.document.document_id, indexed)
        return IngestResult(
            done.document.document_id,
            chunks_created=len(done.chunks),
            chunks_indexed=len(indexed),
            elapsed_ms=_since(done.started),
        )


def _key(document: SourceDocument) -> tuple[str, str]:
    return document.tenant_id, document.document_id


def _since(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0
