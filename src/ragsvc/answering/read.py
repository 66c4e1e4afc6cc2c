"""The read stage: after the score gate, before generation, the reader (ragsvc.reading) reads the question against
the evidence with the corpus statistics of what the caller can see (the engine counts the question's terms:
`VectorEngine.term_counts`), chooses the top_k chunks the answer reads among those retrieved (the reader's pool),
and judges whether they answer it. The reading goes down the pipeline: the
extractive generator quotes from it and validation judges the answer with it."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

from ragsvc.domain import Mode, Question, RetrievalQuery, ScoredChunk, TermCounts
from ragsvc.reading import Analysis, Assessment, Reader
from ragsvc.retrieval.base import Retriever


@dataclass(frozen=True)
class Reading:
    """What the reader made of one question: its analysis, with the statistics it was weighted by, the evidence
    the answer reads, and whether it answers it (`assessment`)."""

    analysis: Analysis
    counts: TermCounts | None
    evidence: tuple[ScoredChunk, ...]
    reader: Reader = field(repr=False, compare=False)

    @functools.cached_property
    def assessment(self) -> Assessment:
        """The reader's assessment of the evidence, made when first read: before generation when the gate refuses
        on it, else while the model writes (the pipeline starts it once the first text is out) or at validation,
        off the first token's path (the budget stage 0.8 ms shorter at 10,000 passages, on a loaded machine)."""
        return self.reader.assess(self.analysis, self.evidence)


class ReadStage:
    def __init__(self, reader: Reader, retriever: Retriever, *, refuses: bool, top_k: int) -> None:
        """`refuses`: evidence the reader finds does not answer is refused with INSUFFICIENT_EVIDENCE
        (RAG_ANSWERABILITY_GATE); `top_k`: the chunks the answer reads when the question sets none."""
        self.reader = reader
        self._retriever = retriever
        self.refuses = refuses
        self._top_k = top_k

    def needed_first(self, question: Question) -> bool:
        """Whether the question must be read before generation: the gate refuses on the reading's assessment, or
        the reader chooses the evidence from a pool by its analysis. Otherwise the pipeline reads it while the model
        writes (the engine's term counts and the analysis off the first token's path)."""
        return self.reader.pool > 0 or self.gates(question)

    def gates(self, question: Question) -> bool:
        """Whether evidence the reader finds does not answer `question` is refused (the gate; never a selection)."""
        return self.refuses and question.mode is not Mode.SELECTED_TEXT

    def unread(self, question: Question, evidence: Sequence[ScoredChunk]) -> tuple[ScoredChunk, ...]:
        """The evidence the answer reads when the reader chooses from no pool (`needed_first` False): the
        top_k of retrieval's, in its order, what `run`'s reading will hold."""
        return tuple(evidence[: question.top_k or self._top_k])

    async def run(self, question: Question, search: str, evidence: Sequence[ScoredChunk]) -> Reading:
        """The reading of `search` (the question, or a follow-up with the turn it follows) against the top_k chunks
        of `evidence` (retrieval's, best first) the reader chooses; in selected-text mode without corpus statistics
        (the selection is all there is)."""
        counts = None
        if question.mode is not Mode.SELECTED_TEXT:
            visible = RetrievalQuery(
                text=search, tenant_id=question.tenant_id, user_tags=question.user_tags, filters=question.filters
            )
            counts = await self._retriever.term_counts(visible, self.reader.counted_terms(search))
        analysis = self.reader.analyse(search, question.query, counts)
        packed = self.reader.pack(analysis, evidence, limit=question.top_k or self._top_k)
        return Reading(analysis, counts, packed, self.reader)
