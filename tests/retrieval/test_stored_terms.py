"""Both engines store each chunk's reading with it and return it with the chunk, record the analyser version of
their stored index terms and readings, a server refuses an index of another version (and a query, a result without a
reading of this version), and the rewrite (`ragsvc reindex`'s) makes every chunk's terms and reading the current
analyser's, page by page, with the version recorded last. The embedded engine's record survives its background index
build and swap."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
from qdrant_client import AsyncQdrantClient
from qdrant_client import models as m

from ragsvc.domain import Chunk, RetrievalQuery, TermCounts
from ragsvc.errors import IndexOutdated
from ragsvc.reading.chunks import read_chunk, stored_reading, unpack
from ragsvc.reading.text import ANALYSER_VERSION, index_terms
from ragsvc.retrieval.base import IndexedChunk
from ragsvc.retrieval.edge import ANALYSER_FILE, BUILDING_SUFFIX, EdgeEngine
from ragsvc.retrieval.layout import DENSE, SPARSE, indexed_text
from ragsvc.retrieval.qdrant_server import DEFAULT_COLLECTION, QdrantServerEngine
from ragsvc.retrieval.stored_terms import UNMARKED_VERSION, check_analyser, rewrite_terms
from tests.retrieval.conftest import EngineKind
from tests.support.polling import eventually
from tests.support.stored_terms import OLD, old_terms, stored_rows, terms_by_text, write_with_the_old_analyser

DIMENSION = 8
TEXTS = [
    "Annual subscriptions can be refunded within 14 days of purchase.",
    "The storage cluster takes a snapshot backup every night at 2 am.",
    "Employees accrue two vacation days per month of service.",
    "Connect to the corporate VPN before opening the intranet.",
    "Refunds of monthly plans are prorated to the day.",
]
Engine = EdgeEngine | QdrantServerEngine


def chunks() -> list[Chunk]:
    """Two tenants' documents, some of several chunks, one with a title and a section heading."""
    return [
        Chunk("billing", 0, TEXTS[0], tenant_id="acme", page_title="Billing", section="Refunds"),
        Chunk("billing", 1, TEXTS[4], tenant_id="acme", page_title="Billing", section="Refunds", tags=("finance",)),
        Chunk("ops", 0, TEXTS[1], tenant_id="acme"),
        Chunk("handbook", 0, TEXTS[2], tenant_id="globex"),
        Chunk("handbook", 1, TEXTS[3], tenant_id="globex"),
    ]


async def fill(engine: Engine, stored: list[Chunk]) -> None:
    rng = np.random.default_rng(0)
    documents: dict[tuple[str, str], list[IndexedChunk]] = {}
    for chunk in stored:
        documents.setdefault((chunk.tenant_id, chunk.document_id), []).append(
            IndexedChunk(chunk, (rng.random(DIMENSION) + 0.1).tolist())
        )
    for (tenant, document), indexed in documents.items():
        await engine.replace_document(tenant, document, indexed)


@pytest.fixture
async def filled(engine_kind: EngineKind, tmp_path: Path) -> AsyncIterator[Engine]:
    engine = await engine_kind.open(tmp_path / "engine", dimension=DIMENSION)
    await fill(engine, chunks())  # type: ignore[arg-type]
    yield engine  # type: ignore[misc]
    await engine.close()


async def unmarked(kind: EngineKind, path: Path) -> Engine:
    """An engine over an index as ragsvc wrote it before indexes recorded their analyser: no record."""
    if kind.name == "edge":
        engine = EdgeEngine.open(path, DIMENSION)
        (path / ANALYSER_FILE).unlink()  # read at each question
        return engine
    client = AsyncQdrantClient(location=":memory:")
    await client.create_collection(  # the collection as the Qdrant engine created it then
        DEFAULT_COLLECTION,
        vectors_config={DENSE: m.VectorParams(size=DIMENSION, distance=m.Distance.COSINE)},
        sparse_vectors_config={SPARSE: m.SparseVectorParams(modifier=m.Modifier.IDF)},
    )
    return await QdrantServerEngine.create(client, dimension=DIMENSION)


async def readings_by_text(engine: Engine) -> dict[str, str | None]:
    return {row.chunk.text: row.reading for row in await stored_rows(engine)}


async def test_a_query_returns_each_chunk_with_the_reading_stored_at_ingest(filled: Engine) -> None:
    query = RetrievalQuery("refunds of subscriptions", tenant_id="acme", user_tags=("finance",))

    found = await filled.query(query, [0.5] * DIMENSION, 5)

    assert sorted(c.chunk.source_id for c in found) == ["billing:0", "billing:1", "ops:0"]
    for candidate in found:
        chunk = candidate.chunk
        assert candidate.scored.reading == stored_reading(chunk.text, chunk.page_title, chunk.section or "")
        assert candidate.scored.reading is not None
        read = read_chunk(chunk.text, chunk.page_title, chunk.section or "")
        assert read and unpack(candidate.scored.reading, chunk.text) == read, "read back as read at ingest"
    billing = next(c for c in found if c.chunk.source_id == "billing:0").scored.reading
    assert billing is not None and "refund" in billing and "[0," in billing, "its terms, its sentence by its offsets"


async def test_a_query_meeting_a_chunk_without_a_reading_is_refused_naming_the_reindex(filled: Engine) -> None:
    await write_with_the_old_analyser(filled)  # the readings are gone, as in an index an older ragsvc wrote

    with pytest.raises(IndexOutdated) as refused:
        await filled.query(RetrievalQuery("refunds", tenant_id="acme", user_tags=("finance",)), [0.5] * DIMENSION, 5)

    assert "has no reading of analyser version" in refused.value.message
    assert "run `ragsvc reindex` with the same settings" in refused.value.message


async def test_a_new_index_records_the_current_analyser_and_keeps_it_across_opens(
    engine_kind: EngineKind, tmp_path: Path
) -> None:
    engine = await engine_kind.open(tmp_path / "engine", persistent=True, dimension=DIMENSION)
    try:
        assert await engine.analyser_version() == ANALYSER_VERSION
        await engine.record_analyser_version(OLD)  # type: ignore[attr-defined]
    finally:
        await engine.close()
    reopened = await engine_kind.open(tmp_path / "engine", persistent=True, dimension=DIMENSION)
    try:
        assert await reopened.analyser_version() == OLD
    finally:
        await reopened.close()


async def test_an_unmarked_index_with_chunks_counts_as_version_1_and_an_empty_one_takes_the_current(
    engine_kind: EngineKind, tmp_path: Path
) -> None:
    old = await unmarked(engine_kind, tmp_path / "old")
    empty = await unmarked(engine_kind, tmp_path / "empty")
    try:
        await fill(old, chunks())
        assert await old.analyser_version() == UNMARKED_VERSION == 1
        assert await old.analyser_version() == 1, "nothing was recorded for it"
        assert await empty.analyser_version() == ANALYSER_VERSION
        await fill(empty, chunks())
        assert await empty.analyser_version() == ANALYSER_VERSION, "recorded while it was empty"

        await check_analyser(old, "the old index", current=1)  # an unmarked index serves while the analyser is 1
        with pytest.raises(IndexOutdated, match=r"written by analyser version 1, .* with version 2"):
            await check_analyser(old, "the old index", current=2)
    finally:
        await old.close()
        await empty.close()


async def test_another_version_is_refused_with_both_versions_and_the_rebuild_command(filled: Engine) -> None:
    await write_with_the_old_analyser(filled)

    with pytest.raises(IndexOutdated) as refused:
        await check_analyser(filled, "/data/qdrant-edge")

    assert refused.value.message == (
        f"the index terms and readings in /data/qdrant-edge were written by analyser version {OLD}, and this ragsvc "
        f"reads with version {ANALYSER_VERSION}: stop the server and run `ragsvc reindex` with the same settings to "
        "rewrite them"
    )
    assert refused.value.metadata == {"stored_version": str(OLD), "current_version": str(ANALYSER_VERSION)}


async def test_the_rewrite_makes_every_chunks_terms_the_analysers_and_records_its_version_last(filled: Engine) -> None:
    await write_with_the_old_analyser(filled)
    expected = {indexed_text(chunk): index_terms(indexed_text(chunk)) for chunk in chunks()}
    assert await terms_by_text(filled) == {text: old_terms(text) for text in expected}
    assert await readings_by_text(filled) == dict.fromkeys(TEXTS), "the older analyser stored no reading"
    reports: list[tuple[int, int, int]] = []

    done = await rewrite_terms(filled, page_size=2, progress=lambda *report: reports.append(report))

    assert (done.version_before, done.version, done.chunks, done.rewritten) == (OLD, ANALYSER_VERSION, 5, 5)
    assert reports[0] == (2, 2, 5), "progress after the first page"
    assert await terms_by_text(filled) == expected
    assert await readings_by_text(filled) == {c.text: stored_reading(c.text, c.page_title, c.section or "") for c in chunks()}
    assert await filled.analyser_version() == ANALYSER_VERSION
    await check_analyser(filled, "the index")
    # The statistics count the new terms; the record is no chunk: counts, lists and stats are the chunks'.
    counts = await filled.term_counts(RetrievalQuery("refunds", tenant_id="acme", user_tags=("finance",)), ["refund"])
    assert counts == TermCounts(3, {"refund": 2})
    assert (await filled.count(), await filled.count("acme"), await filled.count("globex")) == (5, 3, 2)
    assert [d.document_id for d in (await filled.list_documents("acme", limit=10)).documents] == ["billing", "ops"]
    assert (await filled.stats("globex")).chunks == 2

    again = await rewrite_terms(filled, page_size=2)
    assert (again.version_before, again.chunks, again.rewritten) == (ANALYSER_VERSION, 5, 0), "nothing left to do"


async def test_an_interrupted_rewrite_keeps_the_old_version_and_a_second_run_finishes(filled: Engine) -> None:
    await write_with_the_old_analyser(filled)

    def interrupt(read: int, rewritten: int, total: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        await rewrite_terms(filled, page_size=2, progress=interrupt)

    assert await filled.analyser_version() == OLD
    with pytest.raises(IndexOutdated):
        await check_analyser(filled, "the index")
    halfway = await terms_by_text(filled)
    assert sum(terms == index_terms(text) for text, terms in halfway.items()) == 2, "the first page was rewritten"

    done = await rewrite_terms(filled, page_size=2)

    assert (done.version_before, done.chunks, done.rewritten) == (OLD, 5, 3)
    assert all(terms == index_terms(text) for text, terms in (await terms_by_text(filled)).items())
    await check_analyser(filled, "the index")


async def test_the_embedded_engines_term_table_follows_a_rewrite(tmp_path: Path) -> None:
    engine = EdgeEngine.open(tmp_path / "shard", DIMENSION)
    try:
        await fill(engine, chunks())
        await write_with_the_old_analyser(engine)
        query = RetrievalQuery("refunds", tenant_id="acme", user_tags=("finance",))
        assert await engine.term_counts(query, ["refund", "old:refund"]) == TermCounts(3, {"refund": 0, "old:refund": 2})
        await asyncio.gather(*engine._loading.values())
        assert engine._terms.holds("acme"), "the counts below come from the term table"

        await rewrite_terms(engine)

        assert await engine.term_counts(query, ["refund", "old:refund"]) == TermCounts(3, {"refund": 2, "old:refund": 0})
    finally:
        await engine.close()


async def test_the_record_survives_the_background_index_build_and_swap(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    engine = EdgeEngine.open(path, DIMENSION)
    try:
        await fill(engine, chunks())
        await write_with_the_old_analyser(engine)
        await engine.build_index()  # the record is copied with the shard and swapped in
        assert await engine.analyser_version() == OLD

        build = asyncio.create_task(engine.build_index())
        await eventually(path.with_name(path.name + BUILDING_SUFFIX).exists, within_s=30, every_s=0.001)
        await rewrite_terms(engine)  # after the copy: its writes and its record are replayed after the swap
        built = await build

        assert built is not None and built.replayed_writes == 2, "the terms, then the record"
        assert await engine.analyser_version() == ANALYSER_VERSION
        assert all(terms == index_terms(text) for text, terms in (await terms_by_text(engine)).items())
    finally:
        await engine.close()
    reopened = EdgeEngine.open(path, DIMENSION)
    try:
        assert await reopened.analyser_version() == ANALYSER_VERSION
        assert all(terms == index_terms(text) for text, terms in (await terms_by_text(reopened)).items())
    finally:
        await reopened.close()
