"""The retrieval quality controls between the engine and the prompt: ranking (R-003-08) by the engine's fused
order, near-duplicate removal and the per-document cap (R-000-19)."""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ragsvc.domain import Chunk
from ragsvc.errors import FieldViolation
from ragsvc.retrieval.base import Candidate

# RRF's constant: what a place in the engine's fused order is worth to the ranking (`fused_relevance`).
RRF_K = 60
# R-003-08's recency boost: documents up to 30 days old +0.3, up to 90 days +0.2, up to 365 days +0.1.
RECENCY_STEPS = ((30, 0.3), (90, 0.2), (365, 0.1))


@dataclass(frozen=True, slots=True)
class RankingWeights:
    """rank = similarity·w_similarity + recency_boost·w_recency + trust·w_trust (R-003-08's defaults)."""

    similarity: float = 0.7
    recency: float = 0.2
    trust: float = 0.1

    def violations(self, prefix: str = "") -> list[FieldViolation]:
        """Why these weights cannot rank (each non-negative and finite, not all zero); empty when they can.
        Fields are named `{prefix}similarity_weight` etc."""
        values = {"similarity_weight": self.similarity, "recency_weight": self.recency, "trust_weight": self.trust}
        found = [
            FieldViolation(prefix + name, f"must be a finite number >= 0, got {value!r}")
            for name, value in values.items()
            if not math.isfinite(value) or value < 0
        ]
        if not found and not any(values.values()):
            found = [FieldViolation(prefix + name, "the weights must not all be zero") for name in values]
        return found


def recency_boost(published_at: str, today: dt.date) -> float:
    """R-003-08's step boost for a document published on `published_at` (ISO 8601 date or date-time); 0 when
    unknown or unparseable. A date in the future counts as today."""
    if not published_at:
        return 0.0
    try:
        published = dt.date.fromisoformat(published_at[:10])
    except ValueError:
        return 0.0
    age = max((today - published).days, 0)
    return next((boost for days, boost in RECENCY_STEPS if age <= days), 0.0)


def rank_score(chunk: Chunk, similarity: float, weights: RankingWeights, today: dt.date) -> float:
    return (
        similarity * weights.similarity + recency_boost(chunk.published_at, today) * weights.recency + chunk.trust * weights.trust
    )


def fused_relevance(count: int) -> list[float]:
    """The relevance of an engine's `count` candidates, in the engine's fused order (dense and BM25,
    `layout.fuse`): RRF's score of each position in one list, scaled to 1 at the top (RRF_K / (RRF_K + position)),
    1 to ~0.7 over a pool of 24.

    What the ranking weighs as a chunk's similarity (R-003-08's similarity_score). Ranking by the cosine
    similarity alone undid the fusion: a chunk BM25 found by a name or a rare word the question shares with it,
    fused into the candidates, fell behind chunks only near the question in meaning. Ranked by the fused order, the
    key fact of a question was among the first eight chunks for 91.9% of the answerable questions of five
    corpora, 87.4% by cosine (docs/reading.md, "Retrieval for the reader")."""
    return [RRF_K / (RRF_K + position) for position in range(count)]


def rank(candidates: Sequence[tuple[Candidate, float]], weights: RankingWeights, today: dt.date) -> list[Candidate]:
    """Best rank first, each with its rank score (R-003-14): the weighted rank of each candidate's relevance
    (`fused_relevance`, paired with it), recency and trust; equal ranks keep the given order."""
    scores = [rank_score(c.chunk, relevance, weights, today) for c, relevance in candidates]
    order = sorted(range(len(candidates)), key=lambda i: -scores[i])
    return [candidates[i][0].ranked(scores[i]) for i in order]


def drop_near_duplicates(candidates: Sequence[Candidate], threshold: float) -> list[Candidate]:
    """Keeps each candidate unless its dense vector's cosine similarity to one already kept exceeds `threshold`
    (R-000-05's RAG_CHUNK_OVERLAP_THRESHOLD): earlier candidates win, so rank first."""
    if len(candidates) < 2:
        return list(candidates)
    vectors = np.stack([candidate.dense for candidate in candidates])
    # Every pair at once, then read as Python lists: indexing the array row by row cost more than the product.
    too_close: list[list[bool]] = ((vectors @ vectors.T) > threshold).tolist()
    kept: list[int] = []
    for i, close in enumerate(too_close):
        if not any(close[j] for j in kept):
            kept.append(i)
    return [candidates[i] for i in kept]


def cap_per_document(candidates: Sequence[Candidate], max_per_document: int) -> list[Candidate]:
    """At most `max_per_document` candidates of each document (RAG_MAX_CHUNKS_PER_DOC), earlier ones first."""
    seen: Counter[tuple[str, str]] = Counter()
    kept = []
    for candidate in candidates:
        key = (candidate.chunk.tenant_id, candidate.chunk.document_id)
        if seen[key] < max_per_document:
            seen[key] += 1
            kept.append(candidate)
    return kept
