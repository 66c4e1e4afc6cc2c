"""The reading component: the one place where text is read for meaning.

A `Reader` analyses a question (its terms and names, weighted by the tenant's statistics; the kind of value asked),
judges whether evidence answers it, ranks the evidence's sentences for an extractive answer, and judges an answer:
how far it is supported, and the probability that it is right. Retrieval, the gate, conversation condensing, the
extractive generator and validation call it through this interface; it has one tokenizer (`text`) and one sentence
splitter (`sentences`).

Two implementations: `RuleReader` (hand-set word rules) and `TrainedReader` (models trained on labelled questions
over several corpora, shipped in the package: see bench/reader). RAG_READER picks one (`open_reader`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ragsvc.domain import ChatMessage, QueryClass, ScoredChunk, TermCounts
from ragsvc.reading.features import Analysis
from ragsvc.reading.relevance import Candidate
from ragsvc.reading.text import ANALYSER_VERSION, index_terms

__all__ = [
    "ANALYSER_VERSION",
    "Analysis",
    "Assessment",
    "Candidate",
    "Judgement",
    "Reader",
    "index_terms",
]


@dataclass(frozen=True, slots=True)
class Assessment:
    """Whether the evidence answers the question: `score` (0-1) says how far (the trained reader: the probability
    that the best answer it holds is right); `missing` are the question's names the documents do not cover;
    `answerable` False means refuse with INSUFFICIENT_EVIDENCE."""

    answerable: bool
    score: float
    missing: tuple[str, ...] = ()

    def refusal_text(self) -> str:
        """What the refusal says: the names the documents do not cover, else that they do not answer it."""
        if not self.missing:
            return "The documents found do not answer this question."
        names = self.missing
        listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
        return f"The documents do not cover {listed}."


@dataclass(frozen=True, slots=True)
class Judgement:
    """How an answer stands: `support` (0-1), how well its best sentence answers the question; `p_right`, the
    probability that it is right (None: this reader does not estimate one)."""

    support: float
    p_right: float | None = None


class Reader(Protocol):
    @property
    def name(self) -> str:
        """ "rules" or "trained"."""
        ...

    @property
    def fingerprint(self) -> str:
        """What this reader's answers depend on: its name and what configures it (the trained reader: its model's
        sha256 and its pool). Two readers with the same fingerprint read alike; the answer cache keys by it
        (`answering.cache.cache_key`), so that no reader serves an answer another one wrote."""
        ...

    @property
    def cite_threshold(self) -> float | None:
        """The probability from which an answer is CITEd, as this reader was calibrated (None: none): the level of the
        model that judges its answers (the trained reader's extractive answer model when it re-ranks with the
        cross-encoder)."""
        ...

    @property
    def pool(self) -> int:
        """How many chunks retrieval hands it to choose the evidence from (0: the caller's top_k, as ranked)."""
        ...

    def pack(self, analysis: Analysis, evidence: Sequence[ScoredChunk], *, limit: int) -> tuple[ScoredChunk, ...]:
        """The `limit` chunks of `evidence` (retrieval's, best first) that the answer reads, in the order it reads
        them."""
        ...

    def analyse(self, search: str, question: str, counts: TermCounts | None) -> Analysis:
        """The question as read: `search` is what was searched (a follow-up with its earlier turns' subject),
        `question` the user's own words, `counts` the tenant's statistics of `counted_terms(search)` (None: unknown)."""
        ...

    def counted_terms(self, search: str) -> list[str]:
        """The terms whose statistics `analyse` reads (`VectorEngine.term_counts`)."""
        ...

    def assess(self, analysis: Analysis, evidence: Sequence[ScoredChunk]) -> Assessment:
        """Whether `evidence` answers the question."""
        ...

    def quotes(self, analysis: Analysis, evidence: Sequence[ScoredChunk], *, limit: int) -> list[Candidate]:
        """The sentences of `evidence` an extractive answer quotes, best first, at most `limit`."""
        ...

    def judge(self, analysis: Analysis, answer: str, evidence: Sequence[ScoredChunk]) -> Judgement:
        """How `answer` (with its [#n] markers into `evidence`) stands."""
        ...

    def follow_up_search(self, query: str, history: Sequence[ChatMessage]) -> str:
        """What a follow-up is searched as on its own: with the earlier turns' subject where it lacks one."""
        ...

    def follow_up_searches(self, query: str, history: Sequence[ChatMessage]) -> tuple[str, ...]:
        """Every search a follow-up condensed by rule gets, `follow_up_search`'s first (the others: the follow-up
        after the earlier questions it continues, word for word, ...)."""
        ...

    def classify(self, query: str, history: Sequence[ChatMessage]) -> QueryClass:
        """The question's class (factual, procedural, clarification, greeting)."""
        ...
