"""The collection layout every engine shares, and the access policy they enforce.

One collection (qdrant-edge: one shard) holds the chunks of every tenant. A chunk is a point whose id is derived
from (tenant, document, chunk index), so re-ingesting a document overwrites its points. Each point has

- a dense vector "dense" (cosine distance; the engine stores it L2-normalised),
- a sparse vector "bm25": term weights from qdrant-edge's `Bm25` model (mmh3 token ids, the same model as
  Qdrant's server-side BM25), with the IDF modifier applied by the engine at query time,
- the chunk as payload, with keyword indexes on tenant_id (`is_tenant`), tags, document_id, source_url,
  page_title and section, and an index on "terms": the chunk's distinct index terms (`lexical.index_terms`), from
  which the engine counts document frequencies per tenant (`term_counts`) for the answerability gate. Queries do
  not return "terms". The Qdrant server engine stores them as a list under a keyword index; the embedded engine as
  one string under a text index split at spaces (edge.TERMS_INDEX: a query reads each result's whole payload, and
  one string reads far faster than a list of ~70). Each chunk also carries its document's source (content hash
  and size, media type, ingest fingerprint and time: the same on every chunk of a document),
- and its reading under "reading": what the reader reads of it whatever the question (`reading.chunks`, packed in
  one string), which queries return with the chunk. The terms and the reading are the analyser's (`analysed`):
  an index records the analyser version that wrote them (`stored_terms`), and a result without a reading of this
  version is refused (`candidates_from`).

Both vectors are of the chunk's `indexed_text`: its page title and section heading, then its text, so that a
passage is found by the words of the headings it sits under ("Travel Policy", "max_connections").

Each chunk also carries its document's typed metadata (`ragsvc.metadata`) under "meta", one object per type:
"meta.s.<key>" strings, "meta.n.<key>" numbers, "meta.b.<key>" booleans (stored as the keywords "true" / "false":
qdrant-edge 0.9's Python binding sends a boolean match as an integer, which never matches a JSON boolean), and
"meta.t.<key>" timestamps (RFC 3339 in UTC). A key's path names its type, so two tenants may give one key two
types without their payload indexes colliding (an index covers the whole collection). The engines create the
index of a key when it is declared (`ensure_metadata_index`: keyword, float, keyword, datetime).

A tenant's documents are listed from the engine's facet counts of document_id, with the document's fields read
from its chunk 0 (whose point id is known).

A query prefetches the best chunks by the dense vector and by the sparse one, or, in the dense or sparse search mode
(R-002-03), by the one (`searched_vectors`); the access filter (tenant, tags) and the metadata filters sit inside
every prefetch, so nothing the caller may not see is ever a candidate. Each leg then scores every prefetched
candidate (the dense leg its cosine, the BM25 leg its term weights, 0 when it shares no term), and `fuse` (or
`fused_ids`, given each leg's scores by id) orders them by the legs' scores, each scaled to its best, weighed by
`LEG_SHARES`. The embedded engine has each leg score only the candidates another leg found, and reads the payloads
and vectors of the chosen alone. Each result's score is the cosine
similarity of its stored dense vector to the query vector, whatever its fused rank. A metadata filter expression, resolved
(`ragsvc.filters`), is rendered into each engine's filter by `render`.
"""

from __future__ import annotations

import functools
import struct
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

import numpy as np
import qdrant_edge as qe

from ragsvc.access import AccessPolicy
from ragsvc.domain import Chunk, DocumentSource, MetadataFilter, RetrievalQuery, SearchMode, StoredDocument
from ragsvc.errors import IndexOutdated
from ragsvc.filters import And, Condition, Match, Node, Or, Range, Where
from ragsvc.metadata import MetadataType, MetadataValue, format_timestamp, parse_timestamp, type_of
from ragsvc.reading.chunks import is_current, stored_reading
from ragsvc.reading.text import ANALYSER_VERSION, index_terms
from ragsvc.retrieval.base import Candidate

DENSE = "dense"
SPARSE = "bm25"
# Each leg's share of a candidate's fused score (`fuse`): chosen on five corpora's answerable questions (pgdocs,
# pydocs, httpd, handbook, sqlite; 0.45-0.6 gave within 0.5 points of each other), measured on five others
# (docs/reading.md, "Retrieval, round 4").
LEG_SHARES = {DENSE: 0.6, SPARSE: 0.4}
TENANT_FIELD = "tenant_id"
TERMS_FIELD = "terms"
READING_FIELD = "reading"
REINDEX_COMMAND = "ragsvc reindex"  # rewrites what the analyser stores (see stored_terms)
KEYWORD_FIELDS = ("tags", "document_id", "source_url", "page_title", "section", TERMS_FIELD)
# What a query returns of a point's payload: the chunk and its reading, not its index terms.
RETURNED_FIELDS = [
    READING_FIELD,
    "document_id",
    "chunk_index",
    "text",
    "document_name",
    "tenant_id",
    "tags",
    "source_url",
    "page_title",
    "section",
    "page_number",
    "trust",
    "published_at",
    "confidential",
    "token_count",
    "char_start",
    "char_end",
]
REDACTED_TEXT = "[REDACTED]"
META_FIELD = "meta"
# The object under "meta" holding the values of each type.
META_CODES = {MetadataType.STRING: "s", MetadataType.NUMBER: "n", MetadataType.BOOL: "b", MetadataType.TIMESTAMP: "t"}
# The payload fields that describe the chunk's document (what a listing reads from chunk 0).
DOCUMENT_FIELDS = (
    "document_id",
    "document_name",
    "page_title",
    "tags",
    "source_url",
    "confidential",
    "content_sha256",
    "content_bytes",
    "media_type",
    "ingest_fingerprint",
    "ingested_at",
    "trust",
    META_FIELD,
    "encoding",
)


def redact(chunk: Chunk) -> Chunk:
    """The chunk with everything that tells its content removed: text, section heading and title. What
    identifies the document (id, name, URL, page) stays, so a caller can ask for access."""
    return replace(chunk, text=REDACTED_TEXT, section=None, page_title="", token_count=None, char_start=None, char_end=None)


def point_id(tenant_id: str, document_id: str, chunk_index: int) -> uuid.UUID:
    """Stable id of a chunk, so re-ingesting a document overwrites its points."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"{tenant_id}/{document_id}/{chunk_index}")


class SparseEncoder:
    """BM25 term weights, identical for every engine (qdrant-edge's model; Qdrant applies IDF at query time)."""

    def __init__(self) -> None:
        self._bm25 = qe.Bm25()

    def document(self, text: str) -> tuple[list[int], list[float]]:
        vector = self._bm25.embed_document(text)
        return list(vector.indices), list(vector.values)

    def query(self, text: str) -> tuple[list[int], list[float]]:
        vector = self._bm25.embed_query(text)
        return list(vector.indices), list(vector.values)

    def edge_document(self, text: str) -> qe.SparseVector:
        return self._bm25.embed_document(text)

    def edge_query(self, text: str) -> qe.SparseVector:
        return self._bm25.embed_query(text)


def unit(vector: Sequence[float] | np.ndarray) -> np.ndarray:
    """`vector` as float32, L2-normalised (a zero vector stays zero)."""
    array = np.asarray(vector, dtype=np.float32)
    return array / max(float(np.linalg.norm(array)), 1e-12)


def cosines(rows: np.ndarray, query: Sequence[float]) -> np.ndarray:
    """Cosine similarity of each of the unit-length `rows` (`unit_rows`) to `query`, clipped to [-1, 1]."""
    if not len(rows):
        return np.zeros(0, dtype=np.float32)
    similarities: np.ndarray = np.clip(rows @ unit(query), -1.0, 1.0)
    return similarities


def dense_rows(vectors: Sequence[Sequence[float]]) -> np.ndarray:
    """Vectors of one length, as returned by an engine (lists of Python floats), as the rows of a float32 matrix.
    Packed by `struct` and read by numpy at once: numpy converting the lists number by number took ~5x as long
    (150 µs for 15 rows of 384). Exact for the engines' float32 values. ValueError when the lengths differ or a
    value is not a float32 number."""
    if not vectors:
        return np.zeros((0, 0), dtype=np.float32)
    width = len(vectors[0])
    packer = _float32s(width)
    try:
        packed = b"".join([packer.pack(*vector) for vector in vectors])
    except (struct.error, OverflowError, TypeError) as exc:
        raise ValueError(f"not {len(vectors)} vectors of {width} float32 numbers: {exc}") from exc
    return np.frombuffer(packed, dtype=np.float32).reshape(len(vectors), width)


@functools.lru_cache(maxsize=8)
def _float32s(width: int) -> struct.Struct:
    return struct.Struct(f"={width}f")


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    rows: np.ndarray = matrix / np.clip(norms, 1e-12, None)
    return rows


def indexed_text(chunk: Chunk) -> str:
    """What is embedded and what BM25 sees of a chunk: its page title and section heading (each once), then its
    text."""
    headings = dict.fromkeys(h for h in (chunk.page_title, chunk.section or "") if h.strip())
    return "\n".join([*headings, chunk.text])


def meta_path(key: str, kind: MetadataType) -> str:
    """The payload path of a metadata key of type `kind`."""
    return f"{META_FIELD}.{META_CODES[kind]}.{key}"


def meta_payload(metadata: Mapping[str, MetadataValue]) -> dict[str, dict[str, Any]]:
    """Metadata as stored under "meta": one object per type."""
    stored: dict[str, dict[str, Any]] = {}
    for key, value in metadata.items():
        kind = type_of(value)
        if kind is MetadataType.BOOL:
            value = "true" if value else "false"
        elif kind is MetadataType.TIMESTAMP:
            assert not isinstance(value, str | float | bool)
            value = format_timestamp(value)
        stored.setdefault(META_CODES[kind], {})[key] = value
    return stored


def metadata_of(stored: Mapping[str, Any] | None) -> dict[str, MetadataValue]:
    """The metadata stored under "meta", typed again."""
    metadata: dict[str, MetadataValue] = {}
    for kind, code in META_CODES.items():
        for key, value in ((stored or {}).get(code) or {}).items():
            if kind is MetadataType.BOOL:
                metadata[key] = value == "true"
            elif kind is MetadataType.TIMESTAMP:
                metadata[key] = parse_timestamp(value)
            elif kind is MetadataType.NUMBER:
                metadata[key] = float(value)
            else:
                metadata[key] = str(value)
    return dict(sorted(metadata.items()))


@dataclass(frozen=True, slots=True)
class Analysed:
    """What the analyser stores with a chunk: its index terms and its reading, packed (None: none)."""

    terms: list[str]
    reading: str | None


def analysed(chunk: Chunk) -> Analysed:
    """The analyser's terms (`index_terms` of the chunk's `indexed_text`) and reading (`reading.chunks`) of `chunk`:
    what ingest stores with it and `ragsvc reindex` rewrites."""
    return Analysed(index_terms(indexed_text(chunk)), stored_reading(chunk.text, chunk.page_title, chunk.section or ""))


def payload(
    chunk: Chunk, source: DocumentSource | None = None, metadata: Mapping[str, MetadataValue] | None = None
) -> dict[str, Any]:
    """The point's payload: the chunk, its index terms and reading, its document's source when known and its
    metadata."""
    analysis = analysed(chunk)
    stored: dict[str, Any] = {
        TERMS_FIELD: analysis.terms,
        READING_FIELD: analysis.reading,
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
        "confidential": chunk.confidential,
        "token_count": chunk.token_count,
    }
    if metadata:
        stored[META_FIELD] = meta_payload(metadata)
    if chunk.char_start is not None and chunk.char_end is not None:  # its span in the document (R-004-03)
        stored |= {"char_start": chunk.char_start, "char_end": chunk.char_end}
    if source is not None:
        stored |= {
            "content_sha256": source.content_sha256,
            "content_bytes": source.content_bytes,
            "media_type": source.media_type,
            "ingest_fingerprint": source.fingerprint,
            "ingested_at": source.ingested_at,
            "encoding": source.encoding,
        }
    return stored


def stored_document(document_id: str, chunks: int, data: Mapping[str, Any] | None) -> StoredDocument:
    """A document from the payload of one of its chunks (None: unknown but its id and chunk count)."""
    data = data or {}
    source = None
    if "ingest_fingerprint" in data:
        source = DocumentSource(
            content_sha256=str(data.get("content_sha256", "")),
            content_bytes=int(data.get("content_bytes", 0)),
            media_type=str(data.get("media_type", "")),
            fingerprint=str(data["ingest_fingerprint"]),
            ingested_at=float(data.get("ingested_at", 0.0)),
            encoding=str(data.get("encoding") or ""),
        )
    return StoredDocument(
        document_id=document_id,
        name=str(data.get("document_name") or document_id),
        title=str(data.get("page_title") or ""),
        tags=tuple(data.get("tags") or ()),
        source_url=str(data.get("source_url") or ""),
        confidential=bool(data.get("confidential", False)),
        chunks=chunks,
        source=source,
        metadata=metadata_of(data.get(META_FIELD)),
        trust=float(data.get("trust", 1.0)),
    )


def page_after(counts: Mapping[str, int], after: str, limit: int) -> tuple[list[str], str | None]:
    """The first `limit` document ids sorting after `after`, and the last of them when more follow."""
    ids = sorted(d for d in counts if d > after)
    page = ids[: max(limit, 0)]
    return page, (page[-1] if page and len(ids) > len(page) else None)


def chunk_from_payload(data: dict[str, Any]) -> Chunk:
    return Chunk(
        document_id=data["document_id"],
        chunk_index=int(data["chunk_index"]),
        text=data["text"],
        document_name=data.get("document_name", ""),
        tenant_id=data.get("tenant_id", ""),
        tags=tuple(data.get("tags") or ()),
        source_url=data.get("source_url", ""),
        page_title=data.get("page_title", ""),
        section=data.get("section"),
        page_number=data.get("page_number"),
        trust=float(data.get("trust", 1.0)),
        published_at=data.get("published_at", ""),
        confidential=bool(data.get("confidential", False)),
        token_count=data.get("token_count"),
        char_start=data.get("char_start"),  # None for chunks stored before spans were (R-004-03)
        char_end=data.get("char_end"),
    )


def searched_vectors(mode: SearchMode) -> tuple[str, ...]:
    """The named vectors a search in `mode` ranks by, each a prefetch, fused by `fuse` (R-002-03)."""
    return {SearchMode.HYBRID: (DENSE, SPARSE), SearchMode.DENSE: (DENSE,), SearchMode.SPARSE: (SPARSE,)}[mode]


def metadata_constraints(query_filters: MetadataFilter) -> list[tuple[str, tuple[str, ...]]]:
    """(payload key, accepted values) for each metadata filter the query sets."""
    constraints = (
        ("source_url", query_filters.source_urls),
        ("page_title", query_filters.page_titles),
        ("section", query_filters.section_headings),
    )
    return [(key, tuple(values)) for key, values in constraints if values]


def resolved_where(query_filters: MetadataFilter) -> Where | None:
    """The query's resolved filter expression (None when it has none). An expression not resolved against the
    tenant's keys is a programming error: engines never guess a key's type."""
    if query_filters.expression and query_filters.where is None:
        raise ValueError(f"the filter expression {query_filters.expression!r} was not resolved")
    return query_filters.where


_C = TypeVar("_C")


class FilterBuilder(Protocol[_C]):
    """An engine's filter models: the conditions `render` builds a resolved filter expression from."""

    def match(self, path: str, values: Sequence[str]) -> _C: ...
    def range(self, path: str, bounds: Mapping[str, float | str], *, timestamp: bool) -> _C: ...
    def all(self, parts: Sequence[_C]) -> _C: ...
    def any(self, parts: Sequence[_C]) -> _C: ...
    def none(self, part: _C) -> _C: ...


def render(where: Node, build: FilterBuilder[_C]) -> _C:
    """A resolved filter expression as an engine's filter condition (ValueError for a condition not resolved)."""
    if isinstance(where, Condition):
        raise ValueError(f"the condition on {where.key!r} was not resolved")
    if isinstance(where, Match):
        return build.match(meta_path(where.key, where.type), where.values)
    if isinstance(where, Range):
        bounds = {name: value for name in ("gt", "gte", "lt", "lte") if (value := getattr(where, name)) is not None}
        return build.range(meta_path(where.key, where.type), bounds, timestamp=where.type is MetadataType.TIMESTAMP)
    if isinstance(where, And):
        return build.all([render(part, build) for part in where.parts])
    if isinstance(where, Or):
        return build.any([render(part, build) for part in where.parts])
    return build.none(render(where.part, build))


class _Scored(Protocol):
    @property
    def id(self) -> Any: ...
    @property
    def score(self) -> float: ...


_P = TypeVar("_P", bound=_Scored)
_K = TypeVar("_K")


def candidates_from(
    payloads: Sequence[dict[str, Any]],
    stored: np.ndarray,
    similarities: np.ndarray,
    query: RetrievalQuery,
    access: AccessPolicy,
) -> list[Candidate]:
    """Engine results as candidates with their stored readings, confidential chunks the caller may not read redacted
    (without their readings). IndexOutdated when a result carries no reading of this analyser: the index is not
    one this server reads (shared by engines)."""
    candidates = []
    for data, vector, similarity in zip(payloads, stored, similarities.tolist(), strict=True):
        chunk = chunk_from_payload(data)
        reading = data.get(READING_FIELD)
        if not is_current(reading):
            raise IndexOutdated(
                f"chunk {chunk.source_id} of tenant {chunk.tenant_id!r} has no reading of analyser version "
                f"{ANALYSER_VERSION}: stop the server and run `{REINDEX_COMMAND}` with the same settings to rewrite it",
                metadata={"current_version": str(ANALYSER_VERSION)},
            )
        if access.may_read(chunk, query.user_tags):
            candidates.append(Candidate(chunk, similarity, vector, reading=reading))
        else:
            candidates.append(Candidate(redact(chunk), similarity, vector, redacted=True))
    return candidates


def fuse(legs: Sequence[tuple[str, Sequence[_P]]], limit: int) -> list[_P]:
    """The `limit` best candidates by their legs' scores (`fused_ids`), each leg a named vector and the points it
    scored. The candidates are the first leg's points, which must hold every candidate (a dense leg scores every
    one)."""
    if not legs:
        return []
    # Each point's id read once: the engines build it (a `uuid.UUID`) on every read.
    ids = [[point.id for point in points] for _, points in legs]
    first = dict(zip(ids[0], legs[0][1], strict=True))
    scores = [
        (name, dict(zip(leg_ids, [point.score for point in points], strict=True)))
        for (name, points), leg_ids in zip(legs, ids, strict=True)
    ]
    return [first[point_id] for point_id in fused_ids(scores, limit)]


def fused_ids(legs: Sequence[tuple[str, Mapping[_K, float]]], limit: int) -> list[_K]:
    """The ids of the `limit` best candidates by their legs' scores: for each leg (a named vector and its score of
    each candidate it scored), its share (`LEG_SHARES`) of the candidate's score scaled to the leg's best; a leg that
    did not score a candidate gives it 0. The candidates are the first leg's ids, which must hold every candidate;
    equal scores are ordered by id (`_first_by_score`).

    Why not RRF: ranks alone cannot tell a chunk far nearer in meaning than any other, or holding the question's
    rare words as no other does, from one a little ahead of many; and a candidate below one leg's prefetch got
    nothing from that leg, however close it came. Fused by score, the key fact of five corpora's answerable
    questions was among the first eight chunks for 93.4% of them, 91.9% by RRF (k=60), none of the five losing
    (docs/reading.md, "Retrieval, round 4")."""
    if not legs:
        return []
    fused = dict.fromkeys(legs[0][1], 0.0)
    for name, scores in legs:
        best = max(scores.values(), default=0.0)
        if best <= 0:
            continue
        share = LEG_SHARES.get(name, 1.0) / best
        for point_id, score in scores.items():
            if point_id in fused:
                fused[point_id] += share * max(score, 0.0)
    return _first_by_score(fused, limit)


def _first_by_score(scores: Mapping[_K, float], limit: int) -> list[_K]:
    """The ids of the `limit` best `scores`, equal scores by id (as text). Two chunks can get equal fused scores
    (identical texts, or the same scaled scores), and the engines return those in any order: cut at the limit as
    they come, the same question could draw different evidence from one call to the next. Only ids of equal score
    are turned into text."""
    ranked = sorted(scores, key=scores.__getitem__, reverse=True)  # stable: equal scores keep their order
    chosen: list[_K] = []
    at = 0
    while at < len(ranked) and len(chosen) < limit:
        end = at + 1
        while end < len(ranked) and scores[ranked[end]] == scores[ranked[at]]:
            end += 1
        chosen.extend(sorted(ranked[at:end], key=str) if end - at > 1 else ranked[at:end])
        at = end
    return chosen[:limit]
