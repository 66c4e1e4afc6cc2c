"""Deterministic answer validation: citation markers, grounding, coverage, confidence, CITE/ROUTE."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ragsvc.domain import Action, Citation, Confidence, RefusalReason, RouteTarget, ScoredChunk
from ragsvc.lexical import content_terms

# Strict on purpose: "[1]", "[ #1 ]", "[#1a]" and "vec![1]" are not markers.
MARKER = re.compile(r"\[#(\d{1,3})\]")
_LONGEST_PARTIAL_MARKER = len("[#999")

_REFUSAL = re.compile(
    r"(don't|do not|does not|doesn't) (have|contain) (enough )?(information|evidence)"
    r"|not enough (information|evidence)|insufficient (information|evidence)|cannot answer",
    re.IGNORECASE,
)


class MarkerScanner:
    """Finds markers as a stream arrives, even when one is split across deltas; each marker number once."""

    def __init__(self) -> None:
        self._text = ""
        self._scanned = 0
        self._seen: set[int] = set()

    def feed(self, delta: str) -> list[int]:
        """The marker numbers that completed for the first time with this delta."""
        self._text += delta
        found: list[int] = []
        resume = max(self._scanned, len(self._text) - _LONGEST_PARTIAL_MARKER)
        for match in MARKER.finditer(self._text, self._scanned):
            number = int(match.group(1))
            resume = max(resume, match.end())
            if number not in self._seen:
                self._seen.add(number)
                found.append(number)
        self._scanned = resume
        return found


def citation_for(marker: int, context: Sequence[ScoredChunk]) -> Citation | None:
    """The citation of marker n: the n-th packed chunk, or None when n matches no chunk."""
    if not 1 <= marker <= len(context):
        return None
    scored = context[marker - 1]
    return Citation(marker=marker, chunk=scored.chunk, relevance_score=scored.score)


@dataclass(frozen=True, slots=True)
class Verdict:
    citations: tuple[Citation, ...]
    grounded: bool
    refusal: RefusalReason
    invalid_markers: tuple[int, ...]
    confidence: Confidence
    action: Action
    route: RouteTarget | None


@dataclass(frozen=True, slots=True)
class AnswerPolicy:
    confidence_threshold: float
    default_llm_score: float
    admin_email: str

    def judge(self, text: str, context: Sequence[ScoredChunk], *, refusal: RefusalReason | None = None) -> Verdict:
        """Validate generated `text` against the packed `context`; `refusal` forces a refusal (gate, no chunks)."""
        numbers = list(dict.fromkeys(int(m) for m in MARKER.findall(text)))
        citations = tuple(c for n in numbers if (c := citation_for(n, context)) is not None)
        invalid = tuple(n for n in numbers if citation_for(n, context) is None)
        if refusal is None:
            refusal = self._refusal_of(text, citations, invalid)
        grounded = refusal is RefusalReason.NONE
        confidence = self._confidence(text, citations, context) if grounded else Confidence()
        if grounded and confidence.overall >= self.confidence_threshold:
            return Verdict(citations, True, refusal, invalid, confidence, Action.CITE, None)
        reason = "low confidence" if grounded else f"refused: {refusal.value}"
        return Verdict(citations, grounded, refusal, invalid, confidence, Action.ROUTE, self._route(context, reason))

    @staticmethod
    def _refusal_of(text: str, citations: Sequence[Citation], invalid: Sequence[int]) -> RefusalReason:
        if invalid:
            return RefusalReason.INVALID_CITATIONS
        if not citations or _REFUSAL.search(text):
            return RefusalReason.UNSUPPORTED_ANSWER
        return RefusalReason.NONE

    def _confidence(self, text: str, citations: Sequence[Citation], context: Sequence[ScoredChunk]) -> Confidence:
        """overall = 30 * retrieval + 40 * coverage + 30 * llm / 100, clamped to 0-100."""
        retrieval = _clamp(sum(c.relevance_score for c in citations) / len(citations)) if citations else 0.0
        coverage = _coverage(MARKER.sub(" ", text), context)
        llm = self.default_llm_score
        overall = max(0.0, min(100.0, 30 * retrieval + 40 * coverage + 30 * llm / 100))
        return Confidence(overall=overall, retrieval=retrieval, coverage=coverage, llm=llm)

    def _route(self, context: Sequence[ScoredChunk], reason: str) -> RouteTarget:
        """The owner of the evidence's primary tag; the admin until an owner directory is configured."""
        tags = Counter(tag for scored in context for tag in scored.chunk.tags)
        primary = tags.most_common(1)[0][0] if tags else ""
        return RouteTarget(tag=primary, owner_email=self.admin_email, reason=reason, fallback=True)


def _coverage(answer: str, context: Sequence[ScoredChunk]) -> float:
    """Share of the answer's content terms that occur in the evidence."""
    terms = content_terms(answer)
    if not terms:
        return 0.0
    evidence = set(content_terms(" ".join(scored.chunk.text for scored in context)))
    return sum(term in evidence for term in terms) / len(terms)


def _clamp(value: float) -> float:
    return max(0.0, min(1.0, value))
