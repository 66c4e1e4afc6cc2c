"""What only the embedded engine does: one owner per shard directory, its vector size, concurrent writers, and the
HNSW index it builds in a child process and swaps in while it keeps serving. (Both engines' shared behaviour is in
test_engines.py.)"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
import qdrant_edge as qe

from ragsvc.domain import Chunk, RetrievalQuery
from ragsvc.errors import RetrievalUnavailable
from ragsvc.reading.text import index_terms
from ragsvc.retrieval.base import IndexedChunk, TermCounts
from ragsvc.retrieval.edge import BUILDING_SUFFIX, PREVIOUS_SUFFIX, EdgeEngine, shard_config
from ragsvc.retrieval.embedders import MiniLMEmbedder
from ragsvc.retrieval.layout import DENSE, SPARSE, SparseEncoder, fuse, payload, point_id
from tests.retrieval.conftest import store
from tests.support.polling import eventually

DIMENSION = 32


def random_document(document_id: str, chunks: int, seed: int, *, tenant: str = "acme") -> list[IndexedChunk]:
    rng = np.random.default_rng(seed)
    return [
        IndexedChunk(
            Chunk(document_id, i, f"{document_id} part {i} of the archive", tenant_id=tenant),
            rng.standard_normal(DIMENSION).tolist(),
        )
        for i in range(chunks)
    ]


async def fill(engine: EdgeEngine, documents: int, chunks_each: int) -> None:
    for d in range(documents):
        await engine.replace_document("acme", f"doc{d}", random_document(f"doc{d}", chunks_each, seed=d))


async def test_data_survives_close_and_reopen_and_one_process_owns_a_shard(tmp_path: Path, embedder: MiniLMEmbedder) -> None:
    path = tmp_path / "shard"
    engine = EdgeEngine.open(path)
    await store(engine, embedder, [Chunk("refunds", 0, "Refunds within 14 days.", tenant_id="acme")])
    with pytest.raises(RetrievalUnavailable):
        EdgeEngine.open(path)  # one owner per shard directory
    await engine.close()

    reopened = EdgeEngine.open(path)
    try:
        assert await reopened.count("acme") == 1
    finally:
        await reopened.close()


async def test_results_carry_unit_vectors_and_their_cosine_to_the_query(tmp_path: Path) -> None:
    """The engine normalises vectors on upload (cosine distance), and the candidates use its rows as they come:
    vectors written at any length come back unit length, their similarity the cosine."""
    engine = EdgeEngine.open(tmp_path / "shard", dimension=DIMENSION)
    try:
        chunks = random_document("doc", 6, seed=3)
        await engine.replace_document("acme", "doc", chunks)
        asked = (np.random.default_rng(9).standard_normal(DIMENSION) * 7).tolist()
        found = await engine.query(RetrievalQuery("doc part", "acme"), asked, 6)
        written = {c.chunk.chunk_index: np.asarray(c.dense) for c in chunks}
        assert len(found) == 6 and all(abs(float(np.linalg.norm(w)) - 1) > 0.5 for w in written.values())
        for candidate in found:
            original = written[candidate.chunk.chunk_index]
            assert np.allclose(candidate.dense, original / np.linalg.norm(original), atol=1e-6)
            cosine = original @ asked / (np.linalg.norm(original) * np.linalg.norm(asked))
            assert candidate.score == pytest.approx(cosine, abs=1e-5)
    finally:
        await engine.close()


async def test_the_fused_order_is_that_of_both_legs_scoring_every_candidate(tmp_path: Path) -> None:
    """Each leg scores only the candidates another leg found (it scored its own when it found them), and only the
    chosen are read: the same chunks, in the same order, as when both legs score every candidate."""
    words = [f"w{i}" for i in range(40)]
    rng = np.random.default_rng(5)
    engine = EdgeEngine.open(tmp_path / "shard", dimension=DIMENSION)
    try:
        for d in range(6):
            texts = [" ".join(rng.choice(words, 8)) for _ in range(10)]
            await engine.replace_document("acme", f"doc{d}", [
                IndexedChunk(Chunk(f"doc{d}", i, text, tenant_id="acme"), rng.standard_normal(DIMENSION).tolist())
                for i, text in enumerate(texts)
            ])  # fmt: skip
        shard = engine._shard
        for asked in range(8):
            query = RetrievalQuery(" ".join(rng.choice(words, 4)), "acme")
            dense = rng.standard_normal(DIMENSION).tolist()
            vectors = {DENSE: dense, SPARSE: SparseEncoder().edge_query(query.text)}
            tenant = qe.Filter(must=[qe.FieldCondition("tenant_id", match=qe.MatchValue("acme"))])
            found = shard.query_batch(qe.QueryBatchRequest([
                qe.QueryRequest(limit=6, query=qe.Query.Nearest(v, using=name), filter=tenant) for name, v in vectors.items()
            ]))  # fmt: skip
            candidates = {point.id for points in found for point in points}
            by_id = qe.Filter(must=[qe.HasIdCondition(candidates)])
            everyone = shard.query_batch(qe.QueryBatchRequest([
                qe.QueryRequest(limit=len(candidates), query=qe.Query.Nearest(v, using=name), filter=by_id)
                for name, v in vectors.items()
            ]))  # fmt: skip
            expected = [p.id for p in fuse(list(zip(vectors, everyone, strict=True)), 6)]
            assert len(candidates) > 6, "both legs found candidates of their own"

            results = await engine.query(query, dense, 6)

            assert [point_id("acme", c.chunk.document_id, c.chunk.chunk_index) for c in results] == expected, asked
    finally:
        await engine.close()


async def test_the_search_pool_has_the_threads_it_is_opened_with(tmp_path: Path) -> None:
    """RAG_EDGE_SEARCH_THREADS: the count is given on every open (the shard keeps the last one it was given), 0 is
    one per CPU; queries answer the same."""
    path = tmp_path / "shard"
    engine = EdgeEngine.open(path, DIMENSION)
    await fill(engine, 3, 2)
    await engine.close()
    query = RetrievalQuery("doc1 archive", tenant_id="acme")
    dense = random_document("doc1", 1, seed=1)[0].dense
    answers = []
    for threads, persisted in ((2, 2), (0, os.cpu_count()), (1, 1)):
        engine = EdgeEngine.open(path, DIMENSION, search_threads=threads)
        try:
            answers.append([(c.chunk.source_id, c.score) for c in await engine.query(query, dense, limit=3)])
        finally:
            await engine.close()
        assert json.loads((path / "edge_config.json").read_text())["max_search_threads"] == persisted
    assert answers[0][0][0] == "doc1:0" and all(answer == answers[0] for answer in answers)


async def test_index_terms_are_counted_whole_in_a_shard_an_older_version_wrote(tmp_path: Path) -> None:
    """Older versions stored a chunk's index terms as a list under a keyword index; this one stores one string
    under a text index split at spaces. Opened, an old shard counts its chunks and new ones alike, each term
    matched whole: names with dots, underscores, dashes or digits are not split, and case is kept."""
    path = tmp_path / "shard"
    old = qe.EdgeShard.create(str(path), shard_config(DIMENSION))
    old.update(qe.UpdateOperation.create_field_index("terms", qe.PayloadSchemaType.Keyword))
    written = Chunk("old", 0, "Set max_connections in pg_hba.conf, or pass --pgdata to 9.2.", tenant_id="acme")
    old.update(qe.UpdateOperation.upsert_points([qe.Point(point_id("acme", "old", 0), {"dense": [0.5] * DIMENSION},
                                                          payload(written))]))  # fmt: skip
    old.close()
    engine = EdgeEngine.open(path, DIMENSION)
    try:
        new = Chunk("new", 0, "The pg hba rules: see the conf file for the max connections.", tenant_id="acme")
        await engine.replace_document("acme", "new", [IndexedChunk(new, [0.25] * DIMENSION)])
        assert set(index_terms(written.text)) >= {"max_connections", "pg_hba.conf", "--pgdata", "9.2"}
        terms = ["max_connections", "pg_hba.conf", "--pgdata", "9.2", "max", "conf", "hba", "connect", "Conf"]
        counts = await engine.term_counts(RetrievalQuery("q", "acme"), terms)
        expected = {term: sum(term in index_terms(c.text) for c in (written, new)) for term in terms}
        assert counts == TermCounts(2, expected)
        # The new chunk holds the parts of both names, not the names: a term split like words would count it too.
        assert expected["pg_hba.conf"] == expected["max_connections"] == 1 and expected["conf"] == expected["max"] == 2
    finally:
        await engine.close()


async def test_a_shard_of_another_dimension_cannot_be_opened(tmp_path: Path) -> None:
    await EdgeEngine.open(tmp_path / "shard", dimension=384).close()

    with pytest.raises(RetrievalUnavailable, match="vector size"):
        EdgeEngine.open(tmp_path / "shard", dimension=768)


async def test_concurrent_queries_and_replacements_see_whole_documents(engine: EdgeEngine, embedder: MiniLMEmbedder) -> None:
    chunks = [Chunk("backups", i, f"Backup rule {i}.", tenant_id="acme") for i in range(3)]
    vectors = await embedder.embed_documents([c.text for c in chunks])
    indexed = [IndexedChunk(c, v) for c, v in zip(chunks, vectors, strict=True)]
    await engine.replace_document("acme", "backups", indexed)
    query = RetrievalQuery("backup rule", tenant_id="acme")

    async def replace() -> None:
        for _ in range(20):
            await engine.replace_document("acme", "backups", indexed)

    async def look() -> list[int]:
        return [len(await engine.query(query, vectors[0], 10)) for _ in range(40)]

    _, *seen = await asyncio.gather(replace(), look(), look())

    assert seen == [[3] * 40, [3] * 40]


async def test_the_index_is_built_in_the_background_while_queries_and_writes_go_on(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    engine = EdgeEngine.open(path, DIMENSION)
    try:
        await fill(engine, documents=30, chunks_each=100)
        query = RetrievalQuery("unmatched", tenant_id="acme")  # no BM25 hit: the dense leg alone orders the results
        probe = random_document("doc7", 100, seed=7)[42].dense
        before = [c.chunk.source_id for c in await engine.query(query, probe, 5)]
        assert before[0] == "doc7:42"

        gaps: list[float] = []
        answered = 0
        build = asyncio.create_task(engine.build_index())
        await eventually(path.with_name(path.name + BUILDING_SUFFIX).exists, within_s=30, every_s=0.001)
        # Writes during the build land in the live shard now and are replayed onto the optimized one.
        await engine.replace_document("acme", "late", random_document("late", 5, seed=99))
        assert await engine.delete_document("acme", "doc3") == 100
        last = time.perf_counter()
        while not build.done():
            results = await engine.query(query, probe, 5)
            answered += 1
            assert results[0].chunk.source_id == "doc7:42"
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now
        result = await build

        assert result is not None and engine.builds == [result]
        assert result.points == 3000
        assert result.replayed_writes == 2
        assert answered >= 5  # queries were answered all along the build
        assert max(gaps) < 1.0  # the event loop never stalled for the optimize (only for the short swap)
        assert await engine.count("acme") == 3000 - 100 + 5
        after = [c.chunk.source_id for c in await engine.query(query, probe, 5)]
        assert after[0] == "doc7:42"
        assert [x for x in after if x in before] == [x for x in before if not x.startswith("doc3:")]
        assert not any(x.startswith("doc3:") for x in after)
        late = random_document("late", 5, seed=99)[2].dense
        assert (await engine.query(query, late, 1))[0].chunk.source_id == "late:2"
        assert not path.with_name(path.name + BUILDING_SUFFIX).exists()
        assert not path.with_name(path.name + PREVIOUS_SUFFIX).exists()
    finally:
        await engine.close()
    reopened = EdgeEngine.open(path, DIMENSION)
    try:
        assert await reopened.count("acme") == 2905
    finally:
        await reopened.close()


async def test_a_large_ingest_schedules_a_build_once_writes_go_quiet(tmp_path: Path) -> None:
    # The quiet time must outlast any pause between two writes of one fill, even on a loaded machine (0.05 s
    # did not: a build started mid-fill with 500 points).
    engine = EdgeEngine.open(tmp_path / "shard", DIMENSION, index_after_points=500, index_delay_s=1.0)
    try:
        await fill(engine, documents=4, chunks_each=100)
        await asyncio.sleep(0.2)
        assert engine.builds == [] and not engine.indexing  # 400 new points: below the threshold
        await fill(engine, documents=6, chunks_each=100)
        await eventually(lambda: engine.builds, within_s=60, every_s=0.05)

        assert [b.points for b in engine.builds] == [600]  # the four rewritten documents and two new ones
        assert await engine.count("acme") == 600
    finally:
        await engine.close()


async def test_closing_during_a_build_stops_it_and_keeps_the_data(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    engine = EdgeEngine.open(path, DIMENSION)
    await fill(engine, documents=10, chunks_each=100)
    build = asyncio.create_task(engine.build_index())
    await eventually(path.with_name(path.name + BUILDING_SUFFIX).exists, within_s=30, every_s=0.001)

    await engine.close()

    assert build.done()
    assert not path.with_name(path.name + BUILDING_SUFFIX).exists()
    reopened = EdgeEngine.open(path, DIMENSION)
    try:
        assert await reopened.count("acme") == 1000
    finally:
        await reopened.close()


async def test_opening_recovers_from_a_swap_cut_short(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    engine = EdgeEngine.open(path, DIMENSION)
    await fill(engine, documents=2, chunks_each=10)
    await engine.close()
    # A crash between the swap's two renames leaves the previous shard aside and a half-built copy behind.
    os.rename(path, path.with_name(path.name + PREVIOUS_SUFFIX))
    path.with_name(path.name + BUILDING_SUFFIX).mkdir()
    (path.with_name(path.name + BUILDING_SUFFIX) / "junk").write_text("partial")

    reopened = EdgeEngine.open(path, DIMENSION)
    try:
        assert await reopened.count("acme") == 20
        assert not path.with_name(path.name + BUILDING_SUFFIX).exists()
        assert not path.with_name(path.name + PREVIOUS_SUFFIX).exists()
    finally:
        await reopened.close()
