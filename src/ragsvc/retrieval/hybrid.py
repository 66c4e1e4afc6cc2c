"""The Retriever: a hybrid (dense + BM25, fused by their scores) engine query followed by the quality pipeline.

General mode (R-000-19's pipeline, R-003-08's ranking):

1. over-fetch: ask the engine for OVERFETCH x top_k fused candidates (access and metadata filters are applied
   inside the engine query);
2. minimum similarity: candidates below the threshold (the request's score_threshold, else
   RAG_MIN_SIMILARITY_SCORE) are not evidence; the best few are reported as `rejected`;
3. redaction: confidential chunks the caller may not read (already redacted by the engine) are never evidence;
   they are reported in `redacted`, which sets the answer's redactions_applied flag;
4. rank: relevance, recency boost and source trust, weighted (RAG_SIMILARITY_WEIGHT ...), the relevance being
   the candidate's place in the engine's fused order (quality.fused_relevance), not its cosine similarity alone;
5. near-duplicates: a candidate whose dense vector is closer than RAG_CHUNK_OVERLAP_THRESHOLD (cosine) to a
   better-ranked one is dropped;
6. per-document cap: at most RAG_MAX_CHUNKS_PER_DOC chunks of one document;
7. top-k.

Selected-text mode (R-001-06): the passages of the caller's selection, scored against the query with the same
embedder; the engine is never called.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from ragsvc.config import RetrievalSettings
from ragsvc.domain import Retrieval, RetrievalQuery, ScoredChunk, TermCounts
from ragsvc.retrieval.base import Candidate, Embedder, VectorEngine
from ragsvc.retrieval.layout import cosines, unit_rows
from ragsvc.retrieval.quality import (
    RankingWeights,
    cap_per_document,
    drop_near_duplicates,
    fused_relevance,
    rank,
)
from ragsvc.retrieval.selection import split_selection

MAX_REJECTED = 3


OVERFETCH = 3  # candidates asked of the engine per chunk wanted


class HybridRetriever:
    def __init__(
        self,
        embedder: Embedder,
        engine: VectorEngine,
        settings: RetrievalSettings,
        *,
        today: Callable[[], dt.date] = dt.date.today,
    ) -> None:
        self._embedder = embedder
        self._engine = engine
        self._min_similarity = settings.min_similarity
        self._overlap_threshold = settings.chunk_overlap_threshold
        self._max_per_document = settings.max_chunks_per_doc
        self._weights = RankingWeights(settings.similarity_weight, settings.recency_weight, settings.trust_weight)
        self._today = today

    @property
    def weights(self) -> RankingWeights:
        return self._weights

    def use_weights(self, weights: RankingWeights) -> None:
        """Rank with `weights` from the next query on (see management/ranking.py)."""
        self._weights = weights

    async def retrieve(self, query: RetrievalQuery) -> Retrieval:
        if query.top_k <= 0:
            return Retrieval()
        started = time.perf_counter()
        dense = await self._embedder.embed_query(query.text)
        embedded = time.perf_counter()
        candidates = await self._engine.query(query, dense, limit=query.top_k * OVERFETCH)
        store_ms = (time.perf_counter() - embedded) * 1000
        threshold = self._min_similarity if query.score_threshold is None else query.score_threshold
        # Each candidate with its relevance, its place in the engine's fused order among all it returned.
        fused = zip(candidates, fused_relevance(len(candidates)), strict=True)
        passing = [(c, relevance) for c, relevance in fused if c.score >= threshold]
        ranked = rank([(c, relevance) for c, relevance in passing if not c.redacted], self._weights, self._today())
        hits = cap_per_document(drop_near_duplicates(ranked, self._overlap_threshold), self._max_per_document)
        redacted = [c.scored for c, _ in passing if c.redacted]
        return Retrieval(
            hits=tuple(c.scored for c in hits[: query.top_k]),
            rejected=_best_below(c for c in candidates if c.score < threshold and not c.redacted),
            redacted=tuple(redacted[: query.top_k]),
            embedding_ms=(embedded - started) * 1000,
            store_ms=store_ms,
        )

    async def retrieve_selection(
        self, query: str, selection: str, *, top_k: int, score_threshold: float | None = None
    ) -> Retrieval:
        passages = split_selection(selection)
        if not passages or top_k <= 0:
            return Retrieval()
        dense = await self._embedder.embed_query(query)
        vectors = unit_rows(np.asarray(await self._embedder.embed_documents([p.text for p in passages]), np.float32))
        similarities = cosines(vectors, dense)
        threshold = self._min_similarity if score_threshold is None else score_threshold
        scored = [Candidate(p, float(s), v) for p, s, v in zip(passages, similarities, vectors, strict=True)]
        passing = sorted((c for c in scored if c.score >= threshold), key=lambda c: -c.score)
        hits = drop_near_duplicates(passing, self._overlap_threshold)[:top_k]
        return Retrieval(
            hits=tuple(c.scored for c in hits),
            rejected=_best_below(c for c in scored if c.score < threshold),
        )

    async def term_counts(self, query: RetrievalQuery, terms: Sequence[str]) -> TermCounts:
        return await self._engine.term_counts(query, terms)

    async def check_health(self) -> None:
        await self._engine.check_health()


def _best_below(candidates: Iterable[Candidate]) -> tuple[ScoredChunk, ...]:
    below = sorted(candidates, key=lambda c: c.score, reverse=True)
    return tuple(c.scored for c in below[:MAX_REJECTED])
