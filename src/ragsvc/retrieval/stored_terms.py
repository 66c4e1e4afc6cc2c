"""The index terms and the reading stored with each chunk, and the version of the analyser that wrote them.

Each chunk's payload holds what the analyser makes of it (`layout.analysed`): its index terms (`layout.TERMS_FIELD`:
`reading.text.index_terms` of `layout.indexed_text(chunk)`), which the engines count for the answerability
statistics, and its reading (`layout.READING_FIELD`: `reading.chunks`, packed), which the reader reads a question's
evidence from. Questions are analysed, and evidence read, by the running server's analyser, so what is stored must
come from the same one: an index records the version (`reading.text.ANALYSER_VERSION`) it was written with, and a
server refuses to serve an index of another version (`check_analyser`) rather than silently mis-match. `ragsvc
reindex` (`rewrite_terms`) rewrites the terms and readings from the stored chunks with the current analyser, page by
page (nothing is re-embedded), and records the version last, so an interrupted run leaves the old version and the
refusal in place until a run finishes.

Where the version is kept: the embedded engine writes a small file into its shard directory (copied and swapped
with the shard by a background index build); the Qdrant server engine keeps it in the collection's metadata. An
index that holds chunks but no version predates the record and counts as version 1, the analyser of that time; an
empty one takes the current version.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from ragsvc.domain import Chunk
from ragsvc.errors import IndexOutdated, RetrievalUnavailable
from ragsvc.reading.text import ANALYSER_VERSION
from ragsvc.retrieval.base import VectorEngine
from ragsvc.retrieval.layout import (
    READING_FIELD,
    REINDEX_COMMAND,
    RETURNED_FIELDS,
    TERMS_FIELD,
    Analysed,
    analysed,
    chunk_from_payload,
    indexed_text,
)

__all__ = [
    "FIELDS",
    "MARKER",
    "PAGE_SIZE",
    "UNMARKED_VERSION",
    "Rewrite",
    "StoredTerms",
    "TermsPage",
    "TermsStore",
    "check_analyser",
    "recorded_version",
    "rewrite_terms",
]

MARKER = "ragsvc_analyser_version"  # the key the version is recorded under
UNMARKED_VERSION = 1  # the analyser of an index written before indexes recorded it
PAGE_SIZE = 256  # chunks read and rewritten at a time
PROGRESS_EVERY_S = 2.0
FIELDS = [*RETURNED_FIELDS, TERMS_FIELD]  # what an engine reads of a point for `StoredTerms.of`


@dataclass(frozen=True, slots=True)
class StoredTerms:
    """One stored chunk: its engine's point id, the chunk, and the terms and reading stored with it."""

    point: str
    chunk: Chunk
    terms: tuple[str, ...]
    reading: str | None

    @property
    def text(self) -> str:
        """The text its terms are computed from (`layout.indexed_text`)."""
        return indexed_text(self.chunk)

    @classmethod
    def of(cls, point: object, data: Mapping[str, object] | None) -> StoredTerms:
        """The row of a point read with the payload FIELDS."""
        data = dict(data or {})
        stored = data.get(TERMS_FIELD) or ()
        if isinstance(stored, str):  # the embedded engine's form: one space-separated string
            terms = tuple(stored.split())
        else:
            terms = tuple(str(term) for term in stored) if isinstance(stored, list | tuple) else ()
        reading = data.get(READING_FIELD)
        return cls(str(point), chunk_from_payload(data), terms, reading if isinstance(reading, str) else None)

    def holds(self, analysis: Analysed) -> bool:
        """Whether the chunk stores `analysis` already."""
        return list(self.terms) == analysis.terms and self.reading == analysis.reading


@dataclass(frozen=True, slots=True)
class TermsPage:
    """Chunks in the engine's point order; the next page starts at the point `next_start` (None: this is the
    last)."""

    rows: list[StoredTerms]
    next_start: str | None


class TermsStore(Protocol):
    """What `rewrite_terms` needs of an engine (both engines have it)."""

    async def analyser_version(self) -> int:
        """The analyser version the stored terms were written with (an empty, unmarked index takes the current)."""
        ...

    async def record_analyser_version(self, version: int) -> None: ...

    async def stored_terms(self, start: str | None, limit: int) -> TermsPage:
        """Up to `limit` chunks of every tenant, from the first point (None) or from the point `start` on."""
        ...

    async def rewrite_stored(self, analyses: Mapping[str, Analysed]) -> None:
        """Store `analyses[point]` as the index terms and reading of each point (a reading None: none; its
        payload's other fields stay)."""
        ...

    async def count(self, tenant_id: str | None = None) -> int: ...


def recorded_version(marker: object, chunks: int) -> int | None:
    """The version an index records (`marker`: what is stored under MARKER, None when nothing is): an unmarked
    index with chunks counts as UNMARKED_VERSION; None for an unmarked, empty one (it takes the current version)."""
    if marker is None:
        return UNMARKED_VERSION if chunks else None
    if isinstance(marker, bool) or not isinstance(marker, int):
        raise RetrievalUnavailable(f"the index records {marker!r} as its analyser version, which is not a version")
    return marker


async def check_analyser(index: VectorEngine, store: str, current: int = ANALYSER_VERSION) -> None:
    """Raises IndexOutdated, naming the versions and the rebuild command, when the index at `store` was written by
    another analyser version than `current`."""
    stored = await index.analyser_version()
    if stored != current:
        raise IndexOutdated(
            f"the index terms and readings in {store} were written by analyser version {stored}, and this ragsvc "
            f"reads with version {current}: stop the server and run `{REINDEX_COMMAND}` with the same settings to "
            "rewrite them",
            metadata={"stored_version": str(stored), "current_version": str(current)},
        )


@dataclass(frozen=True, slots=True)
class Rewrite:
    """What `rewrite_terms` did: the version before and after, chunks read and chunks whose terms or reading
    changed."""

    version_before: int
    version: int
    chunks: int
    rewritten: int


async def rewrite_terms(
    store: TermsStore,
    *,
    page_size: int = PAGE_SIZE,
    progress: Callable[[int, int, int], None] | None = None,
    current: int = ANALYSER_VERSION,
    analyse: Callable[[Chunk], Analysed] = analysed,
) -> Rewrite:
    """Rewrite every chunk's stored terms and reading with `analyse` (the analyser of version `current`), a page at
    a time, then record `current` as the index's version. `progress(read, rewritten, total)` is called after the
    first page, then every PROGRESS_EVERY_S at most. Chunks that store the analysis already are not written, so a
    run after an interrupted one finishes quickly."""
    if page_size < 1:
        raise ValueError(f"page_size must be at least 1, not {page_size}")
    before = await store.analyser_version()
    total = await store.count()
    read = rewritten = 0
    start: str | None = None
    reported = 0.0
    while True:
        page = await store.stored_terms(start, page_size)
        changed = {row.point: analysis for row in page.rows if not row.holds(analysis := analyse(row.chunk))}
        if changed:
            await store.rewrite_stored(changed)
        read += len(page.rows)
        rewritten += len(changed)
        if progress is not None and (not reported or time.monotonic() - reported >= PROGRESS_EVERY_S):
            progress(read, rewritten, total)
            reported = time.monotonic()
        if page.next_start is None:
            break
        start = page.next_start
    await store.record_analyser_version(current)
    return Rewrite(version_before=before, version=current, chunks=read, rewritten=rewritten)
