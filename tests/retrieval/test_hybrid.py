from __future__ import annotations

from collections.abc import Sequence

import pytest

from ragsvc.domain import Chunk, RetrievalQuery, ScoredChunk
from ragsvc.errors import RetrievalUnavailable
from ragsvc.retrieval.base import IndexedChunk
from ragsvc.retrieval.edge import EdgeEngine
from ragsvc.retrieval.embedders import MiniLMEmbedder
from ragsvc.retrieval.hybrid import HybridRetriever
from tests.retrieval.conftest import store


class FixedEngine:
    """A VectorEngine answering every query with the same fused list, recording the limits it was asked for."""

    def __init__(self, scores: Sequence[float]) -> None:
        self.results = [ScoredChunk(Chunk(f"doc{i}", 0, f"text {i}"), s) for i, s in enumerate(scores)]
        self.limits: list[int] = []

    async def query(self, query: RetrievalQuery, dense: Sequence[float], limit: int) -> list[ScoredChunk]:
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


# Fused (RRF) order, deliberately not sorted by similarity.
FUSED = [0.55, 0.92, 0.20, 0.41, 0.10, 0.35, 0.28, 0.60, 0.05]


def ids(scored: Sequence[ScoredChunk]) -> list[str]:
    return [s.chunk.document_id for s in scored]


async def test_hits_keep_the_fused_order_and_rejected_are_the_best_below_the_threshold(
    embedder: MiniLMEmbedder,
) -> None:
    engine = FixedEngine(FUSED)
    retriever = HybridRetriever(embedder, engine, min_similarity=0.4)

    result = await retriever.retrieve(RetrievalQuery("q", tenant_id="t", top_k=3))

    assert engine.limits == [9]
    assert ids(result.hits) == ["doc0", "doc1", "doc3"]
    assert ids(result.rejected) == ["doc5", "doc6", "doc2"]
    assert [r.score for r in result.rejected] == [0.35, 0.28, 0.20]


async def test_top_k_cuts_the_hits(embedder: MiniLMEmbedder) -> None:
    retriever = HybridRetriever(embedder, FixedEngine(FUSED), min_similarity=0.0, overfetch=1)

    result = await retriever.retrieve(RetrievalQuery("q", tenant_id="t", top_k=4))

    assert ids(result.hits) == ["doc0", "doc1", "doc2", "doc3"]
    assert result.rejected == ()


async def test_a_request_threshold_overrides_the_configured_one(embedder: MiniLMEmbedder) -> None:
    retriever = HybridRetriever(embedder, FixedEngine(FUSED), min_similarity=0.4)

    strict = await retriever.retrieve(RetrievalQuery("q", tenant_id="t", top_k=3, score_threshold=0.95))
    lenient = await retriever.retrieve(RetrievalQuery("q", tenant_id="t", top_k=3, score_threshold=0.0))

    assert strict.hits == ()
    assert [r.score for r in strict.rejected] == [0.92, 0.60, 0.55]
    assert ids(lenient.hits) == ["doc0", "doc1", "doc2"]


async def test_a_score_equal_to_the_threshold_is_a_hit(embedder: MiniLMEmbedder) -> None:
    retriever = HybridRetriever(embedder, FixedEngine([0.41, 0.39]), min_similarity=0.41)

    result = await retriever.retrieve(RetrievalQuery("q", tenant_id="t", top_k=2))

    assert ids(result.hits) == ["doc0"]
    assert ids(result.rejected) == ["doc1"]


async def test_health_is_the_engines(embedder: MiniLMEmbedder) -> None:
    with pytest.raises(RetrievalUnavailable):
        await HybridRetriever(embedder, FixedEngine([]), min_similarity=0.3).check_health()


async def test_retrieves_relevant_evidence_from_a_real_engine(engine: EdgeEngine, embedder: MiniLMEmbedder) -> None:
    await store(
        engine,
        embedder,
        [
            Chunk("refunds", 0, "Annual subscriptions can be refunded within 14 days of purchase.", tenant_id="acme"),
            Chunk("backups", 0, "The storage cluster takes a snapshot backup every night.", tenant_id="acme"),
            Chunk("vpn", 0, "Connect to the corporate VPN before opening the intranet.", tenant_id="acme"),
        ],
    )
    retriever = HybridRetriever(embedder, engine, min_similarity=0.3)

    answerable = await retriever.retrieve(RetrievalQuery("Can I get a refund on my yearly plan?", tenant_id="acme"))
    off_topic = await retriever.retrieve(RetrievalQuery("What is the boiling point of tin?", tenant_id="acme"))

    assert ids(answerable.hits) == ["refunds"]
    assert answerable.hits[0].score >= 0.3
    assert off_topic.hits == ()
    assert len(off_topic.rejected) == 3
    assert all(r.score < 0.3 for r in off_topic.rejected)
    assert [r.score for r in off_topic.rejected] == sorted((r.score for r in off_topic.rejected), reverse=True)
