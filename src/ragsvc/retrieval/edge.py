"""The embedded VectorEngine: qdrant-edge, Qdrant's Rust engine in-process, one shard holding every tenant.

The collection layout and query semantics are those of `layout` (shared with the Qdrant server engine).

HNSW in the background. qdrant-edge appends new points to a plain segment, searched by brute force (fast enough
into the 100k range: see bench/retrieval.py). Its HNSW graphs are built only by `EdgeShard.optimize()`, and that
call holds the GIL for its whole duration (measured: 6.2 s for 20k points of 384 dimensions, during which no other
Python thread and no event loop runs at all), so running it in a worker thread would stall every query. Instead,
after `index_after_points` new points (and `index_delay_s` without further writes), the engine

1. flushes and copies the shard directory (writes wait for the copy; queries go on),
2. optimizes the copy in a child process at low priority (`python -m ragsvc.retrieval.edge_optimize`), while the
   live shard keeps serving queries and writes; writes made meanwhile are also kept in a journal,
3. swaps the optimized copy in: closes the live shard, renames the directories, loads the copy and replays the
   journal. Only this step excludes queries (they wait for it: the load, ~0.2 s at 20k points, and the replay).

A crash at any point leaves a loadable shard: `open` finishes or undoes an interrupted swap and drops a stale copy.

Queries also hold the GIL inside qdrant-edge, so they run on the event loop's thread (a worker thread would block
the loop just the same, plus a thread hop); writes, which can be long, run in a worker thread. bench/retrieval.py
has the numbers (100k chunks: ~5 ms per hybrid filtered query by brute force; the HNSW build ~100 s of a child's CPU).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import json
import logging
import os
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import qdrant_edge as qe

from ragsvc.access import AccessPolicy
from ragsvc.domain import IndexStats, RetrievalQuery, StoredDocument, TermCounts
from ragsvc.errors import RagError, RetrievalUnavailable
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
    fused_ids,
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
)
from ragsvc.retrieval.stored_terms import FIELDS, MARKER, StoredTerms, TermsPage, recorded_version
from ragsvc.retrieval.term_table import TermRow, TermTable

_T = TypeVar("_T")
_log = logging.getLogger(__name__)

_EDGE_VERSION = importlib.metadata.version("qdrant-edge-py")
BUILDING_SUFFIX = ".indexing"  # the copy being optimized
TERM_COUNTS_KEPT = 50_000  # document frequencies kept between writes (see _TermCounts)
SCROLL_PAGE = 256  # points per page when the term table reads the shard (the engine holds the GIL for a page)
_TERM_ROW_FIELDS = [TENANT_FIELD, "tags", TERMS_FIELD]
# The index terms, stored as one string of terms separated by spaces (`_terms_as_text`), are indexed as text split
# at spaces only, each term kept as it is: a term is matched whole (MatchText), exactly as a keyword would be, and
# a list of terms (the form older versions stored) is indexed the same way. A result's payload is read whole by
# the engine, whatever fields a query returns, and one string reads at a fraction of the cost of ~70 (measured at
# 10k points: 0.14 ms of a 1.1 ms query; layout's docstring).
TERMS_INDEX = qe.TextIndexParams(
    tokenizer=qe.TokenizerType.Whitespace, lowercase=False, ascii_folding=False, phrase_matching=False
)
PREVIOUS_SUFFIX = ".previous"  # the replaced shard, until it is deleted
# The payload index of a metadata key's type (booleans are stored as keywords: see layout).
_META_INDEXES = {
    MetadataType.STRING: qe.PayloadSchemaType.Keyword,
    MetadataType.NUMBER: qe.PayloadSchemaType.Float,
    MetadataType.BOOL: qe.PayloadSchemaType.Keyword,
    MetadataType.TIMESTAMP: qe.PayloadSchemaType.Datetime,
}
# In the shard's directory, so that it is copied, swapped and given to workers with the shard: the analyser version
# of its stored terms (see stored_terms).
ANALYSER_FILE = "ragsvc-analyser.json"


@dataclass(frozen=True, slots=True)
class IndexBuild:
    """What one background index build did."""

    points: int
    copy_s: float
    optimize_s: float
    swap_s: float
    replayed_writes: int


class _TermCounts:
    """Document frequencies already counted for questions with metadata filters, or in a tenant the term table
    does not hold yet (it answers the others), per visibility (tenant, user tags, metadata filters) and term
    (None: the chunks with any term). An entry is current while `version`, which every write bumps once it is
    done, is the one it was counted at. This process is the shard's only writer (it holds the WAL lock), so no
    count can change without a bump."""

    def __init__(self, capacity: int = TERM_COUNTS_KEPT) -> None:
        self.version = 0
        self._capacity = capacity
        self._entries: dict[tuple[Any, str | None], tuple[int, int]] = {}

    def get(self, seen: Any, term: str | None) -> int | None:
        found = self._entries.get((seen, term))
        return found[1] if found is not None and found[0] == self.version else None

    def put(self, seen: Any, term: str | None, version: int, count: int) -> None:
        """Keep `count`, made when the version was `version` (read before counting)."""
        if len(self._entries) >= self._capacity:
            self._entries.clear()
        self._entries[(seen, term)] = (version, count)


class _Gate:
    """Many holders of the shared side at once (queries, writes), or one holder of the exclusive side (the swap)."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._shared = 0
        self._exclusive = False

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with self._condition:
            self._condition.wait_for(lambda: not self._exclusive)
            self._shared += 1
        try:
            yield
        finally:
            with self._condition:
                self._shared -= 1
                self._condition.notify_all()

    @property
    def exclusive_held(self) -> bool:
        return self._exclusive

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._condition:
            self._condition.wait_for(lambda: not self._exclusive)
            self._exclusive = True
            self._condition.wait_for(lambda: self._shared == 0)
        try:
            yield
        finally:
            with self._condition:
                self._exclusive = False
                self._condition.notify_all()


def shard_config(dimension: int, search_threads: int = 0) -> qe.EdgeConfig:
    """The shard's vectors, and the threads of its search pool (`search_threads`; 0: one per CPU). One thread
    searches a query's prefetches in turn instead of handing them to several threads that wake for it; on a shard
    of one segment that was 0.1-0.25 ms a query faster on 2 cores (RAG_EDGE_SEARCH_THREADS). The shard keeps the
    count it was last opened with (edge_config.json), so it is always given."""
    return qe.EdgeConfig(
        vectors={DENSE: qe.EdgeVectorParams(size=dimension, distance=qe.Distance.Cosine)},
        sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        max_search_threads=search_threads or os.cpu_count() or 1,
    )


class EdgeEngine:
    """Owns one qdrant-edge shard directory (a second opener fails on the WAL lock until close())."""

    def __init__(
        self,
        path: Path,
        shard: qe.EdgeShard,
        config: qe.EdgeConfig,
        *,
        access: AccessPolicy = AccessPolicy(),
        index_after_points: int = 0,
        index_delay_s: float = 2.0,
    ) -> None:
        """Prefer `open()`. `index_after_points` 0 disables background index builds."""
        self._path = path
        self._shard = shard
        self._config = config
        self._access = access
        self._sparse = SparseEncoder()
        self._index_after_points = index_after_points
        self._index_delay_s = index_delay_s
        # qdrant-edge calls from several threads are safe; the write lock makes each multi-step write atomic with
        # respect to other writes, the gate keeps every shard call out of the way of a swap.
        self._write_lock = threading.Lock()
        self._gate = _Gate()
        self._closed = False
        self._journal: list[tuple[Callable[..., Any], tuple[Any, ...]]] | None = None
        self._counted = _TermCounts()
        # A tenant's rows are loaded in the background when its statistics are first asked for (the engine counts
        # them until then), then kept in step: see _write.
        self._terms = TermTable()
        self._loading: dict[str, asyncio.Task[None]] = {}
        self._unindexed = 0
        self._due = 0.0
        self._scheduler: asyncio.Task[None] | None = None
        self._building: asyncio.Task[IndexBuild | None] | None = None
        self._child: asyncio.subprocess.Process | None = None
        self.builds: list[IndexBuild] = []

    @classmethod
    def open(
        cls,
        path: Path,
        dimension: int = 384,
        *,
        access: AccessPolicy = AccessPolicy(),
        index_after_points: int = 0,
        index_delay_s: float = 2.0,
        search_threads: int = 0,
    ) -> EdgeEngine:
        """Load the shard at `path`, or create it there when there is none, and make sure of its payload indexes.
        `search_threads`: see `shard_config`."""
        config = shard_config(dimension, search_threads)
        previous = path.with_name(path.name + PREVIOUS_SUFFIX)
        try:
            if not path.exists() and previous.exists():
                os.rename(previous, path)  # a crash between a swap's two renames: the previous shard is whole
            exists = (path / "edge_config.json").exists()
            shard = qe.EdgeShard.load(str(path), config) if exists else qe.EdgeShard.create(str(path), config)
        except Exception as exc:
            if "WouldBlock" in str(exc):  # the WAL's lock: another process has the shard open
                raise RetrievalUnavailable(
                    f"the vector store at {path} is in use by another process (another `ragsvc serve` on the same RAG_DATA_DIR?)"
                ) from exc
            raise RetrievalUnavailable(f"cannot open the vector store at {path}: {exc}") from exc
        # Only now, owning the shard (its WAL lock), drop what an interrupted build or swap left behind.
        shutil.rmtree(previous, ignore_errors=True)
        shutil.rmtree(path.with_name(path.name + BUILDING_SUFFIX), ignore_errors=True)
        try:
            # Creating an existing index is a no-op, so shards made by an older version gain new indexes.
            # A shard of an older version had its terms under a keyword index: the text index replaces it.
            shard.update(qe.UpdateOperation.create_field_index(TENANT_FIELD, qe.KeywordIndexParams(is_tenant=True)))
            for name in KEYWORD_FIELDS:
                index = TERMS_INDEX if name == TERMS_FIELD else qe.PayloadSchemaType.Keyword
                shard.update(qe.UpdateOperation.create_field_index(name, index))
            if not exists:
                write_analyser_version(path, ANALYSER_VERSION)
        except Exception as exc:
            shard.close()
            raise RetrievalUnavailable(f"cannot index the vector store at {path}: {exc}") from exc
        return cls(path, shard, config, access=access, index_after_points=index_after_points, index_delay_s=index_delay_s)

    # -- the VectorEngine protocol --------------------------------------------------------------------------

    @property
    def access(self) -> AccessPolicy:
        return self._access

    async def replace_document(self, tenant_id: str, document_id: str, chunks: Sequence[IndexedChunk]) -> None:
        owner = (tenant_id, document_id)
        strangers = [c.chunk.source_id for c in chunks if (c.chunk.tenant_id, c.chunk.document_id) != owner]
        if strangers:
            raise ValueError(f"chunks {strangers} are not part of document {document_id!r} of tenant {tenant_id!r}")
        # Building the points (BM25 terms, payloads) is CPU work: ~0.4 ms a chunk, off the event loop.
        points = await self._run(lambda: [self._point(c) for c in chunks])
        await self._run(self._write, self._replace, tenant_id, document_id, points)
        self._unindexed += len(points)
        self._maybe_schedule_build()

    async def ensure_metadata_index(self, key: str, kind: MetadataType) -> None:
        await self._run(self._create_index, meta_path(key, kind), _META_INDEXES[kind])

    async def delete_document(self, tenant_id: str, document_id: str, *, tags: Collection[str] | None = None) -> int:
        return await self._run(self._write, self._delete, tenant_id, document_id, _frozen(tags))

    async def query(self, query: RetrievalQuery, dense: Sequence[float], limit: int) -> list[Candidate]:
        return await self._run_read(self._query, query, dense, limit)

    async def term_counts(self, query: RetrievalQuery, terms: Sequence[str]) -> TermCounts:
        if not self._terms.holds(query.tenant_id) and query.tenant_id not in self._loading:
            self._loading[query.tenant_id] = asyncio.get_running_loop().create_task(self._load_terms(query.tenant_id))
        return await self._run_read(self._term_counts, query, terms)

    async def count(self, tenant_id: str | None = None) -> int:
        tenant = None if tenant_id is None else qe.Filter(must=[_match(TENANT_FIELD, tenant_id)])
        return await self._run(self._read, lambda: self._shard.count(qe.CountRequest(exact=True, filter=tenant)))

    async def list_documents(
        self, tenant_id: str, *, after: str = "", limit: int, tags: Collection[str] | None = None
    ) -> DocumentPage:
        return await self._run(self._read, self._list_documents, tenant_id, after, limit, _frozen(tags))

    async def get_document(
        self, tenant_id: str, document_id: str, *, tags: Collection[str] | None = None
    ) -> StoredDocument | None:
        return await self._run(self._read, self._get_document, tenant_id, document_id, _frozen(tags))

    async def stats(self, tenant_id: str, *, tags: Collection[str] | None = None) -> IndexStats:
        return await self._run(self._read, self._stats, tenant_id, _frozen(tags))

    async def check_health(self) -> None:
        await self._run(self._read, lambda: self._shard.count(qe.CountRequest(exact=False)))

    async def close(self) -> None:
        """Stops a background build, flushes and releases the shard (and its directory lock); later calls are
        no-ops."""
        if self._closed:
            return
        for task in (self._scheduler, self._building, *self._loading.values()):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if not self._closed:
            await self._run(self._close)

    # -- background index builds -----------------------------------------------------------------------------

    @property
    def indexing(self) -> bool:
        """True while a background index build is running."""
        return self._building is not None and not self._building.done()

    async def build_index(self) -> IndexBuild | None:
        """Build the HNSW index now, in the background as described above, and wait for it (None when the
        engine closed meanwhile). Queries and writes go on while it runs."""
        if self._building is None or self._building.done():
            self._building = asyncio.get_running_loop().create_task(self._build())
        return await asyncio.shield(self._building)

    def _maybe_schedule_build(self) -> None:
        if not self._index_after_points or self._unindexed < self._index_after_points:
            return
        loop = asyncio.get_running_loop()
        self._due = loop.time() + self._index_delay_s  # each further write pushes the build back
        if self._scheduler is None or self._scheduler.done():
            self._scheduler = loop.create_task(self._build_when_quiet())

    async def _build_when_quiet(self) -> None:
        loop = asyncio.get_running_loop()
        while (wait := self._due - loop.time()) > 0:  # noqa: ASYNC110 - each write moves the due time back
            await asyncio.sleep(wait)
        if self._building is not None and not self._building.done():
            await asyncio.shield(self._building)  # writes made during it count towards the next build
            if self._unindexed < self._index_after_points:
                return
        try:
            await self.build_index()
        except RetrievalUnavailable as exc:
            _log.warning("background index build failed, the engine keeps searching by brute force: %s", exc)

    async def _build(self) -> IndexBuild | None:
        building = self._path.with_name(self._path.name + BUILDING_SUFFIX)
        started = time.perf_counter()
        snapshot = asyncio.ensure_future(self._run(self._snapshot, building))
        try:
            points = await asyncio.shield(snapshot)
            copied = time.perf_counter()
            self._child = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "ragsvc.retrieval.edge_optimize",
                str(building),
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
            _, stderr = await self._child.communicate()
            if self._child.returncode != 0:
                detail = stderr.decode(errors="replace")[-500:]
                raise RetrievalUnavailable(f"the index build exited with {self._child.returncode}: {detail}")
        except BaseException:
            if self._child is not None and self._child.returncode is None:
                self._child.kill()
                await self._child.wait()
            await asyncio.wait([snapshot])  # a copy still running in its thread must end before it is removed
            self._journal = None
            await asyncio.to_thread(shutil.rmtree, building, True)
            raise
        finally:
            self._child = None
        optimized = time.perf_counter()
        # Once started, the swap runs to its end even when the build is cancelled (close() waits for it).
        swap = asyncio.ensure_future(self._run(self._swap, building))
        try:
            replayed = await asyncio.shield(swap)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await swap
            raise
        build = IndexBuild(points, copied - started, optimized - copied, time.perf_counter() - optimized, replayed)
        self.builds.append(build)
        _log.info("built the vector index in the background: %s", build)
        return build

    def _snapshot(self, building: Path) -> int:
        """Copies the flushed shard to `building` and starts journaling writes (writes wait, queries go on)."""
        with self._gate.shared(), self._write_lock:
            if self._closed:
                raise RetrievalUnavailable("the vector store is closed")
            shutil.rmtree(building, ignore_errors=True)
            self._shard.flush()
            shutil.copytree(self._path, building, copy_function=_copy_sparse)
            self._journal = []
            self._unindexed = 0
            return int(self._shard.count(qe.CountRequest(exact=True)))

    def _swap(self, building: Path) -> int:
        """Replaces the live shard with the optimized copy and replays the writes made since the copy."""
        previous = self._path.with_name(self._path.name + PREVIOUS_SUFFIX)
        with self._gate.exclusive(), self._write_lock:
            if self._closed:
                raise RetrievalUnavailable("the vector store is closed")
            journal, self._journal = self._journal or [], None
            self._shard.close()  # its WAL holds every write, should it have to be reopened below
            shutil.rmtree(previous, ignore_errors=True)
            os.rename(self._path, previous)
            os.rename(building, self._path)
            try:
                self._shard = qe.EdgeShard.load(str(self._path), self._config)
            except Exception:  # noqa: BLE001 - whatever failed, the previous shard is put back
                _log.exception("cannot load the optimized shard; keeping the previous one")
                shutil.rmtree(self._path, ignore_errors=True)
                os.rename(previous, self._path)
                self._shard = qe.EdgeShard.load(str(self._path), self._config)
                return 0  # the previous shard already holds every write
            for write, args in journal:
                write(*args)
            self._warm_up()
        shutil.rmtree(previous, ignore_errors=True)
        return len(journal)

    def _warm_up(self) -> None:
        """A dense and a sparse search on the freshly loaded shard, so that its first real queries do not pay for
        loading its indexes (measured at 100k points: 15-30 ms for the first queries after a swap otherwise)."""
        info = self._shard.info()
        if not info.points_count:
            return
        dimension = self._config.vectors[DENSE].size
        for query in (
            qe.Query.Nearest([1.0] * dimension, using=DENSE),
            qe.Query.Nearest(self._sparse.edge_query("warm up"), using=SPARSE),
        ):
            self._shard.query(qe.QueryRequest(limit=1, query=query, with_payload=True, with_vector=[DENSE]))

    # -- shard access ----------------------------------------------------------------------------------------

    async def _run(self, call: Callable[..., _T], *args: Any) -> _T:
        """Runs a blocking engine call in a worker thread; any engine failure becomes RetrievalUnavailable."""
        if self._closed:
            raise RetrievalUnavailable("the vector store is closed")
        try:
            return await asyncio.to_thread(call, *args)
        except RagError:  # RetrievalUnavailable, or IndexOutdated for a result without a reading (candidates_from)
            raise
        except Exception as exc:
            raise RetrievalUnavailable(f"vector store error: {exc}") from exc

    async def _run_read(self, call: Callable[..., _T], *args: Any) -> _T:
        """Runs a query on the event loop's own thread. qdrant-edge holds the GIL for the whole call (measured),
        so a worker thread would block the loop just the same and add its hop (~0.35 ms); only while a swap
        holds the gate does the call wait in a worker thread instead."""
        if self._closed:
            raise RetrievalUnavailable("the vector store is closed")
        if self._gate.exclusive_held:
            return await self._run(self._read, call, *args)
        try:
            return self._read(call, *args)
        except RagError:  # RetrievalUnavailable, or IndexOutdated for a result without a reading (candidates_from)
            raise
        except Exception as exc:
            raise RetrievalUnavailable(f"vector store error: {exc}") from exc

    def _read(self, call: Callable[..., _T], *args: Any) -> _T:
        with self._gate.shared():
            if self._closed:
                raise RetrievalUnavailable("the vector store is closed")
            return call(*args)

    def _write(self, call: Callable[..., _T], tenant_id: str, document_id: str, *args: Any) -> _T:
        """`call(tenant_id, document_id, *args)`, a write of one document's points; when the term table holds
        the tenant, it is moved from the document's chunks as they were to the chunks as they are."""
        with self._gate.shared(), self._write_lock:
            if self._closed:
                raise RetrievalUnavailable("the vector store is closed")
            counted = self._terms.holds(tenant_id)
            document = qe.Filter(must=[_match(TENANT_FIELD, tenant_id), _match("document_id", document_id)])
            before = self._term_rows(document) if counted else []
            try:
                result = call(tenant_id, document_id, *args)
            finally:  # a write that failed half-way changed what it changed
                if counted:
                    self._terms.remove(before)
                    self._terms.add(self._term_rows(document))
                self._counted.version += 1  # after the write: a count made before it is never kept as current
            if self._journal is not None:  # a background build copied the shard: replay this after its swap
                self._journal.append((call, (tenant_id, document_id, *args)))
            return result

    async def _load_terms(self, tenant_id: str) -> None:
        """Load the tenant's rows into the term table, in a worker thread under the write lock (no write can slip
        between); a failed load is logged, and the engine goes on counting for the tenant."""

        def load() -> None:
            with self._gate.shared(), self._write_lock:
                if not self._closed:
                    self._terms.load(tenant_id, self._term_rows(qe.Filter(must=[_match(TENANT_FIELD, tenant_id)])))

        try:
            await self._run(load)
        except RetrievalUnavailable as exc:
            _log.warning("cannot load the term table of tenant %r, counting its terms in the engine: %s", tenant_id, exc)

    def _term_rows(self, where: qe.Filter) -> list[TermRow]:
        """The term table's rows of the points `where` selects."""
        rows = []
        offset = None
        while True:
            records, offset = self._shard.scroll(qe.ScrollRequest(
                offset=offset, limit=SCROLL_PAGE, filter=where, with_payload=qe.PayloadSelector.Include(_TERM_ROW_FIELDS),
                with_vector=False,
            ))  # fmt: skip
            for record in records:
                data = record.payload or {}
                rows.append(TermRow(str(data.get(TENANT_FIELD, "")), frozenset(data.get("tags") or ()),
                                    _stored_terms(data.get(TERMS_FIELD))))  # fmt: skip
            if offset is None:
                return rows

    def _create_index(self, path: str, schema: qe.PayloadSchemaType) -> None:
        """Creates a payload index (replayed after a background build's swap, like a write)."""
        with self._gate.shared(), self._write_lock:
            if self._closed:
                raise RetrievalUnavailable("the vector store is closed")
            self._shard.update(qe.UpdateOperation.create_field_index(path, schema))
            if self._journal is not None:
                self._journal.append((self._shard_index, (path, schema)))

    def _shard_index(self, path: str, schema: qe.PayloadSchemaType) -> None:
        self._shard.update(qe.UpdateOperation.create_field_index(path, schema))

    def _replace(self, tenant_id: str, document_id: str, points: list[qe.Point]) -> None:
        """Upserts the new chunks, then deletes the document's other points: queries never see it missing."""
        stale = qe.Filter(
            must=[_match(TENANT_FIELD, tenant_id), _match("document_id", document_id)],
            must_not=[qe.HasIdCondition({p.id for p in points})] if points else None,
        )
        if points:
            self._shard.update(qe.UpdateOperation.upsert_points(points))
        self._shard.update(qe.UpdateOperation.delete_points_by_filter(stale))

    def _delete(self, tenant_id: str, document_id: str, tags: frozenset[str] | None) -> int:
        document = _documents(tenant_id, document_id, tags, self._access)
        if document is None:
            return 0
        removed = int(self._shard.count(qe.CountRequest(exact=True, filter=document)))
        if removed:
            self._shard.update(qe.UpdateOperation.delete_points_by_filter(document))
        return removed

    def _chunk_counts(self, tenant_id: str, document_id: str | None = None, tags: frozenset[str] | None = None) -> dict[str, int]:
        """Chunks per document of the tenant (of one document when given) that `tags` show."""
        documents = _documents(tenant_id, document_id, tags, self._access)
        if documents is None:
            return {}
        total = int(self._shard.count(qe.CountRequest(exact=True, filter=documents)))
        if not total:
            return {}
        hits = self._shard.facet(qe.FacetRequest("document_id", limit=total, exact=True, filter=documents))
        return {str(hit.value): int(hit.count) for hit in hits}

    def _documents(self, tenant_id: str, counts: dict[str, int], ids: Sequence[str]) -> list[StoredDocument]:
        records = self._shard.retrieve(
            [point_id(tenant_id, document_id, 0) for document_id in ids],
            with_payload=qe.PayloadSelector.Include(list(DOCUMENT_FIELDS)),
            with_vector=False,
        )
        first = {str((r.payload or {}).get("document_id")): r.payload for r in records}
        return [stored_document(document_id, counts[document_id], first.get(document_id)) for document_id in ids]

    def _list_documents(self, tenant_id: str, after: str, limit: int, tags: frozenset[str] | None) -> DocumentPage:
        counts = self._chunk_counts(tenant_id, tags=tags)
        ids, next_after = page_after(counts, after, limit)
        return DocumentPage(self._documents(tenant_id, counts, ids), next_after)

    def _get_document(self, tenant_id: str, document_id: str, tags: frozenset[str] | None) -> StoredDocument | None:
        counts = self._chunk_counts(tenant_id, document_id, tags)
        return self._documents(tenant_id, counts, [document_id])[0] if counts else None

    def _stats(self, tenant_id: str, tags: frozenset[str] | None) -> IndexStats:
        counts = self._chunk_counts(tenant_id, tags=tags)
        documents = self._documents(tenant_id, counts, sorted(counts))
        return IndexStats(
            documents=len(documents),
            chunks=sum(counts.values()),
            content_bytes=sum(d.source.content_bytes for d in documents if d.source is not None),
            engine=f"embedded qdrant-edge {_EDGE_VERSION}",
        )

    def _point(self, indexed: IndexedChunk) -> qe.Point:
        chunk = indexed.chunk
        vectors: dict[str, list[float] | qe.SparseVector | list[list[float]]] = {
            DENSE: [float(x) for x in indexed.dense],
            SPARSE: self._sparse.edge_document(indexed_text(chunk)),
        }
        point = point_id(chunk.tenant_id, chunk.document_id, chunk.chunk_index)
        return qe.Point(point, vectors, _terms_as_text(payload(chunk, indexed.source, indexed.metadata)))

    def _query(self, query: RetrievalQuery, dense: Sequence[float], limit: int) -> list[Candidate]:
        visible = _visibility(query, self._access)
        if visible is None or limit <= 0:
            return []
        vectors = {name: self._query_vector(name, query, dense) for name in searched_vectors(query.search_mode)}
        # Each leg's best `limit` and their scores; then each leg scores, by their ids, the candidates only another
        # leg found (scoring the few found costs less than a second search would), `fused_ids` orders them, and the
        # chosen are read with their chunks and dense vectors. A leg's score of a point is the same whichever of
        # the two calls made it; reading only the chosen spares the engine reading (and the binding converting)
        # the payloads and vectors of the candidates fusion drops, about half of them.
        found = self._shard.query_batch(qe.QueryBatchRequest([
            qe.QueryRequest(limit=limit, query=qe.Query.Nearest(vector, using=name), filter=visible)
            for name, vector in vectors.items()
        ]))  # fmt: skip
        legs = [{point.id: point.score for point in points} for points in found]
        candidates = set().union(*legs)
        if not candidates:
            return []
        unscored = [(leg, name, candidates - leg.keys()) for leg, name in zip(legs, vectors, strict=True)]
        unscored = [(leg, name, ids) for leg, name, ids in unscored if ids]
        if unscored:
            scored = self._shard.query_batch(qe.QueryBatchRequest([
                qe.QueryRequest(limit=len(ids), query=qe.Query.Nearest(vectors[name], using=name),
                                filter=qe.Filter(must=[qe.HasIdCondition(ids)]))
                for _, name, ids in unscored
            ]))  # fmt: skip
            for (leg, _, _), leg_points in zip(unscored, scored, strict=True):
                leg.update((point.id, point.score) for point in leg_points)
        chosen = fused_ids(list(zip(vectors, legs, strict=True)), limit)
        # By id, not through the query's filter again: as when the legs score by id, a point written between the
        # calls is read as it now is (deleted: left out).
        records = {r.id: r for r in self._shard.retrieve(chosen, with_payload=RETURNED_FIELDS, with_vector=[DENSE])}
        points = [records[point] for point in chosen if point in records]
        if not points:
            return []
        # Cosine distance: the engine stores every vector normalised on upload (max |norm - 1| of the rows it
        # returned: 0.0), so its rows are unit rows as they come (unit_rows took 0.05 ms of 15 rows).
        stored = _dense_rows(points)
        return candidates_from([p.payload or {} for p in points], stored, cosines(stored, dense), query, self._access)

    def _query_vector(self, name: str, query: RetrievalQuery, dense: Sequence[float]) -> list[float] | qe.SparseVector:
        return list(dense) if name == DENSE else self._sparse.edge_query(query.text)

    def _term_counts(self, query: RetrievalQuery, terms: Sequence[str]) -> TermCounts:
        constraints = (tuple(metadata_constraints(query.filters)), resolved_where(query.filters))
        if constraints == ((), None) and self._terms.holds(query.tenant_id):
            return self._terms.counts(query.tenant_id, query.user_tags, self._access, terms)
        visible = _visibility(query, self._access)
        if visible is None:
            return TermCounts(0, dict.fromkeys(terms, 0))
        seen = (query.tenant_id, frozenset(query.user_tags), constraints)
        version = self._counted.version

        def count(term: str | None, condition: Any) -> int:
            found = self._counted.get(seen, term)
            if found is None:
                request = qe.CountRequest(exact=True, filter=qe.Filter(must=[visible, condition]))
                found = int(self._shard.count(request))
                self._counted.put(seen, term, version, found)
            return found

        indexed = count(None, qe.Filter(must_not=[qe.IsEmptyCondition(TERMS_FIELD)]))
        return TermCounts(indexed, {term: count(term, _has_term(term)) if indexed else 0 for term in terms})

    def _close(self) -> None:
        with self._gate.exclusive(), self._write_lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._shard.flush()
            finally:
                self._shard.close()

    # -- the stored terms' analyser version, and their rewrite (see stored_terms) ----------------------------

    async def analyser_version(self) -> int:
        return await self._run(self._analyser_version)

    async def record_analyser_version(self, version: int) -> None:
        await self._run(self._record_analyser_version, version)

    async def stored_terms(self, start: str | None, limit: int) -> TermsPage:
        return await self._run(self._read, self._stored_terms, start, limit)

    async def rewrite_stored(self, analyses: Mapping[str, Analysed]) -> None:
        await self._run(self._rewrite_stored, dict(analyses))

    def _analyser_version(self) -> int:
        with self._gate.shared(), self._write_lock:
            if self._closed:
                raise RetrievalUnavailable("the vector store is closed")
            chunks = int(self._shard.count(qe.CountRequest(exact=True)))
            version = recorded_version(read_analyser_version(self._path), chunks)
            if version is None:  # empty: what is written from now on is the current analyser's
                self._mark_analyser(ANALYSER_VERSION)
                version = ANALYSER_VERSION
            return version

    def _record_analyser_version(self, version: int) -> None:
        with self._gate.shared(), self._write_lock:
            if self._closed:
                raise RetrievalUnavailable("the vector store is closed")
            self._mark_analyser(version)

    def _mark_analyser(self, version: int) -> None:
        """Records the version once the terms it speaks for are flushed; after a background build's swap, again."""
        self._shard.flush()
        write_analyser_version(self._path, version)
        if self._journal is not None:
            self._journal.append((write_analyser_version, (self._path, version)))

    def _stored_terms(self, start: str | None, limit: int) -> TermsPage:
        records, next_start = self._shard.scroll(qe.ScrollRequest(
            offset=None if start is None else uuid.UUID(start), limit=limit,
            with_payload=qe.PayloadSelector.Include(FIELDS), with_vector=False,
        ))  # fmt: skip
        return TermsPage([StoredTerms.of(r.id, r.payload) for r in records], None if next_start is None else str(next_start))

    def _rewrite_stored(self, analyses: dict[str, Analysed]) -> None:
        """Sets the points' terms and readings, keeping the term table in step (as `_write` does)."""
        with self._gate.shared(), self._write_lock:
            if self._closed:
                raise RetrievalUnavailable("the vector store is closed")
            points = qe.Filter(must=[qe.HasIdCondition({uuid.UUID(point) for point in analyses})])
            before = self._term_rows(points)
            try:
                self._set_analysed(analyses)
            finally:
                self._terms.remove(before)
                self._terms.add(self._term_rows(points))
                self._counted.version += 1
            if self._journal is not None:
                self._journal.append((self._set_analysed, (analyses,)))

    def _set_analysed(self, analyses: dict[str, Analysed]) -> None:
        """Each point's terms and reading in the form `_write` stores them (`_terms_as_text`); a point without terms,
        or without a reading, loses the field."""
        for point, analysis in analyses.items():
            ids: list[int | uuid.UUID | str] = [uuid.UUID(point)]
            fields = _terms_as_text({TERMS_FIELD: analysis.terms})
            if analysis.reading is not None:
                fields[READING_FIELD] = analysis.reading
            if fields:
                self._shard.update(qe.UpdateOperation.set_payload(ids, fields))
            if dropped := [name for name in (TERMS_FIELD, READING_FIELD) if name not in fields]:
                self._shard.update(qe.UpdateOperation.delete_payload(ids, dropped))


def read_analyser_version(path: Path) -> object:
    """What the shard at `path` records as its analyser version (None when nothing)."""
    try:
        return json.loads((path / ANALYSER_FILE).read_text(encoding="utf-8")).get(MARKER)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, AttributeError) as exc:
        raise RetrievalUnavailable(f"cannot read {path / ANALYSER_FILE}: {exc}") from exc


def write_analyser_version(path: Path, version: int) -> None:
    """Records `version` in the shard at `path`, atomically (a new file renamed over the old, both synced)."""
    staged = path / (ANALYSER_FILE + ".new")
    with open(staged, "w", encoding="utf-8") as file:
        json.dump({MARKER: version}, file)
        file.flush()
        os.fsync(file.fileno())
    os.replace(staged, path / ANALYSER_FILE)
    directory = os.open(path, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _copy_sparse(source: str, target: str) -> None:
    """shutil.copy2 that keeps holes: qdrant-edge preallocates its WAL and storage files sparsely (a shard of a few
    thousand points is ~130 MB apparent, ~1 MB on disk), and a plain copy would write every hole out."""
    if not hasattr(os, "SEEK_DATA"):
        shutil.copy2(source, target)
        return
    with open(source, "rb") as reader, open(target, "wb") as writer:
        size = os.fstat(reader.fileno()).st_size
        offset = 0
        while offset < size:
            try:
                data = os.lseek(reader.fileno(), offset, os.SEEK_DATA)
            except OSError:  # ENXIO: only a hole remains
                break
            hole = os.lseek(reader.fileno(), data, os.SEEK_HOLE)
            reader.seek(data)
            writer.seek(data)
            remaining = hole - data
            while remaining:
                block = reader.read(min(remaining, 1 << 20))
                if not block:
                    break
                writer.write(block)
                remaining -= len(block)
            offset = hole
        writer.truncate(size)
    shutil.copystat(source, target)


def _dense_rows(points: Sequence[qe.ScoredPoint | qe.Record]) -> np.ndarray:
    """The stored dense vectors of results asked `with_vector=[DENSE]`, a row each."""
    try:
        return dense_rows([_vectors(point)[DENSE] for point in points])
    except (KeyError, TypeError, ValueError) as exc:
        raise RetrievalUnavailable("the engine returned a result without its dense vector") from exc


def _vectors(point: qe.ScoredPoint | qe.Record) -> Any:
    return point.vector


def _match(key: str, value: str) -> qe.FieldCondition:
    return qe.FieldCondition(key, match=qe.MatchValue(value))


def _terms_as_text(data: dict[str, Any]) -> dict[str, Any]:
    """A point's payload (`layout.payload`) with its index terms as one string, space-separated, and without the
    field when the chunk has none (an empty string is not an empty field: it would count as indexed)."""
    terms = data.pop(TERMS_FIELD, None)
    if terms:
        data[TERMS_FIELD] = " ".join(terms)
    return data


def _stored_terms(value: Any) -> frozenset[str]:
    """The index terms of a stored payload: one string (`_terms_as_text`), or a list (shards of older versions)."""
    if isinstance(value, str):
        return frozenset(value.split())
    return frozenset(value or ())


def _has_term(term: str) -> qe.FieldCondition:
    """The points carrying `term` among their index terms, whichever form they are stored in (`TERMS_INDEX`)."""
    return qe.FieldCondition(TERMS_FIELD, match=qe.MatchText(term))


def _frozen(tags: Collection[str] | None) -> frozenset[str] | None:
    return None if tags is None else frozenset(tags)


def _shown(tags: Collection[str], access: AccessPolicy) -> qe.Filter | None:
    """Chunks sharing a tag with `tags`, and untagged ones when the policy shows them (a caller without tags then
    sees only untagged chunks: access is granted by tags, never by their absence); None when it sees nothing."""
    visible: list[Any] = []
    if access.untagged_visible:
        visible.append(qe.IsEmptyCondition("tags"))
    if tags:
        visible.append(qe.FieldCondition("tags", match=qe.MatchAny(sorted(tags))))
    return qe.Filter(should=visible) if visible else None


def _documents(tenant_id: str, document_id: str | None, tags: frozenset[str] | None, access: AccessPolicy) -> qe.Filter | None:
    """The chunks of the tenant (of one document) that a key holding `tags` (None: any tag) may touch; None when
    it may touch none."""
    must: list[Any] = [_match(TENANT_FIELD, tenant_id)]
    if document_id is not None:
        must.append(_match("document_id", document_id))
    if tags is not None:
        shown = _shown(tags, access)
        if shown is None:
            return None
        must.append(shown)
    return qe.Filter(must=must)


class _Filters:
    """qdrant-edge's models for `layout.render`."""

    def match(self, path: str, values: Sequence[str]) -> Any:
        return qe.FieldCondition(path, match=qe.MatchAny(list(values)))

    def range(self, path: str, bounds: Mapping[str, float | str], *, timestamp: bool) -> Any:
        if timestamp:
            return qe.FieldCondition(path, range=qe.RangeDateTime(**{k: str(v) for k, v in bounds.items()}))
        return qe.FieldCondition(path, range=qe.RangeFloat(**{k: float(v) for k, v in bounds.items()}))

    def all(self, parts: Sequence[Any]) -> Any:
        return qe.Filter(must=list(parts))

    def any(self, parts: Sequence[Any]) -> Any:
        return qe.Filter(should=list(parts))

    def none(self, part: Any) -> Any:
        return qe.Filter(must_not=[part])


def _visibility(query: RetrievalQuery, access: AccessPolicy) -> qe.Filter | None:
    """The query's tenant, the chunks its tags show (`_shown`), each list filter and the filter expression. None
    when the caller can see nothing."""
    shown = _shown(query.user_tags, access)
    if shown is None:
        return None
    must: list[Any] = [_match(TENANT_FIELD, query.tenant_id), shown]
    must.extend(qe.FieldCondition(key, match=qe.MatchAny(list(values))) for key, values in metadata_constraints(query.filters))
    if (where := resolved_where(query.filters)) is not None:
        must.append(render(where, _Filters()))
    return qe.Filter(must=must)
