"""The reader's training examples: each benchmark question with its evidence, every candidate sentence's features
and label, computed by ragsvc's own reading code (src/ragsvc/reading/features.py), as in serving.

A candidate sentence is positive when it holds one of the question's key facts (what makes an answer right, as
bench/quality/questions.contains judges it). An unanswerable question has no positive sentence.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.quality.questions import Question, contains
from ragsvc.domain import Chunk, ScoredChunk, TermCounts
from ragsvc.reading import features
from ragsvc.reading.chunks import candidates
from ragsvc.reading.relevance import Candidate

PACKED = 5  # the chunks the answer reads: the default top-k


@dataclass(frozen=True, slots=True)
class Example:
    corpus: str
    question: Question
    analysis: features.Analysis
    counts: TermCounts  # the tenant's statistics of the searched terms
    evidence: tuple[ScoredChunk, ...]
    found: tuple[Candidate, ...]
    rows: np.ndarray  # candidates x SENTENCE_FEATURES
    labels: np.ndarray  # 1 where the candidate holds a key fact
    # the question's other searches (a follow-up's, after its earlier questions word for word), each read alike; the
    # reader answers from whichever it judges likelier to answer, as the pipeline does
    alternatives: tuple[Example, ...] = ()
    # how the chunk model packed `evidence` from the pool (`fit.packed`); None: retrieval's first chunks, unscored
    packing: features.Packing | None = None

    @property
    def answerable(self) -> bool:
        return self.question.should_answer

    @property
    def has_positive(self) -> bool:
        return bool(self.labels.any())

    @property
    def options(self) -> tuple[Example, ...]:
        """Every search's reading of the question: this one first."""
        return (self, *self.alternatives)


def scored_chunks(hits: list[dict[str, Any]]) -> tuple[ScoredChunk, ...]:
    return tuple(
        ScoredChunk(
            Chunk(
                document_id=h["document_id"],
                chunk_index=h["chunk_index"],
                text=h["text"],
                section=h["section"],
                page_title=h["page_title"],
            ),
            h["score"],
        )
        for h in hits
    )


def as_hit(scored: ScoredChunk) -> dict[str, Any]:
    """A scored chunk as evidence.py stores it (`scored_chunks` reads it back)."""
    chunk = scored.chunk
    return {"document_id": chunk.document_id, "chunk_index": chunk.chunk_index, "text": chunk.text,
            "section": chunk.section, "page_title": chunk.page_title, "score": scored.score}  # fmt: skip


def example(corpus: str, question: Question, row: dict[str, Any], *, packed: int | None = None) -> Example:
    """The question read with the evidence of each of its searches in `row` (as evidence.py stores it): every hit,
    or the first `packed`."""
    alternatives = tuple(_searched(corpus, question, other, packed) for other in row.get("alternatives", ()))
    return dataclasses.replace(_searched(corpus, question, row, packed), alternatives=alternatives)


def _searched(corpus: str, question: Question, row: dict[str, Any], packed: int | None) -> Example:
    counts = TermCounts(row["chunks"], row["frequencies"])
    analysis = features.analyse(row["search"], question.question, counts)
    return _read(corpus, question, analysis, counts, scored_chunks(row["hits"])[:packed])


def repacked(pool: Example, packing: features.Packing) -> Example:
    """`pool` reading only the chunks of its evidence the chunk model packs (`ragsvc.reading.packing`), in its
    order; without its other searches (`fit.packed` packs each)."""
    if list(packing.places) == list(range(len(pool.evidence))):
        return dataclasses.replace(pool, alternatives=(), packing=packing)
    evidence = tuple(pool.evidence[i] for i in packing.places)
    return dataclasses.replace(_read(pool.corpus, pool.question, pool.analysis, pool.counts, evidence), packing=packing)


def _read(
    corpus: str, question: Question, analysis: features.Analysis, counts: TermCounts, evidence: tuple[ScoredChunk, ...]
) -> Example:
    found = tuple(candidates(evidence))
    rows = np.asarray(features.sentence_features(analysis, found, evidence), dtype=np.float64).reshape(
        len(found), len(features.SENTENCE_FEATURES)
    )
    labels = np.asarray(
        [1 if question.should_answer and any(contains(c.quote, f) for f in question.key_facts) else 0 for c in found],
        dtype=np.int32,
    )
    return Example(corpus, question, analysis, counts, evidence, found, rows, labels)
