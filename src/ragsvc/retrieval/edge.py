"""The VectorEngine over qdrant-edge: Qdrant's Rust engine in-process, one shard holding every tenant.

Each chunk is a point with a dense vector ("dense", cosine) and a BM25 sparse vector ("bm25", IDF applied by the
engine) computed by qdrant-edge's own BM25 model. Queries fuse both with RRF; access and metadata filters run
inside the engine, on both candidate lists.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import qdrant_edge as qe

from ragsvc.domain import Chunk, RetrievalQuery, ScoredChunk
from ragsvc.errors import RetrievalUnavailable
from ragsvc.retrieval.base import IndexedChunk

DENSE = "dense"
SPARSE = "bm25"
RRF_K = 60
_KEYWORD_FIELDS = ("tags", "document_id", "source_url", "page_title", "section")
_T = TypeVar("_T")


def point_id(tenant_id: str, document_id: str, chunk_index: int) -> uuid.UUID:
    """Stable id of a chunk, so re-ingesting a document overwrites its points."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"{tenant_id}/{document_id}/{chunk_index}")


class EdgeEngine:
    """Owns one qdrant-edge shard directory (a second opener fails on the WAL lock until close())."""

    def __init__(self, shard: qe.EdgeShard, bm25: qe.Bm25) -> None:
        self._shard = shard
        self._bm25 = bm25
        # qdrant-edge calls from several threads are safe (they hold the GIL while they run); the lock makes each
        # multi-step write atomic with respect to other writes and to close().
        self._write_lock = threading.Lock()
        self._closed = False

    @classmethod
    def open(cls, path: Path, dimension: int = 384) -> EdgeEngine:
        """Load the shard at `path`, or create it there when there is none, and make sure of its payload indexes."""
        config = qe.EdgeConfig(
            vectors={DENSE: qe.EdgeVectorParams(size=dimension, distance=qe.Distance.Cosine)},
            sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        )
        try:
            exists = (path / "edge_config.json").exists()
            shard = qe.EdgeShard.load(str(path), config) if exists else qe.EdgeShard.create(str(path), config)
        except Exception as exc:
            raise RetrievalUnavailable(f"cannot open the vector store at {path}: {exc}") from exc
        try:
            # Creating an existing index is a no-op, so shards made by an older version gain new indexes.
            shard.update(qe.UpdateOperation.create_field_index("tenant_id", qe.KeywordIndexParams(is_tenant=True)))
            for name in _KEYWORD_FIELDS:
                shard.update(qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Keyword))
        except Exception as exc:
            shard.close()
            raise RetrievalUnavailable(f"cannot index the vector store at {path}: {exc}") from exc
        return cls(shard, qe.Bm25())

    async def replace_document(self, tenant_id: str, document_id: str, chunks: Sequence[IndexedChunk]) -> None:
        owner = (tenant_id, document_id)
        strangers = [c.chunk.source_id for c in chunks if (c.chunk.tenant_id, c.chunk.document_id) != owner]
        if strangers:
            raise ValueError(f"chunks {strangers} are not part of document {document_id!r} of tenant {tenant_id!r}")
        await self._run(self._replace, tenant_id, document_id, chunks)

    async def delete_document(self, tenant_id: str, document_id: str) -> int:
        return await self._run(self._delete, tenant_id, document_id)

    async def query(self, query: RetrievalQuery, dense: Sequence[float], limit: int) -> list[ScoredChunk]:
        return await self._run(self._query, query, dense, limit)

    async def count(self, tenant_id: str | None = None) -> int:
        tenant = None if tenant_id is None else qe.Filter(must=[_match("tenant_id", tenant_id)])
        return await self._run(lambda: self._shard.count(qe.CountRequest(exact=True, filter=tenant)))

    async def check_health(self) -> None:
        await self._run(lambda: self._shard.count(qe.CountRequest(exact=False)))

    async def close(self) -> None:
        """Flushes and releases the shard (and its directory lock); later calls are no-ops."""
        if not self._closed:
            await self._run(self._close)

    async def _run(self, call: Callable[..., _T], *args: Any) -> _T:
        """Runs a blocking engine call in a worker thread; any engine failure becomes RetrievalUnavailable."""
        if self._closed:
            raise RetrievalUnavailable("the vector store is closed")
        try:
            return await asyncio.to_thread(call, *args)
        except RetrievalUnavailable:
            raise
        except Exception as exc:
            raise RetrievalUnavailable(f"vector store error: {exc}") from exc

    def _replace(self, tenant_id: str, document_id: str, chunks: Sequence[IndexedChunk]) -> None:
        """Upserts the new chunks, then deletes the document's other points: queries never see it missing."""
        points = [self._point(c) for c in chunks]
        stale = qe.Filter(
            must=[_match("tenant_id", tenant_id), _match("document_id", document_id)],
            must_not=[qe.HasIdCondition({p.id for p in points})] if points else None,
        )
        with self._write_lock:
            if points:
                self._shard.update(qe.UpdateOperation.upsert_points(points))
            self._shard.update(qe.UpdateOperation.delete_points_by_filter(stale))

    def _delete(self, tenant_id: str, document_id: str) -> int:
        document = qe.Filter(must=[_match("tenant_id", tenant_id), _match("document_id", document_id)])
        with self._write_lock:
            removed = self._shard.count(qe.CountRequest(exact=True, filter=document))
            if removed:
                self._shard.update(qe.UpdateOperation.delete_points_by_filter(document))
        return removed

    def _point(self, indexed: IndexedChunk) -> qe.Point:
        chunk = indexed.chunk
        vectors = {DENSE: [float(x) for x in indexed.dense], SPARSE: self._bm25.embed_document(chunk.text)}
        return qe.Point(point_id(chunk.tenant_id, chunk.document_id, chunk.chunk_index), vectors, _payload(chunk))

    def _query(self, query: RetrievalQuery, dense: Sequence[float], limit: int) -> list[ScoredChunk]:
        visible = _visibility(query)
        sparse = self._bm25.embed_query(query.text)
        request = qe.QueryRequest(
            limit=limit,
            prefetches=[
                qe.Prefetch(limit=limit, query=qe.Query.Nearest(list(dense), using=DENSE), filter=visible),
                qe.Prefetch(limit=limit, query=qe.Query.Nearest(sparse, using=SPARSE), filter=visible),
            ],
            query=qe.Fusion.Rrf(k=RRF_K),
            with_vector=[DENSE],
            with_payload=True,
        )
        points = self._shard.query(request)
        if not points:
            return []
        # The engine stores cosine vectors normalised, so a dot product with the normalised query is the cosine.
        stored = np.array([p.vector[DENSE] for p in points], dtype=np.float32)  # type: ignore[index]
        target = np.asarray(dense, dtype=np.float32)
        similarities = np.clip(stored @ (target / max(float(np.linalg.norm(target)), 1e-12)), -1.0, 1.0)
        return [ScoredChunk(_chunk(p.payload or {}), float(s)) for p, s in zip(points, similarities, strict=True)]

    def _close(self) -> None:
        with self._write_lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._shard.flush()
            finally:
                self._shard.close()


def _match(key: str, value: str) -> qe.FieldCondition:
    return qe.FieldCondition(key, match=qe.MatchValue(value))


def _visibility(query: RetrievalQuery) -> qe.Filter:
    """The query's tenant; untagged chunks and those sharing a tag with the user (a user without tags sees only
    untagged chunks: access is granted by tags, never by their absence); each metadata constraint."""
    must: list[Any] = [_match("tenant_id", query.tenant_id)]
    visible: list[Any] = [qe.IsEmptyCondition("tags")]
    if query.user_tags:
        visible.append(qe.FieldCondition("tags", match=qe.MatchAny(list(query.user_tags))))
    must.append(qe.Filter(should=visible))
    constraints = (
        ("source_url", query.filters.source_urls),
        ("page_title", query.filters.page_titles),
        ("section", query.filters.section_headings),
    )
    must.extend(qe.FieldCondition(key, match=qe.MatchAny(list(values))) for key, values in constraints if values)
    return qe.Filter(must=must)


def _payload(chunk: Chunk) -> dict[str, Any]:
    return {
        "document_id": chunk.document_id,
        "chunk_index": chunk.chunk_index,
        "text": chunk.text,
        "document_name": chunk.document_name,
        "tenant_id": chunk.tenant_id,
        "tags": list(chunk.tags),
        "source_url": chunk.source_url,
        "page_title": chunk.page_title,
        "section": chunk.section,
        "page_number": chunk.page_number,
        "trust": chunk.trust,
        "published_at": chunk.published_at,
    }


def _chunk(payload: dict[str, Any]) -> Chunk:
    return Chunk(
        document_id=payload["document_id"],
        chunk_index=int(payload["chunk_index"]),
        text=payload["text"],
        document_name=payload.get("document_name", ""),
        tenant_id=payload.get("tenant_id", ""),
        tags=tuple(payload.get("tags") or ()),
        source_url=payload.get("source_url", ""),
        page_title=payload.get("page_title", ""),
        section=payload.get("section"),
        page_number=payload.get("page_number"),
        trust=float(payload.get("trust", 1.0)),
        published_at=payload.get("published_at", ""),
    )
