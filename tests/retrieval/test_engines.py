"""One suite for both VectorEngines: the embedded one (qdrant-edge) and the Qdrant server one (qdrant-client, here
in its local mode). Same collection layout, same query semantics, same access rules."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragsvc.access import AccessPolicy
from ragsvc.config import RetrievalSettings
from ragsvc.domain import Chunk, DocumentSource, MetadataFilter, RetrievalQuery, StoredDocument
from ragsvc.errors import RetrievalUnavailable
from ragsvc.retrieval.base import IndexedChunk, VectorEngine
from ragsvc.retrieval.embedders import MiniLMEmbedder
from ragsvc.retrieval.hybrid import HybridRetriever
from ragsvc.retrieval.layout import REDACTED_TEXT
from tests.retrieval.conftest import ENGINE_KINDS, EngineKind, store

TEXTS = {
    "refunds": "Annual subscriptions can be refunded within 14 days of purchase.",
    "backups": "The storage cluster takes a snapshot backup every night at 2 am.",
    "vacation": "Employees accrue two vacation days per month of service.",
    "vpn": "Connect to the corporate VPN before opening the intranet.",
}


def chunk(document_id: str, index: int = 0, *, tenant: str = "acme", text: str | None = None, **fields: object) -> Chunk:
    return Chunk(document_id, index, text or TEXTS[document_id], tenant_id=tenant, **fields)  # type: ignore[arg-type]


async def search(
    engine: VectorEngine, embedder: MiniLMEmbedder, text: str, *, limit: int = 10, **fields: object
) -> list[tuple[str, int]]:
    query = RetrievalQuery(text, **{"tenant_id": "acme", **fields})  # type: ignore[arg-type]
    results = await engine.query(query, await embedder.embed_query(text), limit)
    return [(r.chunk.document_id, r.chunk.chunk_index) for r in results]


async def test_stored_chunks_come_back_with_their_metadata(any_engine: VectorEngine, embedder: MiniLMEmbedder) -> None:
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
        token_count=17,
    )
    await store(any_engine, embedder, [stored, chunk("backups")])

    results = await any_engine.query(
        RetrievalQuery("refund", tenant_id="acme", user_tags=("support",)),
        await embedder.embed_query("refund a subscription"),
        5,
    )

    assert results[0].chunk == stored
    assert [r.chunk.token_count for r in results] == [17, None]  # a chunk stored without a count has none
    assert not results[0].redacted
    assert results[0].dense.shape == (384,)
    assert float(np.linalg.norm(results[0].dense)) == pytest.approx(1.0, abs=1e-5)
    assert {r.chunk.document_id for r in results} == {"refunds", "backups"}


async def test_replacing_a_document_is_idempotent_and_drops_stale_chunks(
    any_engine: VectorEngine, embedder: MiniLMEmbedder
) -> None:
    three = [chunk("backups", i, text=f"Backup rule number {i} of the cluster.") for i in range(3)]
    await store(any_engine, embedder, [*three, chunk("vpn")])
    await store(any_engine, embedder, three)
    assert await any_engine.count() == 4

    await store(any_engine, embedder, three[:1])

    assert await any_engine.count() == 2
    assert sorted(await search(any_engine, embedder, "backup rule")) == [("backups", 0), ("vpn", 0)]


async def test_deleting_a_document_reports_how_many_chunks_it_had(any_engine: VectorEngine, embedder: MiniLMEmbedder) -> None:
    await store(any_engine, embedder, [chunk("backups", i, text=f"Backup rule {i}.") for i in range(3)] + [chunk("vpn")])

    assert await any_engine.delete_document("acme", "backups") == 3
    assert await any_engine.delete_document("acme", "backups") == 0
    assert await search(any_engine, embedder, "backup rule") == [("vpn", 0)]


async def test_a_tenant_sees_only_its_own_chunks(any_engine: VectorEngine, embedder: MiniLMEmbedder) -> None:
    await store(any_engine, embedder, [chunk("refunds"), chunk("refunds", tenant="globex"), chunk("vpn", tenant="globex")])

    assert await search(any_engine, embedder, "refund") == [("refunds", 0)]
    assert await any_engine.count("acme") == 1
    assert await any_engine.count("globex") == 2
    assert await any_engine.count("initech") == 0
    assert await any_engine.count() == 3
    assert await any_engine.delete_document("initech", "refunds") == 0
    assert await any_engine.count() == 3


async def test_tagged_chunks_are_visible_to_users_sharing_a_tag_and_untagged_ones_to_all(
    any_engine: VectorEngine, embedder: MiniLMEmbedder
) -> None:
    await store(
        any_engine,
        embedder,
        [chunk("refunds", tags=("billing",)), chunk("vacation", tags=("hr", "managers")), chunk("vpn")],
    )

    async def visible(*user_tags: str) -> set[str]:
        return {d for d, _ in await search(any_engine, embedder, "company policy", user_tags=user_tags)}

    assert await visible("billing") == {"refunds", "vpn"}
    assert await visible("managers", "sales") == {"vacation", "vpn"}
    assert await visible("sales") == {"vpn"}
    assert await visible("billing", "hr") == {"refunds", "vacation", "vpn"}
    assert await visible() == {"vpn"}  # no user tags: only what is untagged


async def test_the_hidden_untagged_policy_shows_only_chunks_sharing_a_tag(
    engine_kind: EngineKind, tmp_path: Path, embedder: MiniLMEmbedder
) -> None:
    engine = await engine_kind.open(tmp_path / "engine", access=AccessPolicy(untagged_visible=False))
    try:
        await store(engine, embedder, [chunk("refunds", tags=("billing",)), chunk("vacation", tags=("hr",)), chunk("vpn")])

        assert {d for d, _ in await search(engine, embedder, "policy", user_tags=("billing",))} == {"refunds"}
        assert {d for d, _ in await search(engine, embedder, "policy", user_tags=("hr", "x"))} == {"vacation"}
        assert await search(engine, embedder, "policy") == []  # no tags: nothing at all
    finally:
        await engine.close()


async def test_metadata_filters_keep_chunks_matching_any_listed_value(any_engine: VectorEngine, embedder: MiniLMEmbedder) -> None:
    await store(
        any_engine,
        embedder,
        [
            chunk("refunds", source_url="https://a.example/refunds", page_title="Billing", section="Refunds"),
            chunk("backups", source_url="https://a.example/ops", page_title="Operations", section="Backups"),
            chunk("vpn", source_url="https://b.example/it", page_title="Operations", section=None),
        ],
    )

    async def matching(filters: MetadataFilter) -> set[str]:
        return {d for d, _ in await search(any_engine, embedder, "policy", filters=filters)}

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
    any_engine: VectorEngine, embedder: MiniLMEmbedder
) -> None:
    await store(any_engine, embedder, [chunk(name) for name in TEXTS])
    vectors = dict(zip(TEXTS, await embedder.embed_documents(list(TEXTS.values())), strict=True))
    query = await embedder.embed_query(TEXTS["vacation"])

    results = await any_engine.query(RetrievalQuery(TEXTS["vacation"], tenant_id="acme"), query, 10)

    assert len(results) == 4
    assert results[0].chunk.document_id == "vacation"
    assert results[0].score == pytest.approx(1.0, abs=1e-4)
    for result in results:
        assert -1.0 <= result.score <= 1.0
        assert result.score == pytest.approx(float(np.dot(query, vectors[result.chunk.document_id])), abs=1e-4)
        assert np.allclose(result.dense, vectors[result.chunk.document_id], atol=1e-4)


async def test_a_word_only_bm25_finds_is_fused_in(any_engine: VectorEngine, embedder: MiniLMEmbedder) -> None:
    """The sparse leg: a chunk holding a rare token (an error code) that dense similarity alone ranks below the
    limit is among the fused results. The other chunks say the same as the query in other words, so that they
    lead the dense leg and share no token with it in the sparse leg: the fused order has no ties to break."""
    texts = [f"Office {i}: the ID card printing machine jammed and shows a fault while making visitor passes." for i in range(12)]
    texts.append("Parking garage level two reopens Monday; the contractor's ticket is ZX-4711.")
    await store(any_engine, embedder, [chunk("manual", i, text=t) for i, t in enumerate(texts)])
    query = "badge printer error ZX-4711"
    dense = await embedder.embed_query(query)
    similarities = np.asarray(await embedder.embed_documents(texts)) @ np.asarray(dense)
    assert int(np.argsort(-similarities).tolist().index(12)) >= 3  # dense alone would cut it at 3
    # Only chunk 12 shares a token with the query, so the sparse leg ranks it first: fused, it is in the top 3
    # whatever order the engine gives equal scores.

    results = await any_engine.query(RetrievalQuery(query, tenant_id="acme"), dense, 3)

    assert ("manual", 12) in [(r.chunk.document_id, r.chunk.chunk_index) for r in results]


async def test_equal_fused_scores_are_cut_at_the_limit_the_same_way_every_time(
    any_engine: VectorEngine, embedder: MiniLMEmbedder
) -> None:
    """The dense leg's best and the sparse leg's best (under RRF, equal scores: the embedded engine returned
    either at a limit of 1, as its hash order fell): the same question must draw the same evidence every time."""
    meaning = "Office: the ID card printing machine jammed and shows a fault while making visitor passes."
    token = "Parking garage level two reopens Monday; the contractor's ticket is ZX-4711."
    await store(any_engine, embedder, [chunk("manual", 0, text=meaning), chunk("manual", 1, text=token)])
    query = "badge printer error ZX-4711"
    dense = await embedder.embed_query(query)

    request = RetrievalQuery(query, tenant_id="acme")

    drawn = {
        tuple((r.chunk.document_id, r.chunk.chunk_index) for r in await any_engine.query(request, dense, 1)) for _ in range(40)
    }

    assert len(drawn) == 1, drawn


async def test_the_limit_caps_the_results(any_engine: VectorEngine, embedder: MiniLMEmbedder) -> None:
    await store(any_engine, embedder, [chunk("backups", i, text=f"Backup rule {i}.") for i in range(8)])

    assert len(await search(any_engine, embedder, "backup", limit=3)) == 3
    assert await search(any_engine, embedder, "backup", limit=0) == []


async def test_confidential_chunks_are_redacted_for_callers_without_clearance(
    any_engine: VectorEngine, embedder: MiniLMEmbedder
) -> None:
    secret = chunk("vacation", section="Leave", page_title="HR handbook", confidential=True, document_name="hr.md")
    await store(any_engine, embedder, [secret, chunk("vpn")])
    dense = await embedder.embed_query("vacation days")

    plain = await any_engine.query(RetrievalQuery("vacation days", tenant_id="acme"), dense, 5)
    cleared = await any_engine.query(RetrievalQuery("vacation days", tenant_id="acme", user_tags=("confidential",)), dense, 5)

    redacted = next(r for r in plain if r.chunk.document_id == "vacation")
    assert redacted.redacted
    assert redacted.chunk.text == REDACTED_TEXT
    assert (redacted.chunk.section, redacted.chunk.page_title) == (None, "")
    assert (redacted.chunk.document_name, redacted.chunk.confidential) == ("hr.md", True)
    assert redacted.score > 0.5  # still ranked by what it says
    readable = next(r for r in cleared if r.chunk.document_id == "vacation")
    assert not readable.redacted
    assert readable.chunk == secret
    assert all(not r.redacted for r in plain if r.chunk.document_id == "vpn")


async def test_chunks_of_another_document_are_refused(any_engine: VectorEngine) -> None:
    with pytest.raises(ValueError, match="not part of document"):
        await any_engine.replace_document("acme", "vpn", [IndexedChunk(chunk("refunds"), [0.1] * 384)])


def source(content: bytes, *, fingerprint: str = "f1", at: float = 1_790_000_000.0) -> DocumentSource:
    return DocumentSource(hashlib.sha256(content).hexdigest(), len(content), "text/markdown", fingerprint, at)


async def store_document(
    engine: VectorEngine, document_id: str, chunks: int, *, tenant: str = "acme", content: bytes | None = None, **fields: object
) -> None:
    text = f"Paragraph of {document_id}."
    stored_source = None if content is None else source(content)
    await engine.replace_document(
        tenant,
        document_id,
        [
            IndexedChunk(chunk(document_id, i, tenant=tenant, text=text, **fields), [0.1 + i] * 384, stored_source)
            for i in range(chunks)
        ],
    )


async def test_documents_are_listed_per_tenant_in_id_order_page_by_page(any_engine: VectorEngine) -> None:
    for name, chunks in [("zeta", 1), ("alpha", 3), ("guides.setup", 2), ("mid", 1)]:
        await store_document(any_engine, name, chunks, content=name.encode() * 10)
    await store_document(any_engine, "alpha", 2, tenant="globex", content=b"other tenant")

    first = await any_engine.list_documents("acme", limit=3)
    assert [(d.document_id, d.chunks) for d in first.documents] == [("alpha", 3), ("guides.setup", 2), ("mid", 1)]
    assert first.next_after == "mid"
    rest = await any_engine.list_documents("acme", after="mid", limit=3)
    assert [(d.document_id, d.chunks) for d in rest.documents] == [("zeta", 1)] and rest.next_after is None
    assert (await any_engine.list_documents("nobody", limit=3)).documents == []

    [globex] = (await any_engine.list_documents("globex", limit=10)).documents
    assert globex.chunks == 2 and globex.source == source(b"other tenant")


async def test_a_document_comes_back_with_its_source_and_fields(any_engine: VectorEngine) -> None:
    await store_document(
        any_engine,
        "refunds",
        2,
        content=b"# Refunds\n\n14 days.",
        document_name="refunds.md",
        page_title="Refunds",
        tags=("billing",),
        source_url="https://example.com/r",
        confidential=True,
    )
    await store_document(any_engine, "legacy", 1)  # stored without a source, as older versions did

    document = await any_engine.get_document("acme", "refunds")
    assert document == StoredDocument(
        document_id="refunds",
        name="refunds.md",
        title="Refunds",
        tags=("billing",),
        source_url="https://example.com/r",
        confidential=True,
        chunks=2,
        source=source(b"# Refunds\n\n14 days."),
    )
    legacy = await any_engine.get_document("acme", "legacy")
    assert legacy is not None and (legacy.chunks, legacy.source, legacy.name) == (1, None, "legacy")
    assert await any_engine.get_document("acme", "never") is None
    assert await any_engine.get_document("globex", "refunds") is None

    stats = await any_engine.stats("acme")
    assert (stats.documents, stats.chunks, stats.content_bytes) == (2, 3, len(b"# Refunds\n\n14 days."))
    assert "qdrant" in stats.engine.lower()
    assert (await any_engine.stats("globex")).documents == 0


async def test_replacing_a_document_replaces_its_source(any_engine: VectorEngine) -> None:
    await store_document(any_engine, "notes", 3, content=b"version one")
    await store_document(any_engine, "notes", 1, content=b"version two, longer")

    document = await any_engine.get_document("acme", "notes")
    assert document is not None and document.chunks == 1
    assert document.source == source(b"version two, longer")
    await any_engine.delete_document("acme", "notes")
    assert await any_engine.get_document("acme", "notes") is None


async def test_a_closed_engine_is_unavailable(any_engine: VectorEngine) -> None:
    await any_engine.check_health()
    await any_engine.close()
    await any_engine.close()

    with pytest.raises(RetrievalUnavailable):
        await any_engine.check_health()
    with pytest.raises(RetrievalUnavailable):
        await any_engine.count()


async def test_data_survives_close_and_reopen(engine_kind: EngineKind, tmp_path: Path, embedder: MiniLMEmbedder) -> None:
    path = tmp_path / "engine"
    engine = await engine_kind.open(path, persistent=True)
    await store(engine, embedder, [chunk("refunds"), chunk("vpn", tags=("it",)), chunk("backups", tenant="globex")])
    await engine.delete_document("globex", "backups")
    await engine.close()

    reopened = await engine_kind.open(path, persistent=True)
    try:
        assert await reopened.count("acme") == 2
        assert await reopened.count("globex") == 0
        assert await search(reopened, embedder, "vpn", user_tags=("hr",)) == [("refunds", 0)]
        await reopened.check_health()
    finally:
        await reopened.close()


async def test_both_engines_return_the_same_results(tmp_path: Path, embedder: MiniLMEmbedder) -> None:
    """Same fused order, same scores. (Texts of different lengths: where either leg has ties, such as identical BM25
    scores, each engine breaks them its own way.)"""
    chunks = [chunk(name, tags=("ops",) if name == "backups" else ()) for name in TEXTS]
    chunks += [
        chunk("notes", i, text=f"Note {i}: the VPN and the backup cluster share one gateway{' and router' * i}.")
        for i in range(4)
    ]
    engines = [await kind.open(tmp_path / kind.name) for kind in ENGINE_KINDS]
    try:
        for engine in engines:
            await store(engine, embedder, chunks)
        for text, tags in [("backup schedule", ("ops",)), ("VPN gateway", ()), ("refund window", ("ops", "x"))]:
            dense = await embedder.embed_query(text)
            query = RetrievalQuery(text, tenant_id="acme", user_tags=tags)
            edge, server = [await engine.query(query, dense, 6) for engine in engines]
            assert [(r.chunk.source_id, round(r.score, 4)) for r in edge] == [
                (r.chunk.source_id, round(r.score, 4)) for r in server
            ]
    finally:
        for engine in engines:
            await engine.close()


async def test_the_retriever_honours_the_per_request_options(any_engine: VectorEngine, embedder: MiniLMEmbedder) -> None:
    """top_k (1-20), score_threshold (0-1) and metadata filters, end to end through a real engine."""
    texts = [f"Backup rule {i}: snapshots of volume {i} are kept for {i + 1} weeks." for i in range(25)]
    chunks = [
        chunk(f"rules-{i}", text=t, source_url=f"https://ops.example/{i % 2}", section="Backups") for i, t in enumerate(texts)
    ]
    await store(any_engine, embedder, chunks)
    retriever = HybridRetriever(embedder, any_engine, RetrievalSettings(min_similarity=0.0, chunk_overlap_threshold=1.0))

    async def hits(**options: object) -> list[str]:
        query = RetrievalQuery("How long are backup snapshots kept?", **{"tenant_id": "acme", **options})  # type: ignore[arg-type]
        return [h.chunk.document_id for h in (await retriever.retrieve(query)).hits]

    assert len(await hits(top_k=1)) == 1
    assert len(await hits(top_k=7)) == 7
    assert len(await hits(top_k=20)) == 20
    assert await hits(top_k=5, score_threshold=1.0) == []
    strict = await retriever.retrieve(
        RetrievalQuery("How long are backup snapshots kept?", tenant_id="acme", top_k=5, score_threshold=0.6)
    )
    assert all(h.score >= 0.6 for h in strict.hits)
    assert all(r.score < 0.6 for r in strict.rejected)
    odd = await hits(top_k=20, filters=MetadataFilter(source_urls=("https://ops.example/1",)))
    assert sorted(odd) == sorted(f"rules-{i}" for i in range(1, 25, 2))
    assert await hits(top_k=5, filters=MetadataFilter(section_headings=("Restores",))) == []


# -- tenant isolation, as a property ------------------------------------------------------------------------------

TENANTS = ["acme", "globex", "initech"]
TAGS = ["hr", "finance", "ops", "legal"]
corpora = st.lists(
    st.tuples(st.sampled_from(TENANTS), st.frozensets(st.sampled_from(TAGS), max_size=3), st.booleans()),
    min_size=3,
    max_size=25,
)
callers = st.tuples(st.sampled_from(TENANTS), st.frozensets(st.sampled_from([*TAGS, "sales"]), max_size=3))
_examples = itertools.count()


@pytest.mark.parametrize("kind", ENGINE_KINDS, ids=lambda kind: kind.name)
@pytest.mark.parametrize("untagged_visible", [True, False], ids=["untagged-visible", "untagged-hidden"])
def test_no_chunk_of_another_tenant_or_without_a_shared_tag_is_ever_returned(
    kind: EngineKind, untagged_visible: bool, tmp_path: Path
) -> None:
    """Random corpora over a few tenants and tags, random callers: an engine returns exactly the chunks the
    access rule lets the caller see (nothing more, and with a limit above the corpus size nothing less)."""
    loop = asyncio.new_event_loop()
    policy = AccessPolicy(untagged_visible=untagged_visible)
    engine = loop.run_until_complete(kind.open(tmp_path / "engine", access=policy, dimension=16))
    rng = np.random.default_rng(7)
    returned: list[int] = []

    @settings(
        max_examples=30,
        deadline=None,
        derandomize=True,  # the same examples on every run (CI included)
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(corpus=corpora, caller=callers, query_vector=st.integers(0, 2**16))
    def check(corpus: list[tuple[str, frozenset[str], bool]], caller: tuple[str, frozenset[str]], query_vector: int) -> None:
        example = next(_examples)  # every example indexes into tenants of its own
        chunks = [
            Chunk(
                f"doc{i}",
                0,
                f"policy text number {i} about {' '.join(sorted(tags))}",
                tenant_id=f"{tenant}-{example}",
                tags=tuple(sorted(tags)),
                confidential=confidential,
            )
            for i, (tenant, tags, confidential) in enumerate(corpus)
        ]
        for c in chunks:
            vector = rng.standard_normal(16).tolist()
            loop.run_until_complete(engine.replace_document(c.tenant_id, c.document_id, [IndexedChunk(c, vector)]))
        tenant, tags = caller
        query = RetrievalQuery("policy text", tenant_id=f"{tenant}-{example}", user_tags=tuple(sorted(tags)))
        dense = np.random.default_rng(query_vector).standard_normal(16).tolist()

        results = loop.run_until_complete(engine.query(query, dense, len(chunks) + 5))
        returned.append(len(results))

        expected = {
            c.document_id
            for c in chunks
            if c.tenant_id == query.tenant_id and (set(c.tags) & tags or (not c.tags and untagged_visible))
        }
        assert {r.chunk.document_id for r in results} == expected
        for r in results:
            assert r.chunk.tenant_id == query.tenant_id
            assert set(r.chunk.tags) & tags or (not r.chunk.tags and untagged_visible)
            assert r.redacted == (r.chunk.confidential and "confidential" not in tags)

    try:
        check()
        assert len(returned) == 30 and sum(map(bool, returned)) >= 10  # exercised, on non-empty results too
    finally:
        loop.run_until_complete(engine.close())
        loop.close()


async def test_term_counts_are_document_frequencies_over_what_the_caller_sees(
    any_engine: VectorEngine, embedder: MiniLMEmbedder
) -> None:
    await store(
        any_engine,
        embedder,
        [
            chunk("refunds", page_title="Refund Policy"),
            chunk("vacation", tags=("hr",), text="Employees accrue two vacation days; see max_vacation_days."),
            chunk("vpn"),
            chunk("refunds", tenant="globex"),
        ],
    )
    terms = ["refund", "policy", "vacat", "max_vacation_days", "pgbouncer"]  # index terms: "vacation" stemmed

    everyone = await any_engine.term_counts(RetrievalQuery("x", "acme"), terms)
    hr = await any_engine.term_counts(RetrievalQuery("x", "acme", user_tags=("hr",)), terms)
    nobody = await any_engine.term_counts(RetrievalQuery("x", "initech"), terms)

    assert everyone.chunks == 2 and everyone.frequencies == {
        "refund": 1,
        "policy": 1,
        "vacat": 0,
        "max_vacation_days": 0,
        "pgbouncer": 0,
    }, "the page title counts; the hr chunk is not visible"
    assert hr.chunks == 3 and hr.frequencies["vacat"] == 1 and hr.frequencies["max_vacation_days"] == 1
    assert nobody.chunks == 0 and set(nobody.frequencies.values()) == {0}
    # Counts asked again after a write are the write's (the embedded engine keeps counts between writes).
    await any_engine.delete_document("acme", "refunds")
    assert (await any_engine.term_counts(RetrievalQuery("x", "acme"), ["refund"])).frequencies == {"refund": 0}
    await store(any_engine, embedder, [chunk("refunds")])
    assert (await any_engine.term_counts(RetrievalQuery("x", "acme"), ["refund"])).frequencies == {"refund": 1}
