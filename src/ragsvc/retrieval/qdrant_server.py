"""The VectorEngine over a Qdrant server or cluster, through qdrant-client's AsyncQdrantClient.

Same collection layout and query semantics as the embedded engine (see `layout`): dense + BM25 sparse (IDF
modifier) prefetches, each leg scoring their candidates in one `query_batch_points` call and `fuse` ordering
them, the access and metadata filters inside both prefetches, scores the cosine of the stored dense vectors. The
BM25 term weights are computed here with qdrant-edge's model, so both engines index and query identical sparse
vectors.

`connect()` talks to a server (`RAG_QDRANT_URL`, gRPC preferred); `create()` accepts any ready client, including
qdrant-client's local mode (`AsyncQdrantClient(location=":memory:")` or `path=...`), which the tests use since no
Qdrant server can be installed where they run. Local mode is pure Python and slow at scale (bench/retrieval.py).

Writes to one document are serialised within this process; replicas writing the same document concurrently are
not coordinated (each replace is upsert-then-delete-stale, so readers never see a document missing).
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Awaitable, Collection, Mapping, Sequence
from typing import Any, TypeVar

from qdrant_client import AsyncQdrantClient
from qdrant_client import models as m

from ragsvc.access import AccessPolicy
from ragsvc.domain import IndexStats, RetrievalQuery, StoredDocument, TermCounts
from ragsvc.errors import RetrievalUnavailable
from ragsvc.metadata import MetadataType
from ragsvc.reading.text import ANALYSER_VERSION
from ragsvc.retrieval.base import Candidate, DocumentPage, IndexedChunk
from ragsvc.retrieval.layout import (
    DENSE,
    DOCUMENT_FIELDS,
    KEYWORD_FIELDS,
    READING_FIELD,
    RETURNED_FIELDS,
    SPARSE,
    TENANT_FIELD,
    TERMS_FIELD,
    Analysed,
    SparseEncoder,
    candidates_from,
    cosines,
    dense_rows,
    fuse,
    indexed_text,
    meta_path,
    metadata_constraints,
    page_after,
    payload,
    point_id,
    render,
    resolved_where,
    searched_vectors,
    stored_document,
    unit_rows,
)
from ragsvc.retrieval.stored_terms import FIELDS, MARKER, StoredTerms, TermsPage, recorded_version

DEFAULT_COLLECTION = "ragsvc_chunks"
UPSERT_BATCH = 256
_T = TypeVar("_T")
# The payload index of a metadata key's type (booleans are stored as keywords: see layout).
_META_INDEXES = {
    MetadataType.STRING: m.PayloadSchemaType.KEYWORD,
    MetadataType.NUMBER: m.PayloadSchemaType.FLOAT,
    MetadataType.BOOL: m.PayloadSchemaType.KEYWORD,
    MetadataType.TIMESTAMP: m.PayloadSchemaType.DATETIME,
}


class QdrantServerEngine:
    """One collection of a Qdrant server (or of qdrant-client's local mode) holding the chunks of every tenant."""

    def __init__(
        self,
        client: AsyncQdrantClient,
        collection: str = DEFAULT_COLLECTION,
        *,
        access: AccessPolicy = AccessPolicy(),
        owns_client: bool = True,
    ) -> None:
        """Prefer `connect()` or `create()`, which make sure of the collection."""
        self._client = client
        self._collection = collection
        self._access = access
        self._owns_client = owns_client
        self._sparse = SparseEncoder()
        self._write_lock = asyncio.Lock()
        self._closed = False

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        dimension: int,
        api_key: str = "",
        collection: str = DEFAULT_COLLECTION,
        prefer_grpc: bool = True,
        timeout_s: float = 10.0,
        access: AccessPolicy = AccessPolicy(),
    ) -> QdrantServerEngine:
        """A client for the server at `url` (REST port in the URL; gRPC on its default port when preferred)."""
        try:
            client = AsyncQdrantClient(
                url=url, api_key=api_key or None, prefer_grpc=prefer_grpc, timeout=max(1, round(timeout_s))
            )
        except Exception as exc:
            raise RetrievalUnavailable(f"cannot reach the Qdrant server at {url}: {exc}") from exc
        return await cls.create(client, collection, dimension=dimension, access=access)

    @classmethod
    async def create(
        cls,
        client: AsyncQdrantClient,
        collection: str = DEFAULT_COLLECTION,
        *,
        dimension: int,
        access: AccessPolicy = AccessPolicy(),
        owns_client: bool = True,
    ) -> QdrantServerEngine:
        """The engine over `client`'s `collection`, created with the shared layout when missing; an existing one
        must have the same dense size and a BM25 sparse vector. The engine closes the client when it owns it."""
        engine = cls(client, collection, access=access, owns_client=owns_client)
        try:
            await engine._call(engine._ensure_collection(dimension))
        except BaseException:
            if owns_client:
                await client.close()
            raise
        return engine

    async def _ensure_collection(self, dimension: int) -> None:
        if await self._client.collection_exists(self._collection):
            info = await self._client.get_collection(self._collection)
            vectors = info.config.params.vectors
            size = vectors[DENSE].size if isinstance(vectors, dict) and DENSE in vectors else None
            sparse = info.config.params.sparse_vectors or {}
            if size != dimension or SPARSE not in sparse:
                raise RetrievalUnavailable(
                    f"collection {self._collection!r} does not match this service: vector size {size} "
                    f"(need {dimension}), sparse vectors {sorted(sparse)} (need {SPARSE!r})"
                )
        else:
            await self._client.create_collection(
                self._collection,
                vectors_config={DENSE: m.VectorParams(size=dimension, distance=m.Distance.COSINE)},
                sparse_vectors_config={SPARSE: m.SparseVectorParams(modifier=m.Modifier.IDF)},
                metadata={MARKER: ANALYSER_VERSION},
            )
        await self._create_index(TENANT_FIELD, m.KeywordIndexParams(type=m.KeywordIndexType.KEYWORD, is_tenant=True))
        for name in KEYWORD_FIELDS:
            await self._create_index(name, m.PayloadSchemaType.KEYWORD)

    async def _create_index(self, name: str, schema: m.PayloadSchemaType | m.KeywordIndexParams) -> None:
        with warnings.catch_warnings():
            # Local mode warns that payload indexes have no effect there; a server uses them.
            warnings.filterwarnings("ignore", message="Payload indexes have no effect", category=UserWarning)
            await self._client.create_payload_index(self._collection, name, schema)

    # -- the VectorEngine protocol --------------------------------------------------------------------------

    @property
    def access(self) -> AccessPolicy:
        return self._access

    async def ensure_metadata_index(self, key: str, kind: MetadataType) -> None:
        await self._call(self._create_index(meta_path(key, kind), _META_INDEXES[kind]))

    async def replace_document(self, tenant_id: str, document_id: str, chunks: Sequence[IndexedChunk]) -> None:
        owner = (tenant_id, document_id)
        strangers = [c.chunk.source_id for c in chunks if (c.chunk.tenant_id, c.chunk.document_id) != owner]
        if strangers:
            raise ValueError(f"chunks {strangers} are not part of document {document_id!r} of tenant {tenant_id!r}")
        # Building the points (BM25 terms, payloads) is CPU work: ~0.4 ms a chunk, off the event loop.
        points = await asyncio.to_thread(lambda: [self._point(c) for c in chunks])
        ids: list[m.ExtendedPointId] = [p.id for p in points]
        stale = m.Filter(
            must=[_match(TENANT_FIELD, tenant_id), _match("document_id", document_id)],
            must_not=[m.HasIdCondition(has_id=ids)] if ids else None,
        )
        async with self._write_lock:
            for start in range(0, len(points), UPSERT_BATCH):
                await self._call(self._client.upsert(self._collection, points[start : start + UPSERT_BATCH], wait=True))
            await self._call(self._client.delete(self._collection, m.FilterSelector(filter=stale), wait=True))

    async def delete_document(self, tenant_id: str, document_id: str, *, tags: Collection[str] | None = None) -> int:
        document = _documents(tenant_id, document_id, tags, self._access)
        if document is None:
            return 0
        async with self._write_lock:
            removed = (await self._call(self._client.count(self._collection, count_filter=document, exact=True))).count
            if removed:
                await self._call(self._client.delete(self._collection, m.FilterSelector(filter=document), wait=True))
        return int(removed)

    async def query(self, query: RetrievalQuery, dense: Sequence[float], limit: int) -> list[Candidate]:
        visible = _visibility(query, self._access)
        if visible is None or limit <= 0:
            return []
        vectors = {name: self._query_vector(name, query, dense) for name in searched_vectors(query.search_mode)}
        prefetches = [m.Prefetch(query=v, using=name, filter=visible, limit=limit) for name, v in vectors.items()]
        # Each leg scores every prefetched candidate; the first one returns them with their chunks (`fuse`).
        requests = [
            m.QueryRequest(
                prefetch=prefetches,
                query=vector,
                using=name,
                limit=limit * len(prefetches),
                with_payload=RETURNED_FIELDS if at == 0 else False,
                with_vector=[DENSE] if at == 0 else False,
            )
            for at, (name, vector) in enumerate(vectors.items())
        ]
        responses = await self._call(self._client.query_batch_points(self._collection, requests=requests))
        points = fuse([(name, response.points) for name, response in zip(vectors, responses, strict=True)], limit)
        if not points:
            return []
        stored = unit_rows(dense_rows([_dense_of(p) for p in points]))
        return candidates_from([p.payload or {} for p in points], stored, cosines(stored, dense), query, self._access)

    def _query_vector(self, name: str, query: RetrievalQuery, dense: Sequence[float]) -> list[float] | m.SparseVector:
        if name == DENSE:
            return [float(x) for x in dense]
        indices, values = self._sparse.query(query.text)
        return m.SparseVector(indices=indices, values=values)

    async def term_counts(self, query: RetrievalQuery, terms: Sequence[str]) -> TermCounts:
        visible = _visibility(query, self._access)
        if visible is None:
            return TermCounts(0, dict.fromkeys(terms, 0))

        async def count(condition: m.Condition) -> int:
            found = self._client.count(self._collection, count_filter=m.Filter(must=[visible, condition]), exact=True)
            return int((await self._call(found)).count)

        indexed = await count(m.Filter(must_not=[m.IsEmptyCondition(is_empty=m.PayloadField(key=TERMS_FIELD))]))
        return TermCounts(indexed, {term: await count(_match(TERMS_FIELD, term)) if indexed else 0 for term in terms})

    async def count(self, tenant_id: str | None = None) -> int:
        tenant = None if tenant_id is None else m.Filter(must=[_match(TENANT_FIELD, tenant_id)])
        return int((await self._call(self._client.count(self._collection, count_filter=tenant, exact=True))).count)

    async def list_documents(
        self, tenant_id: str, *, after: str = "", limit: int, tags: Collection[str] | None = None
    ) -> DocumentPage:
        counts = await self._chunk_counts(tenant_id, tags=tags)
        ids, next_after = page_after(counts, after, limit)
        return DocumentPage(await self._documents(tenant_id, counts, ids), next_after)

    async def get_document(
        self, tenant_id: str, document_id: str, *, tags: Collection[str] | None = None
    ) -> StoredDocument | None:
        counts = await self._chunk_counts(tenant_id, document_id, tags)
        return (await self._documents(tenant_id, counts, [document_id]))[0] if counts else None

    async def stats(self, tenant_id: str, *, tags: Collection[str] | None = None) -> IndexStats:
        counts = await self._chunk_counts(tenant_id, tags=tags)
        documents = await self._documents(tenant_id, counts, sorted(counts))
        return IndexStats(
            documents=len(documents),
            chunks=sum(counts.values()),
            content_bytes=sum(d.source.content_bytes for d in documents if d.source is not None),
            engine=f"Qdrant collection {self._collection!r} (qdrant-client)",
        )

    async def check_health(self) -> None:
        await self._call(self._client.count(self._collection, exact=False))

    async def close(self) -> None:
        """Closes the client when the engine owns it; later calls are no-ops."""
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            try:
                await self._client.close()
            except Exception as exc:
                raise RetrievalUnavailable(f"closing the Qdrant client failed: {exc}") from exc

    # -- helpers ----------------------------------------------------------------------------------------------

    async def _call(self, call: Awaitable[_T]) -> _T:
        """Awaits a client call; any client or transport failure becomes RetrievalUnavailable."""
        if self._closed:
            if asyncio.iscoroutine(call):
                call.close()
            raise RetrievalUnavailable("the vector store is closed")
        try:
            return await call
        except RetrievalUnavailable:
            raise
        except Exception as exc:
            raise RetrievalUnavailable(f"Qdrant error: {type(exc).__name__}: {exc}") from exc

    async def _chunk_counts(
        self, tenant_id: str, document_id: str | None = None, tags: Collection[str] | None = None
    ) -> dict[str, int]:
        """Chunks per document of the tenant (of one document when given) that `tags` show."""
        documents = _documents(tenant_id, document_id, tags, self._access)
        if documents is None:
            return {}
        total = (await self._call(self._client.count(self._collection, count_filter=documents, exact=True))).count
        if not total:
            return {}
        facets = await self._call(
            self._client.facet(self._collection, "document_id", facet_filter=documents, limit=total, exact=True)
        )
        return {str(hit.value): int(hit.count) for hit in facets.hits}

    async def _documents(self, tenant_id: str, counts: dict[str, int], ids: Sequence[str]) -> list[StoredDocument]:
        records = await self._call(
            self._client.retrieve(
                self._collection,
                [str(point_id(tenant_id, document_id, 0)) for document_id in ids],
                with_payload=list(DOCUMENT_FIELDS),
                with_vectors=False,
            )
        )
        first = {str((r.payload or {}).get("document_id")): r.payload for r in records}
        return [stored_document(document_id, counts[document_id], first.get(document_id)) for document_id in ids]

    def _point(self, indexed: IndexedChunk) -> m.PointStruct:
        chunk = indexed.chunk
        indices, values = self._sparse.document(indexed_text(chunk))
        return m.PointStruct(
            id=str(point_id(chunk.tenant_id, chunk.document_id, chunk.chunk_index)),
            vector={DENSE: [float(x) for x in indexed.dense], SPARSE: m.SparseVector(indices=indices, values=values)},
            payload=payload(chunk, indexed.source, indexed.metadata),
        )

    # -- the stored terms' analyser version (in the collection's metadata), and their rewrite (see stored_terms) -

    async def analyser_version(self) -> int:
        info = await self._call(self._client.get_collection(self._collection))
        marker = (info.config.metadata or {}).get(MARKER)
        chunks = 0 if marker is not None else await self.count()
        version = recorded_version(marker, chunks)
        if version is None:  # empty: what is written from now on is the current analyser's
            await self.record_analyser_version(ANALYSER_VERSION)
            version = ANALYSER_VERSION
        return version

    async def record_analyser_version(self, version: int) -> None:
        """Records `version` in the collection's metadata (a server before Qdrant 1.16 does not keep it: refused)."""
        await self._call(self._client.update_collection(self._collection, metadata={MARKER: version}))
        info = await self._call(self._client.get_collection(self._collection))
        if (info.config.metadata or {}).get(MARKER) != version:
            raise RetrievalUnavailable(
                f"the Qdrant server did not keep the metadata of collection {self._collection!r}, where ragsvc records "
                "its analyser version (collection metadata needs Qdrant 1.16 or later)"
            )

    async def stored_terms(self, start: str | None, limit: int) -> TermsPage:
        records, next_start = await self._call(
            self._client.scroll(self._collection, limit=limit, offset=start, with_payload=FIELDS, with_vectors=False)
        )
        return TermsPage([StoredTerms.of(r.id, r.payload) for r in records], None if next_start is None else str(next_start))

    async def rewrite_stored(self, analyses: Mapping[str, Analysed]) -> None:
        """One batch of payload operations: each point's terms and reading set (a reading None deleted)."""
        operations: list[m.UpdateOperation] = []
        for point, analysis in analyses.items():
            fields: dict[str, Any] = {TERMS_FIELD: analysis.terms}
            if analysis.reading is not None:
                fields[READING_FIELD] = analysis.reading
            else:
                operations.append(m.DeletePayloadOperation(delete_payload=m.DeletePayload(keys=[READING_FIELD], points=[point])))
            operations.append(m.SetPayloadOperation(set_payload=m.SetPayload(payload=fields, points=[point])))
        async with self._write_lock:
            await self._call(self._client.batch_update_points(self._collection, operations, wait=True))


def _dense_of(point: m.ScoredPoint) -> list[float]:
    vector: Any = point.vector
    return list(vector[DENSE] if isinstance(vector, dict) else vector)


def _match(key: str, value: str) -> m.FieldCondition:
    return m.FieldCondition(key=key, match=m.MatchValue(value=value))


def _shown(tags: Collection[str], access: AccessPolicy) -> m.Filter | None:
    """The same condition as the embedded engine's (edge._shown), in qdrant-client's models."""
    visible: list[Any] = []
    if access.untagged_visible:
        visible.append(m.IsEmptyCondition(is_empty=m.PayloadField(key="tags")))
    if tags:
        visible.append(m.FieldCondition(key="tags", match=m.MatchAny(any=sorted(tags))))
    return m.Filter(should=visible) if visible else None


def _documents(tenant_id: str, document_id: str | None, tags: Collection[str] | None, access: AccessPolicy) -> m.Filter | None:
    """The same filter as the embedded engine's (edge._documents), in qdrant-client's models."""
    must: list[Any] = [_match(TENANT_FIELD, tenant_id)]
    if document_id is not None:
        must.append(_match("document_id", document_id))
    if tags is not None:
        shown = _shown(tags, access)
        if shown is None:
            return None
        must.append(shown)
    return m.Filter(must=must)


class _Filters:
    """qdrant-client's models for `layout.render`."""

    def match(self, path: str, values: Sequence[str]) -> Any:
        return m.FieldCondition(key=path, match=m.MatchAny(any=list(values)))

    def range(self, path: str, bounds: Mapping[str, float | str], *, timestamp: bool) -> Any:
        if timestamp:
            return m.FieldCondition(key=path, range=m.DatetimeRange(**{k: str(v) for k, v in bounds.items()}))
        return m.FieldCondition(key=path, range=m.Range(**{k: float(v) for k, v in bounds.items()}))

    def all(self, parts: Sequence[Any]) -> Any:
        return m.Filter(must=list(parts))

    def any(self, parts: Sequence[Any]) -> Any:
        return m.Filter(should=list(parts))

    def none(self, part: Any) -> Any:
        return m.Filter(must_not=[part])


def _visibility(query: RetrievalQuery, access: AccessPolicy) -> m.Filter | None:
    """The same filter as the embedded engine's (edge._visibility), in qdrant-client's models."""
    shown = _shown(query.user_tags, access)
    if shown is None:
        return None
    must: list[Any] = [_match(TENANT_FIELD, query.tenant_id), shown]
    must.extend(
        m.FieldCondition(key=key, match=m.MatchAny(any=list(values))) for key, values in metadata_constraints(query.filters)
    )
    if (where := resolved_where(query.filters)) is not None:
        must.append(render(where, _Filters()))
    return m.Filter(must=must)
