from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from ragsvc.domain import Chunk, MetadataFilter, RetrievalQuery
from ragsvc.errors import RetrievalUnavailable
from ragsvc.retrieval.base import IndexedChunk
from ragsvc.retrieval.edge import EdgeEngine
from ragsvc.retrieval.embedders import MiniLMEmbedder
from tests.retrieval.conftest import store

TEXTS = {
    "refunds": "Annual subscriptions can be refunded within 14 days of purchase.",
    "backups": "The storage cluster takes a snapshot backup every night at 2 am.",
    "vacation": "Employees accrue two vacation days per month of service.",
    "vpn": "Connect to the corporate VPN before opening the intranet.",
}


def chunk(
    document_id: str, index: int = 0, *, tenant: str = "acme", text: str | None = None, **fields: object
) -> Chunk:
    return Chunk(document_id, index, text or TEXTS[document_id], tenant_id=tenant, **fields)  # type: ignore[arg-type]


async def search(
    engine: EdgeEngine, embedder: MiniLMEmbedder, text: str, *, limit: int = 10, **fields: object
) -> list[tuple[str, int]]:
    query = RetrievalQuery(text, **{"tenant_id": "acme", **fields})  # type: ignore[arg-type]
    results = await engine.query(query, await embedder.embed_query(text), limit)
    return [(r.chunk.document_id, r.chunk.chunk_index) for r in results]


async def test_stored_chunks_come_back_with_their_metadata(engine: EdgeEngine, embedder: MiniLMEmbedder) -> None:
    stored = chunk(
        "refunds",
        document_name="refunds.md",
        tags=("billing", "support"),
        source_url="https://example.com/refunds",
        page_title="Refund policy",
        section="Annual plans",
        page_number=3,
        trust=0.8,
        published_at="2025-01-31",
    )
    await store(engine, embedder, [stored, chunk("backups")])

    results = await engine.query(
        RetrievalQuery("refund", tenant_id="acme", user_tags=("support",)),
        await embedder.embed_query("refund a subscription"),
        5,
    )

    assert results[0].chunk == stored
    assert {r.chunk.document_id for r in results} == {"refunds", "backups"}


async def test_replacing_a_document_is_idempotent_and_drops_stale_chunks(
    engine: EdgeEngine, embedder: MiniLMEmbedder
) -> None:
    three = [chunk("backups", i, text=f"Backup rule number {i} of the cluster.") for i in range(3)]
    await store(engine, embedder, [*three, chunk("vpn")])
    await store(engine, embedder, three)
    assert await engine.count() == 4

    await store(engine, embedder, three[:1])

    assert await engine.count() == 2
    assert sorted(await search(engine, embedder, "backup rule")) == [("backups", 0), ("vpn", 0)]


async def test_deleting_a_document_reports_how_many_chunks_it_had(
    engine: EdgeEngine, embedder: MiniLMEmbedder
) -> None:
    await store(engine, embedder, [chunk("backups", i, text=f"Backup rule {i}.") for i in range(3)] + [chunk("vpn")])

    assert await engine.delete_document("acme", "backups") == 3
    assert await engine.delete_document("acme", "backups") == 0
    assert await search(engine, embedder, "backup rule") == [("vpn", 0)]


async def test_a_tenant_sees_only_its_own_chunks(engine: EdgeEngine, embedder: MiniLMEmbedder) -> None:
    await store(engine, embedder, [chunk("refunds"), chunk("refunds", tenant="globex"), chunk("vpn", tenant="globex")])

    assert await search(engine, embedder, "refund") == [("refunds", 0)]
    assert await engine.count("acme") == 1
    assert await engine.count("globex") == 2
    assert await engine.count("initech") == 0
    assert await engine.count() == 3
    assert await engine.delete_document("initech", "refunds") == 0
    assert await engine.count() == 3


async def test_tagged_chunks_are_visible_to_users_sharing_a_tag_and_untagged_ones_to_all(
    engine: EdgeEngine, embedder: MiniLMEmbedder
) -> None:
    await store(
        engine,
        embedder,
        [chunk("refunds", tags=("billing",)), chunk("vacation", tags=("hr", "managers")), chunk("vpn")],
    )

    async def visible(*user_tags: str) -> set[str]:
        return {d for d, _ in await search(engine, embedder, "company policy", user_tags=user_tags)}

    assert await visible("billing") == {"refunds", "vpn"}
    assert await visible("managers", "sales") == {"vacation", "vpn"}
    assert await visible("sales") == {"vpn"}
    assert await visible("billing", "hr") == {"refunds", "vacation", "vpn"}
    assert await visible() == {"vpn"}  # no user tags: only what is untagged


async def test_metadata_filters_keep_chunks_matching_any_listed_value(
    engine: EdgeEngine, embedder: MiniLMEmbedder
) -> None:
    await store(
        engine,
        embedder,
        [
            chunk("refunds", source_url="https://a.example/refunds", page_title="Billing", section="Refunds"),
            chunk("backups", source_url="https://a.example/ops", page_title="Operations", section="Backups"),
            chunk("vpn", source_url="https://b.example/it", page_title="Operations", section=None),
        ],
    )

    async def matching(filters: MetadataFilter) -> set[str]:
        return {d for d, _ in await search(engine, embedder, "policy", filters=filters)}

    assert await matching(MetadataFilter(source_urls=("https://a.example/ops",))) == {"backups"}
    assert await matching(MetadataFilter(source_urls=("https://a.example/ops", "https://b.example/it"))) == {
        "backups",
        "vpn",
    }
    assert await matching(MetadataFilter(page_titles=("Operations",))) == {"backups", "vpn"}
    assert await matching(MetadataFilter(section_headings=("Refunds", "Backups"))) == {"refunds", "backups"}
    assert await matching(MetadataFilter(page_titles=("Operations",), section_headings=("Refunds",))) == set()
    assert await matching(MetadataFilter()) == {"refunds", "backups", "vpn"}


async def test_scores_are_cosine_similarities_and_an_exact_text_match_scores_highest(
    engine: EdgeEngine, embedder: MiniLMEmbedder
) -> None:
    chunks = [chunk(name) for name in TEXTS]
    await store(engine, embedder, chunks)
    vectors = dict(zip(TEXTS, await embedder.embed_documents(list(TEXTS.values())), strict=True))
    query = await embedder.embed_query(TEXTS["vacation"])

    results = await engine.query(RetrievalQuery(TEXTS["vacation"], tenant_id="acme"), query, 10)

    assert len(results) == 4
    assert results[0].chunk.document_id == "vacation"
    assert results[0].score == pytest.approx(1.0, abs=1e-4)
    for result in results:
        assert -1.0 <= result.score <= 1.0
        assert result.score == pytest.approx(float(np.dot(query, vectors[result.chunk.document_id])), abs=1e-4)


async def test_the_limit_caps_the_results(engine: EdgeEngine, embedder: MiniLMEmbedder) -> None:
    await store(engine, embedder, [chunk("backups", i, text=f"Backup rule {i}.") for i in range(8)])

    assert len(await search(engine, embedder, "backup", limit=3)) == 3


async def test_data_survives_close_and_reopen(tmp_path: Path, embedder: MiniLMEmbedder) -> None:
    path = tmp_path / "shard"
    engine = EdgeEngine.open(path)
    await store(engine, embedder, [chunk("refunds"), chunk("vpn", tags=("it",))])
    with pytest.raises(RetrievalUnavailable):
        EdgeEngine.open(path)  # one owner per shard directory
    await engine.close()
    await engine.close()

    reopened = EdgeEngine.open(path)
    try:
        assert await reopened.count("acme") == 2
        assert await search(reopened, embedder, "vpn", user_tags=("hr",)) == [("refunds", 0)]
        await reopened.check_health()
    finally:
        await reopened.close()


async def test_a_closed_engine_is_unavailable(engine: EdgeEngine) -> None:
    await engine.check_health()
    await engine.close()

    with pytest.raises(RetrievalUnavailable):
        await engine.check_health()
    with pytest.raises(RetrievalUnavailable):
        await engine.count()


async def test_a_shard_of_another_dimension_cannot_be_opened(tmp_path: Path) -> None:
    await EdgeEngine.open(tmp_path / "shard", dimension=384).close()

    with pytest.raises(RetrievalUnavailable, match="vector size"):
        EdgeEngine.open(tmp_path / "shard", dimension=768)


async def test_chunks_of_another_document_are_refused(engine: EdgeEngine) -> None:
    with pytest.raises(ValueError, match="not part of document"):
        await engine.replace_document("acme", "vpn", [IndexedChunk(chunk("refunds"), [0.1] * 384)])


async def test_concurrent_queries_and_replacements_see_whole_documents(
    engine: EdgeEngine, embedder: MiniLMEmbedder
) -> None:
    chunks = [chunk("backups", i, text=f"Backup rule {i}.") for i in range(3)]
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
