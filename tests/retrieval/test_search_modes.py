"""Search modes (R-002-03) and chunk spans (R-004-03) on both engines: qdrant-edge and the Qdrant server engine over
qdrant-client's local mode."""

from __future__ import annotations

from ragsvc.domain import Chunk, RetrievalQuery, SearchMode
from ragsvc.retrieval.base import VectorEngine
from ragsvc.retrieval.embedders import MiniLMEmbedder
from tests.retrieval.conftest import store

# "pto" shares no word with the vacation text, which means the same thing; the backups text holds the rare word.
DOCUMENTS = {
    "vacation": "Employees accrue two vacation days per month of service.",
    "backups": "The storage cluster takes a snapshot backup every night at 2 am, tagged zq7.",
    "vpn": "Connect to the corporate VPN before opening the intranet.",
}


async def found(engine: VectorEngine, embedder: MiniLMEmbedder, text: str, mode: SearchMode) -> list[str]:
    query = RetrievalQuery(text, "acme", search_mode=mode)
    return [c.chunk.document_id for c in await engine.query(query, await embedder.embed_query(text), 10)]


async def test_each_mode_searches_its_own_vectors(any_engine: VectorEngine, embedder: MiniLMEmbedder) -> None:
    await store(any_engine, embedder, [Chunk(d, 0, text, tenant_id="acme") for d, text in DOCUMENTS.items()])
    # Words only: a rare word finds its one chunk, and a question sharing no word with any chunk finds nothing.
    assert await found(any_engine, embedder, "zq7", SearchMode.SPARSE) == ["backups"]
    assert await found(any_engine, embedder, "How much paid time off do staff earn?", SearchMode.SPARSE) == []
    # Meaning only: every chunk is some distance away, the closest in meaning first.
    dense = await found(any_engine, embedder, "How much paid time off do staff earn?", SearchMode.DENSE)
    assert dense[0] == "vacation" and sorted(dense) == sorted(DOCUMENTS)
    # Both, fused: the paraphrase still finds its chunk first, and the rare word its own.
    assert (await found(any_engine, embedder, "How much paid time off do staff earn?", SearchMode.HYBRID))[0] == "vacation"
    assert (await found(any_engine, embedder, "zq7", SearchMode.HYBRID))[0] == "backups"


async def test_filters_apply_in_every_mode(any_engine: VectorEngine, embedder: MiniLMEmbedder) -> None:
    await store(any_engine, embedder, [
        Chunk("backups", 0, DOCUMENTS["backups"], tenant_id="acme", tags=("ops",)),
        Chunk("backups", 0, DOCUMENTS["backups"], tenant_id="other"),
    ])  # fmt: skip
    for mode in SearchMode:
        query = RetrievalQuery("zq7 backup", "acme", user_tags=("sales",), search_mode=mode)
        assert await any_engine.query(query, await embedder.embed_query("zq7 backup"), 10) == [], mode


async def test_a_chunks_span_comes_back_and_old_chunks_have_none(any_engine: VectorEngine, embedder: MiniLMEmbedder) -> None:
    await store(any_engine, embedder, [
        Chunk("vacation", 0, DOCUMENTS["vacation"], tenant_id="acme", char_start=120, char_end=176, page_number=4),
        Chunk("vpn", 0, DOCUMENTS["vpn"], tenant_id="acme"),  # as stored before spans were recorded
    ])  # fmt: skip
    query = RetrievalQuery("vacation days", "acme")
    results = {c.chunk.document_id: c.chunk for c in await any_engine.query(query, await embedder.embed_query("x"), 10)}
    assert (results["vacation"].char_start, results["vacation"].char_end) == (120, 176)
    assert results["vacation"].page_numbers == (4,)
    assert (results["vpn"].char_start, results["vpn"].char_end) == (None, None)
    assert results["vpn"].page_numbers == ()
