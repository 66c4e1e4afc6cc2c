"""The read stage: after the score gate, before generation, the reader (ragsvc.reading) reads the question against
the evidence with the corpus statistics of what the caller can see (the engine counts the question's terms:
`VectorEngine.term_counts`), and judges whether the evidence answers it. The reading goes down the pipeline: the
extractive generator quotes from it and validation judges the answer with it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragsvc.domain import Mode, Question, RetrievalQuery, ScoredChunk, TermCounts
from ragsvc.reading import Analysis, Assessment, Reader
from ragsvc.retrieval.base import Retriever


@dataclass(frozen=True, slots=True)
class Reading:
    """What the reader made of one question: its analysis, with the statistics it was weighted by, and whether the
    evidence answers it."""

    analysis: Analysis
    assessment: Assessment
    counts: TermCounts | None


class ReadStage:
    def __init__(self, reader: Reader, retriever: Retriever, *, refuses: bool) -> None:
        """`refuses`: evidence the reader finds does not answer is refused with INSUFFICIENT_EVIDENCE
        (RAG_ANSWERABILITY_GATE)."""
        self.reader = reader
        self._retriever = retriever
        self.refuses = refuses

    async def run(self, question: Question, search: str, evidence: Sequence[ScoredChunk]) -> Reading:
        """The reading of `search` (the question, or a follow-up with the turn it follows) against `evidence`; in
        selected-text mode without corpus statistics (the selection is all there is)."""
        counts = None
        if question.mode is not Mode.SELECTED_TEXT:
            visible = RetrievalQuery(
                text=search, tenant_id=question.tenant_id, user_tags=question.user_tags, filters=question.filters
            )
            counts = await self._retriever.term_counts(visible, self.reader.counted_terms(search))
        analysis = self.reader.analyse(search, question.query, counts)
        return Reading(analysis, self.reader.assess(analysis, evidence), counts)
