"""The retriever's quality pipeline (R-000-19, R-003-08) over scripted engine results, then over real engines."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence

import numpy as np
import pytest

from ragsvc.config import RetrievalSettings
from ragsvc.domain import Chunk, RetrievalQuery, ScoredChunk
from ragsvc.errors import RetrievalUnavailable
from ragsvc.retrieval.base import Candidate, IndexedChunk, VectorEngine
from ragsvc.retrieval.embedders import MiniLMEmbedder
from ragsvc.retrieval.hybrid import OVERFETCH, HybridRetriever
from ragsvc.retrieval.layout import redact
from ragsvc.retrieval.quality import RRF_K, RankingWeights, fused_relevance, recency_boost
from tests.retrieval.conftest import store

TODAY = dt.date(2026, 6, 30)


def axis(i: int, dimension: int = 64) -> np.ndarray:
    """A unit vector of its own for each i: distinct candidates are orthogonal, hence never near-duplicates."""
    vector = np.zeros(dimension, dtype=np.float32)
    vector[i] = 1.0
    return vector


def candidate(
    document_id: str, score: float, *, index: int = 0, vector: np.ndarray | None = None, redacted: bool = False, **fields: object
) -> Candidate:
    chunk = Chunk(document_id, index, f"text of {document_id}:{index}", tenant_id="t", **fields)  # type: ignore[arg-type]
    return Candidate(
        redact(chunk) if redacted else chunk,
        score,
        axis(hash((document_id, index)) % 64) if vector is None else vector,
        redacted=redacted,
    )


class FixedEngine:
    """A VectorEngine answering every query with the same fused list, recording the limits it was asked for."""

    def __init__(self, results: Sequence[Candidate]) -> None:
        self.results = list(results)
        self.limits: list[int] = []

    async def query(self, query: RetrievalQuery, dense: Sequence[float], limit: int) -> list[Candidate]:
        self.limits.append(limit)
        return self.results[:limit]

    async def replace_document(self, tenant_id: str, document_id: str, chunks: Sequence[IndexedChunk]) -> None:
        raise NotImplementedError

    async def delete_document(self, tenant_id: str, document_id: str) -> int:
        raise NotImplementedError

    async def count(self, tenant_id: str | None = None) -> int:
        return len(self.results)

    async def check_health(self) -> None:
        raise RetrievalUnavailable("engine down")

    async def close(self) -> None:
        pass


def scripted(scores: Sequence[float]) -> FixedEngine:
    return FixedEngine([candidate(f"doc{i}", s, vector=axis(i)) for i, s in enumerate(scores)])


def retriever_over(
    engine: VectorEngine, embedder: MiniLMEmbedder, weights: RankingWeights | None = None, **settings: object
) -> HybridRetriever:
    """A retriever with RetrievalSettings `settings` (by field name; min_similarity 0 unless given)."""
    if weights is not None:
        settings |= {"similarity_weight": weights.similarity, "recency_weight": weights.recency, "trust_weight": weights.trust}
    return HybridRetriever(embedder, engine, RetrievalSettings(**{"min_similarity": 0.0, **settings}), today=lambda: TODAY)


def ids(scored: Sequence[ScoredChunk]) -> list[str]:
    return [s.chunk.document_id for s in scored]


# The engine's fused order, deliberately not sorted by similarity.
FUSED = [0.55, 0.92, 0.20, 0.41, 0.10, 0.35, 0.28, 0.60, 0.05]


async def test_it_over_fetches_three_times_top_k_and_splits_at_the_threshold(embedder: MiniLMEmbedder) -> None:
    engine = scripted(FUSED)
    retriever = retriever_over(engine, embedder, min_similarity=0.4)

    result = await retriever.retrieve(RetrievalQuery("q", tenant_id="t", top_k=3))

    assert engine.limits == [9]
    assert ids(result.hits) == ["doc0", "doc1", "doc3"]  # in the fused order (equal recency and trust), not by similarity
    assert ids(result.rejected) == ["doc5", "doc6", "doc2"]
    assert [r.score for r in result.rejected] == [0.35, 0.28, 0.20]
    assert result.redacted == () and not result.redactions_applied


async def test_top_k_cuts_the_hits(embedder: MiniLMEmbedder) -> None:
    engine = scripted(FUSED)
    retriever = retriever_over(engine, embedder)

    result = await retriever.retrieve(RetrievalQuery("q", tenant_id="t", top_k=2))

    assert engine.limits == [2 * OVERFETCH]
    assert ids(result.hits) == ["doc0", "doc1"]  # the first two of the six fetched in the fused order
    assert result.rejected == ()


async def test_a_request_threshold_overrides_the_configured_one(embedder: MiniLMEmbedder) -> None:
    retriever = retriever_over(scripted(FUSED), embedder, min_similarity=0.4)

    strict = await retriever.retrieve(RetrievalQuery("q", tenant_id="t", top_k=3, score_threshold=0.95))
    lenient = await retriever.retrieve(RetrievalQuery("q", tenant_id="t", top_k=3, score_threshold=0.0))

    assert strict.hits == ()
    assert [r.score for r in strict.rejected] == [0.92, 0.60, 0.55]
    assert ids(lenient.hits) == ["doc0", "doc1", "doc2"]


async def test_a_score_equal_to_the_threshold_is_a_hit(embedder: MiniLMEmbedder) -> None:
    retriever = retriever_over(scripted([0.41, 0.39]), embedder, min_similarity=0.41)

    result = await retriever.retrieve(RetrievalQuery("q", tenant_id="t", top_k=2))

    assert ids(result.hits) == ["doc0"]
    assert ids(result.rejected) == ["doc1"]


async def test_near_duplicates_keep_only_the_best_ranked(embedder: MiniLMEmbedder) -> None:
    base = axis(0)
    almost = base + 0.3 * axis(1)  # cosine 0.958 to base
    related = base + 0.6 * axis(2)  # cosine 0.857 to base
    engine = FixedEngine(
        [
            candidate("a", 0.70, vector=almost / np.linalg.norm(almost)),
            candidate("b", 0.80, vector=base),
            candidate("c", 0.60, vector=related / np.linalg.norm(related)),
            candidate("d", 0.50, vector=base),
        ]
    )

    default = await retriever_over(engine, embedder).retrieve(RetrievalQuery("q", tenant_id="t", top_k=5))
    strict = await retriever_over(engine, embedder, chunk_overlap_threshold=0.8).retrieve(
        RetrievalQuery("q", tenant_id="t", top_k=5)
    )
    off = await retriever_over(engine, embedder, chunk_overlap_threshold=1.0).retrieve(
        RetrievalQuery("q", tenant_id="t", top_k=5)
    )

    assert ids(default.hits) == ["a", "c"]  # b (0.958) and d (0.958) duplicate a; c (0.821 to a) stays under 0.9
    assert ids(strict.hits) == ["a"]
    assert ids(off.hits) == ["a", "b", "c", "d"]  # only cosines above 1.0 would be duplicates


async def test_each_document_contributes_at_most_the_cap(embedder: MiniLMEmbedder) -> None:
    engine = FixedEngine(
        [candidate("big", 0.9 - i / 100, index=i, vector=axis(i)) for i in range(6)]
        + [candidate("small", 0.5, vector=axis(10)), candidate("other", 0.4, vector=axis(11))]
    )

    capped = await retriever_over(engine, embedder).retrieve(RetrievalQuery("q", tenant_id="t", top_k=5))
    one = await retriever_over(engine, embedder, max_chunks_per_doc=1).retrieve(RetrievalQuery("q", tenant_id="t", top_k=5))

    assert [(h.chunk.document_id, h.chunk.chunk_index) for h in capped.hits] == [
        ("big", 0),
        ("big", 1),
        ("big", 2),
        ("small", 0),
        ("other", 0),
    ]
    assert ids(one.hits) == ["big", "small", "other"]


async def test_ranking_weighs_the_fused_order_recency_and_trust(embedder: MiniLMEmbedder) -> None:
    engine = FixedEngine(
        [
            candidate("undated", 0.75, vector=axis(2), trust=0.5),
            candidate("fresh", 0.70, vector=axis(1), published_at="2026-06-20", trust=0.5),
            candidate("old-trusted", 0.80, vector=axis(0), published_at="2019-01-01", trust=1.0),
        ]
    )
    query = RetrievalQuery("q", tenant_id="t", top_k=3)

    default = await retriever_over(engine, embedder).retrieve(query)
    relevance_only = await retriever_over(engine, embedder, weights=RankingWeights(1.0, 0.0, 0.0)).retrieve(query)
    trust_heavy = await retriever_over(engine, embedder, weights=RankingWeights(0.1, 0.0, 1.0)).retrieve(query)
    recency_heavy = await retriever_over(engine, embedder, weights=RankingWeights(0.7, 1.0, 0.0)).retrieve(query)

    # relevance by fused place 1, 60/61, 60/62; default: undated 0.7+0+0.05=0.75, fresh 0.689+0.06+0.05=0.799,
    # old 0.677+0+0.1=0.777
    assert ids(default.hits) == ["fresh", "old-trusted", "undated"]
    assert ids(relevance_only.hits) == ["undated", "fresh", "old-trusted"]
    assert ids(trust_heavy.hits) == ["old-trusted", "undated", "fresh"]
    assert ids(recency_heavy.hits) == ["fresh", "undated", "old-trusted"]
    assert [h.score for h in default.hits] == [0.70, 0.80, 0.75]  # scores stay the cosine similarities


async def test_new_weights_rank_from_the_next_query_on(embedder: MiniLMEmbedder) -> None:
    engine = FixedEngine(
        [
            candidate("old-trusted", 0.80, vector=axis(0), published_at="2019-01-01", trust=1.0),
            candidate("fresh", 0.70, vector=axis(1), published_at="2026-06-20", trust=0.5),
        ]
    )
    retriever = retriever_over(engine, embedder)
    query = RetrievalQuery("q", tenant_id="t", top_k=2)
    assert retriever.weights == RankingWeights(0.7, 0.2, 0.1)
    assert ids((await retriever.retrieve(query)).hits) == ["old-trusted", "fresh"]

    retriever.use_weights(RankingWeights(0.7, 1.0, 0.0))
    assert retriever.weights == RankingWeights(0.7, 1.0, 0.0)
    assert ids((await retriever.retrieve(query)).hits) == ["fresh", "old-trusted"]


@pytest.mark.parametrize(
    ("published", "boost"),
    [
        ("2026-06-30", 0.3),
        ("2026-05-31", 0.3),
        ("2026-05-30", 0.2),
        ("2026-04-01", 0.2),
        ("2026-03-31", 0.1),
        ("2025-06-30", 0.1),
        ("2025-06-29", 0.0),
        ("2027-01-01", 0.3),
        ("2026-06-01T10:00:00Z", 0.3),
        ("", 0.0),
        ("not a date", 0.0),
    ],
)
def test_recency_boost_steps(published: str, boost: float) -> None:
    assert recency_boost(published, TODAY) == boost


async def test_confidential_chunks_are_reported_redacted_never_as_evidence(embedder: MiniLMEmbedder) -> None:
    engine = FixedEngine(
        [
            candidate("secret", 0.9, vector=axis(0), redacted=True, confidential=True),
            candidate("public", 0.6, vector=axis(1)),
            candidate("faint-secret", 0.1, vector=axis(2), redacted=True, confidential=True),
        ]
    )

    result = await retriever_over(engine, embedder, min_similarity=0.3).retrieve(RetrievalQuery("q", tenant_id="t"))

    assert ids(result.hits) == ["public"]
    assert ids(result.redacted) == ["secret"]  # only what would have been evidence
    assert result.redacted[0].chunk.text == "[REDACTED]"
    assert result.redactions_applied
    assert result.rejected == ()


async def test_health_is_the_engines(embedder: MiniLMEmbedder) -> None:
    with pytest.raises(RetrievalUnavailable):
        await retriever_over(scripted([]), embedder).check_health()


async def test_retrieves_relevant_evidence_from_real_engines(any_engine: VectorEngine, embedder: MiniLMEmbedder) -> None:
    await store(
        any_engine,
        embedder,
        [
            Chunk("refunds", 0, "Annual subscriptions can be refunded within 14 days of purchase.", tenant_id="acme"),
            Chunk("refunds", 1, "Annual subscriptions can be refunded within 14 days of the purchase.", tenant_id="acme"),
            Chunk("backups", 0, "The storage cluster takes a snapshot backup every night.", tenant_id="acme"),
            Chunk("vpn", 0, "Connect to the corporate VPN before opening the intranet.", tenant_id="acme"),
        ],
    )
    retriever = HybridRetriever(embedder, any_engine, RetrievalSettings(min_similarity=0.3))

    answerable = await retriever.retrieve(RetrievalQuery("Can I get a refund on my yearly plan?", tenant_id="acme"))
    off_topic = await retriever.retrieve(RetrievalQuery("What is the boiling point of tin?", tenant_id="acme"))

    assert ids(answerable.hits) == ["refunds"]  # one of its two chunks: they are near-duplicates
    assert answerable.hits[0].score >= 0.3
    assert off_topic.hits == ()
    assert len(off_topic.rejected) == 3
    assert all(r.score < 0.3 for r in off_topic.rejected)
    assert [r.score for r in off_topic.rejected] == sorted((r.score for r in off_topic.rejected), reverse=True)


async def test_the_per_document_cap_holds_on_real_engines(any_engine: VectorEngine, embedder: MiniLMEmbedder) -> None:
    backups = [
        "The storage cluster takes a snapshot backup every night at two.",
        "Backups of the storage cluster are kept for thirty days.",
        "A backup of the storage cluster can be restored by the on-call engineer.",
        "Weekly full backups of the storage cluster go to the second data centre.",
        "The backup job of the storage cluster reports its result to the operations channel.",
    ]
    chunks = [Chunk("backups", i, text, tenant_id="acme") for i, text in enumerate(backups)]
    chunks.append(Chunk("dr-plan", 0, "Disaster recovery restores the storage cluster from its last backup.", tenant_id="acme"))
    await store(any_engine, embedder, chunks)
    retriever = HybridRetriever(embedder, any_engine, RetrievalSettings(min_similarity=0.1, max_chunks_per_doc=2))

    result = await retriever.retrieve(RetrievalQuery("How are storage cluster backups made?", tenant_id="acme", top_k=5))

    found = ids(result.hits)
    assert found.count("backups") == 2, "capped at two chunks of one document"
    assert "dr-plan" in found, "the cap leaves room for other documents"


async def test_the_fused_order_ranks_not_the_cosine_similarity_alone(embedder: MiniLMEmbedder) -> None:
    # BM25 ranks the entry naming what is asked first; the passage naming it in passing is nearer in meaning.
    entry = Chunk("config", 3, "max_wal_size (integer)\n\nMaximum size to let the WAL grow. The default is 1 GB.", tenant_id="t")
    passing = Chunk("wal", 0, "Independently of max_wal_size, recent WAL files are kept.", tenant_id="t")
    engine = FixedEngine([Candidate(entry, 0.59, axis(1)), Candidate(passing, 0.66, axis(0))])

    hits = (await retriever_over(engine, embedder).retrieve(RetrievalQuery("max_wal_size default", "t", top_k=2))).hits

    assert ids(hits) == ["config", "wal"]
    assert [h.score for h in hits] == [0.59, 0.66], "scores stay the cosine similarities"
    assert fused_relevance(3) == [1.0, RRF_K / (RRF_K + 1), RRF_K / (RRF_K + 2)]


def test_a_ranked_candidate_is_the_candidate_replaced_field_by_field() -> None:
    candidate = Candidate(Chunk("doc", 3, "text", tenant_id="t"), 0.8, np.ones(3), redacted=True, reading="[2]")
    assert {f.name for f in dataclasses.fields(Candidate)} == {
        "chunk", "score", "dense", "redacted", "rank_score", "reading",
    }, "a new field: `ranked` must carry it"  # fmt: skip

    ranked = candidate.ranked(0.5)

    assert ranked == dataclasses.replace(candidate, rank_score=0.5)
    assert ranked.dense is candidate.dense and ranked.reading == candidate.reading, "not compared by =="
