"""The rule reader: hand-set word rules (RAG_READER=rules), the reading ragsvc shipped before the trained reader.

- **Whether evidence answers**: the IDF- and English-weighted share of the question's terms found in the best single
  piece of evidence (its text, section heading and page title), lifted by how close in meaning the best piece is
  (cosine above CLOSE_MATCH); and the question's names: one the evidence lacks and the documents (almost) never
  mention is something they do not cover ("The documents do not cover PgBouncer.").
- **What to quote**: `relevance.ranked`'s word scores.
- **How far an answer is supported**: the share of the question's terms its best sentence holds.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragsvc.domain import ScoredChunk, TermCounts
from ragsvc.reading import Assessment, Judgement, english
from ragsvc.reading.chunks import candidates
from ragsvc.reading.features import Analysis, analyse, counted_terms
from ragsvc.reading.followups import FollowUpRules
from ragsvc.reading.relevance import Candidate, ranked
from ragsvc.reading.sentences import sentences, without_markers
from ragsvc.reading.text import index_terms, question_terms
from ragsvc.reading.trained import choose
from ragsvc.retrieval.layout import indexed_text

CLOSE_MATCH = 0.6  # cosine from which the best piece of evidence counts as close in meaning


class RuleReader(FollowUpRules):
    def __init__(self, *, min_coverage: float, rare_share: float) -> None:
        english.load()
        self._min_coverage = min_coverage
        self._rare_share = rare_share

    @property
    def name(self) -> str:
        return "rules"

    @property
    def fingerprint(self) -> str:
        return f"rules min_coverage={self._min_coverage!r} rare_share={self._rare_share!r}"

    @property
    def cite_threshold(self) -> float | None:
        return None

    @property
    def pool(self) -> int:
        return 0

    def pack(self, analysis: Analysis, evidence: Sequence[ScoredChunk], *, limit: int) -> tuple[ScoredChunk, ...]:
        return tuple(evidence[:limit])

    def counted_terms(self, search: str) -> list[str]:
        return counted_terms(search)

    def analyse(self, search: str, question: str, counts: TermCounts | None) -> Analysis:
        return analyse(search, question, counts, rare_share=self._rare_share, weigh=english.weight)

    def assess(self, analysis: Analysis, evidence: Sequence[ScoredChunk]) -> Assessment:
        if not analysis.terms and question_terms(analysis.question):  # nothing asked but instructions
            return Assessment(answerable=False, score=0.0)
        if not analysis.terms or not evidence:
            return Assessment(answerable=True, score=1.0)
        pieces = [set(index_terms(indexed_text(scored.chunk))) for scored in evidence]
        everywhere = set().union(*pieces)
        coverage = max(sum(w for t, w in analysis.weights.items() if t in piece) for piece in pieces)
        score = min(coverage + max(max(s.score for s in evidence) - CLOSE_MATCH, 0.0), 1.0)
        missing = tuple(
            dict.fromkeys(
                analysis.surfaces[t]
                for t in analysis.terms
                if t in analysis.names and t not in everywhere and analysis.rare.get(t, False)
            )
        )
        return Assessment(answerable=not missing and score >= self._min_coverage, score=score, missing=missing)

    def quotes(self, analysis: Analysis, evidence: Sequence[ScoredChunk], *, limit: int) -> list[Candidate]:
        found = ranked(analysis.search, list(candidates(evidence)), question=analysis.question)
        order = choose(found, [-float(i) for i in range(len(found))], max_quotes=limit)
        return [found[i] for i in order]

    def judge(self, analysis: Analysis, answer: str, evidence: Sequence[ScoredChunk]) -> Judgement:
        """Support: the share of the question's terms that the answer's best sentence holds."""
        terms = {term.term for term in question_terms(analysis.question)}
        if not terms:
            return Judgement(support=0.0)
        best = max((len(terms.intersection(index_terms(without_markers(s)))) for s in sentences(answer)), default=0)
        return Judgement(support=best / len(terms))
