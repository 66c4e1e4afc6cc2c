"""Ingestion: load a document, chunk it, embed the chunks (with their title and heading: `layout.indexed_text`) and
make them the document's chunks in the engine, which also indexes their terms for corpus statistics.

Each chunk is stored with its document's source: the content's SHA-256 and size, and a fingerprint of everything
the chunks are made from. Re-ingesting a document whose stored fingerprint is the same is skipped (`unchanged`);
any change (content, metadata, chunk settings) replaces its chunks.

Each chunk also carries its document's typed metadata (`ragsvc.metadata`), completed here: `source_type` (the
server's default type when the document names none) and `published_at` (from the publication date). The keys are
declared in the tenant's schema (`retrieval.schema`) before the chunks are written; a document giving a key
another type than the tenant declared is refused in its result. Its trust is its own, else its source type's weight
(`ragsvc.source_trust`).

A key calling IndexService with some tags only (`tags`) may not replace a document those tags do not show
(`AccessPolicy.shows`): that document is refused in its result, and stays as it was.

A document is read and chunked in a worker thread (the event loop serves on) within its `DocumentLimits`, and
within the chunk limit of the way it came in: past any of them it fails alone with DocumentLimitExceeded naming the
limit, before anything of it is embedded or written. Its chunks replace its old ones in one write, once all are
embedded: a document fails or is indexed whole.

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
import dataclasses
import hashlib
import json
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field

from ragsvc.domain import Chunk, DocumentSource, IngestProgress, IngestResult, SourceDocument
from ragsvc.errors import FieldViolation, InvalidRequest
from ragsvc.ingest.chunker import chunk_sections, fenced_token_counts, least_chunks
from ragsvc.ingest.decoding import unreadable
from ragsvc.ingest.limits import ChunkLimit, Deadline, DocumentLimits, exceeded
from ragsvc.ingest.loaders import load_document
from ragsvc.ingest.sections import Section
from ragsvc.ingest.spans import chunk_spans
from ragsvc.metadata import PUBLISHED_AT, SOURCE_TYPE, as_text, parse_timestamp, type_of
from ragsvc.retrieval.base import Embedder, IndexedChunk, VectorEngine
from ragsvc.retrieval.layout import indexed_text
from ragsvc.retrieval.schema import MetadataSchema
from ragsvc.source_trust import SourceTrust
from ragsvc.storage.index_versions import IndexVersions

EMBED_BATCH = 64  # texts per embedder call, across documents; a cancelled ingest stops between calls
READ_AHEAD = 4  # documents taken up (read and chunked) ahead of the one whose chunks are next to embed
_log = logging.getLogger(__name__)

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
    def __init__(
        self,
        embedder: Embedder,
        engine: VectorEngine,
        schema: MetadataSchema,
        *,
        sources: SourceTrust,
        chunk_tokens: int,
        overlap_tokens: int,
        limits: DocumentLimits = DocumentLimits(),
        versions: IndexVersions | None = None,
    ) -> None:
        if not chunk_tokens > overlap_tokens >= 0:
            raise ValueError(f"need chunk_tokens > overlap_tokens >= 0, got {chunk_tokens} and {overlap_tokens}")
        self._embedder = embedder
        self._engine = engine
        self._schema = schema
        self.sources = sources
        self._chunk_tokens = chunk_tokens
        self._overlap_tokens = overlap_tokens
        self._limits = limits
        self._versions = versions  # each tenant's index version, raised by every change of its documents

    async def ingest(self, document: SourceDocument, *, chunk_limit: ChunkLimit | None = None) -> IngestResult:
        """Re-ingesting replaces the document's chunks, unless nothing changed since (then `unchanged`, and nothing
        is written). A document that cannot be read, or is past a limit, is reported in the result's `failure`;
        EmbeddingFailed and RetrievalUnavailable propagate. `chunk_limit`, when lower than the limits' own, bounds
        the document's chunks (the limit of one way in)."""
        [result] = await self.ingest_many([document], chunk_limit=chunk_limit)
        return result

    async def ingest_many(
        self,
        documents: Sequence[SourceDocument],
        *,
        tags: Collection[str] | None = None,
        chunk_limit: ChunkLimit | None = None,
        progress: ProgressSink | None = None,
    ) -> list[IngestResult]:
        """Each document as `ingest` does it, in a pipeline (see the module's docstring); the results in the
        documents' order, each one's `elapsed_ms` from when it was taken up to its write. The documents must have
        distinct (tenant, id). `tags` are those of the key ingesting (None: any tag): a stored document they do not
        show is not replaced. `progress` hears after each document taken up and each embedding batch. When
        EmbeddingFailed or RetrievalUnavailable propagates, or `progress` raises, the documents written before
        stay written."""
        if len({(d.tenant_id, d.document_id) for d in documents}) < len(documents):
            raise ValueError("ingest_many needs documents of distinct (tenant, id)")
        limit = self._chunk_limit(chunk_limit)
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

        ahead = deque(asyncio.ensure_future(self._take(d, tags, limit)) for d in documents[:READ_AHEAD])
        try:
            for position, document in enumerate(documents):
                taken = await ahead.popleft()  # the document's
                if position + READ_AHEAD < len(documents):
                    ahead.append(asyncio.ensure_future(self._take(documents[position + READ_AHEAD], tags, limit)))
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
        except BaseException:  # documents written before stay written: their tenants' indexes changed
            await self._bump({d.tenant_id for d in documents})
            raise
        finally:
            for task in ahead:
                task.cancel()
            await asyncio.gather(*ahead, return_exceptions=True)
        await self._bump({tenant for (tenant, _), result in results.items() if result.chunks_indexed})
        return [results[_key(d)] for d in documents]

    async def _bump(self, tenants: set[str]) -> None:
        """Raises the index version (R-003-13) of each tenant whose documents changed."""
        if self._versions is not None:
            for tenant in sorted(tenants):
                await self._versions.bump(tenant)

    async def delete(self, tenant_id: str, document_id: str, *, tags: Collection[str] | None = None) -> int:
        """Removes the document's chunks; returns how many there were (0 when `tags` do not show it)."""
        deleted = await self._engine.delete_document(tenant_id, document_id, tags=tags)
        if deleted:
            await self._bump({tenant_id})
        return deleted

    def completed(self, document: SourceDocument) -> SourceDocument:
        """The document as indexed: its metadata with `source_type` (the default type when it names none) and
        `published_at` (from its publication date), the publication date from `published_at` when it has none, and
        its trust (its own, else its source type's weight). KeyError for a source type the table does not have."""
        metadata = dict(document.metadata)
        metadata.setdefault(SOURCE_TYPE, self.sources.default_type)
        published_at = document.published_at
        if published_at and PUBLISHED_AT not in metadata:
            metadata[PUBLISHED_AT] = parse_timestamp(published_at)
        elif not published_at and PUBLISHED_AT in metadata:
            published_at = as_text(metadata[PUBLISHED_AT])[:10]
        trust = self.sources.weight(str(metadata[SOURCE_TYPE])) if document.trust is None else document.trust
        return dataclasses.replace(document, metadata=dict(sorted(metadata.items())), published_at=published_at, trust=trust)

    def source(self, document: SourceDocument) -> DocumentSource:
        """What the (completed) document's chunks are made from, as stored with them (ingested now)."""
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
            "metadata": {key: [type_of(value).value, as_text(value)] for key, value in document.metadata.items()},
            "chunk_tokens": self._chunk_tokens,
            "overlap_tokens": self._overlap_tokens,
        }
        fingerprint = hashlib.sha256(json.dumps(made_from, sort_keys=True).encode()).hexdigest()
        return DocumentSource(content_sha256, len(document.content), document.media_type, fingerprint, time.time())

    def chunks(self, document: SourceDocument, limit: ChunkLimit | None = None) -> tuple[list[Chunk], str]:
        """The document read and chunked within the limits (`limit` for its chunks, else the limits' own), and the
        encoding of its text. Raises InvalidRequest for a document that cannot be read, DocumentLimitExceeded past
        a limit."""
        limit = self._chunk_limit(limit)
        deadline = Deadline(self._limits.parse_seconds)
        loaded = load_document(document, self._limits, chunk_tokens=self._chunk_tokens, deadline=deadline)
        too_many = exceeded(limit.setting, limit.maximum, f"makes more than {limit.maximum} chunks", advice=limit.advice)
        if least_chunks(loaded.sections, self._chunk_tokens) > limit.maximum:  # known without cutting one
            raise too_many
        drafts: list[Section] = []
        for draft in chunk_sections(
            loaded.sections, chunk_tokens=self._chunk_tokens, overlap_tokens=self._overlap_tokens, deadline=deadline
        ):
            if len(drafts) == limit.maximum:
                raise too_many
            drafts.append(draft)
        counts = fenced_token_counts([draft.text for draft in drafts])
        spans = chunk_spans(loaded.sections, drafts)
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
                trust=1.0 if document.trust is None else document.trust,
                published_at=document.published_at,
                confidential=document.confidential,
                token_count=count,
                char_start=span[0] if span else None,
                char_end=span[1] if span else None,
            )
            for index, (draft, count, span) in enumerate(zip(drafts, counts, spans, strict=True))
        ], loaded.encoding

    def _chunk_limit(self, limit: ChunkLimit | None) -> ChunkLimit:
        """`limit` when it is lower than the limits' own chunks per document (RAG_INGEST_MAX_CHUNKS), else that."""
        own = ChunkLimit(self._limits.chunks)
        return limit if limit is not None and limit.maximum < own.maximum else own

    async def _take(self, document: SourceDocument, tags: Collection[str] | None, limit: ChunkLimit) -> _Pending | IngestResult:
        """The document taken up: its chunks to embed, or already its result (unchanged, unreadable, past a limit,
        or refused)."""
        started = time.perf_counter()

        def refused(field_name: str, why: str) -> IngestResult:
            failure = InvalidRequest([FieldViolation(field_name, why)], why)
            return IngestResult(document.document_id, elapsed_ms=_since(started), failure=failure)

        try:
            document = self.completed(document)
        except (KeyError, ValueError) as exc:
            return refused("metadata", f"cannot complete its metadata: {exc}")
        source = await asyncio.to_thread(self.source, document)
        stored = await self._engine.get_document(document.tenant_id, document.document_id)
        if stored is not None and not self._engine.access.shows(stored.tags, tags):
            return refused("document_id", "is held by a document this key's tags do not show; it was not replaced")
        if stored is not None and stored.source is not None and stored.source.fingerprint == source.fingerprint:
            return IngestResult(document.document_id, elapsed_ms=_since(started), unchanged=True)
        try:
            chunks, encoding = await asyncio.to_thread(self.chunks, document, limit)
        except InvalidRequest as exc:
            return IngestResult(document.document_id, elapsed_ms=_since(started), failure=exc)
        except Exception as exc:  # noqa: BLE001 - a reader's own fault on odd content fails that document alone
            _log.error("could not read document %r", document.document_id, exc_info=exc)
            failure = unreadable(f"could not be read: the server's reader failed ({type(exc).__name__})")
            return IngestResult(document.document_id, elapsed_ms=_since(started), failure=failure)
        if not chunks:
            failure = unreadable("has no text")
            return IngestResult(document.document_id, elapsed_ms=_since(started), failure=failure, encoding=encoding)
        types = {key: type_of(value) for key, value in document.metadata.items()}
        if conflicts := await self._schema.declare(document.tenant_id, types):
            return refused("metadata", "; ".join(
                f"metadata key {key!r} is a {kind.value} in this tenant, not a {types[key].value}"
                for key, kind in sorted(conflicts.items(), key=lambda item: item[0])
            ))  # fmt: skip
        return _Pending(document, dataclasses.replace(source, encoding=encoding), chunks, started)

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
        metadata = done.document.metadata
        indexed = [IndexedChunk(c, v, done.source, metadata) for c, v in zip(done.chunks, done.vectors, strict=True)]
        await self._engine.replace_document(done.document.tenant_id, done.document.document_id, indexed)
        return IngestResult(
            done.document.document_id,
            chunks_created=len(done.chunks),
            chunks_indexed=len(indexed),
            elapsed_ms=_since(done.started),
            encoding=done.source.encoding,
        )


def _key(document: SourceDocument) -> tuple[str, str]:
    return document.tenant_id, document.document_id


def _since(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0
