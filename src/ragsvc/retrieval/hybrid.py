"""The Retriever: a hybrid (dense + BM25, RRF-fused) engine query, split at a cosine-similarity threshold."""

from __future__ import annotations

from ragsvc.domain import Retrieval, RetrievalQuery
from ragsvc.retrieval.base import Embedder, VectorEngine

MAX_REJECTED = 3


class HybridRetriever:
    """Asks the engine for `overfetch` x top_k fused candidates; those scoring at least the threshold are the hits
    (in fused order, at most top_k), the best few below it are reported as rejected."""

    def __init__(self, embedder: Embedder, engine: VectorEngine, *, min_similarity: float, overfetch: int = 3) -> None:
        if overfetch < 1:
            raise ValueError("overfetch must be at least 1")
        self._embedder = embedder
        self._engine = engine
        self._min_similarity = min_similarity
        self._overfetch = overfetch

    async def retrieve(self, query: RetrievalQuery) -> Retrieval:
        if query.top_k <= 0:
            return Retrieval()
        dense = await self._embedder.embed_query(query.text)
        candidates = await self._engine.query(query, dense, limit=query.top_k * self._overfetch)
        threshold = self._min_similarity if query.score_threshold is None else query.score_threshold
        hits = [c for c in candidates if c.score >= threshold][: query.top_k]
        below = sorted((c for c in candidates if c.score < threshold), key=lambda c: c.score, reverse=True)
        return Retrieval(hits=tuple(hits), rejected=tuple(below[:MAX_REJECTED]))

    async def check_health(self) -> None:
        await self._engine.check_health()
