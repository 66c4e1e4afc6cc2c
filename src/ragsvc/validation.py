"""Deterministic answer validation: citation markers, grounding, coverage, confidence, CITE/ROUTE."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ragsvc.domain import Action, Citation, Confidence, RefusalReason, ScoredChunk
from ragsvc.reading import Judgement
from ragsvc.reading.sentences import MARKER, sentences
from ragsvc.reading.support import coverage_of, says_insufficient

_LONGEST_PARTIAL_MARKER = len("[#999")
# The SOURCE_ID citation style (R-000-15): [SourceId: doc:chunk], with a document id as ingest accepts it
# (letters, digits, ".", "_", "-", at most 128) and a chunk index. Up to two spaces after the colon.
SOURCE_ID_MARKER = re.compile(r"\[SourceId:\s{0,2}([A-Za-z0-9._-]{1,128}:\d{1,6})\]")
_LONGEST_PARTIAL_SOURCE_ID = len("[SourceId:") + 2 + 128 + len(":999999")

DISCLAIMER = "Note: parts of this answer cited sources that were not provided; it needs verification."

# Where a sentence turns from what the evidence says to what it lacks ("X [#1], but nothing about Y").
_CONTRAST = re.compile(r";\s+|,\s+(?:but|however|although|though|whereas|yet)\b", re.IGNORECASE)


class MarkerScanner:
    """Finds markers as a stream arrives, even when one is split across deltas; each marker number once.

    By default it scans [#n] markers. Given `source_ids` (the packed chunks' source ids, in marker order) it
    scans [SourceId: doc:chunk] markers instead and reports each as its chunk's marker number; a SourceId that
    names no packed chunk is not reported (the final validation counts it as invalid)."""

    def __init__(self, source_ids: Sequence[str] | None = None) -> None:
        self._text = ""
        self._scanned = 0
        self._seen: set[int] = set()
        self._numbers = None if source_ids is None else _marker_numbers(source_ids)
        self._pattern = MARKER if source_ids is None else SOURCE_ID_MARKER
        self._longest_partial = _LONGEST_PARTIAL_MARKER if source_ids is None else _LONGEST_PARTIAL_SOURCE_ID

    def feed(self, delta: str) -> list[int]:
        """The marker numbers that completed for the first time with this delta."""
        self._text += delta
        found: list[int] = []
        resume = max(self._scanned, len(self._text) - self._longest_partial)
        for match in self._pattern.finditer(self._text, self._scanned):
            resume = max(resume, match.end())
            number = int(match.group(1)) if self._numbers is None else self._numbers.get(match.group(1))
            if number is not None and number not in self._seen:
                self._seen.add(number)
                found.append(number)
        self._scanned = resume
        return found


def normalize_source_ids(text: str, context: Sequence[ScoredChunk]) -> str:
    """`text` of a SourceId-style answer rewritten so that it is judged exactly like a marker-style one: each
    [SourceId: doc:chunk] becomes the [#n] of the packed chunk it names, or [#0] (which matches no chunk, so it
    is an invalid citation) when it names none; a [#n] the model wrote itself becomes [n], not a marker, since
    in this style only SourceIds cite."""
    numbers = _marker_numbers([scored.chunk.source_id for scored in context])
    text = MARKER.sub(lambda match: f"[{match.group(1)}]", text)
    return SOURCE_ID_MARKER.sub(lambda match: f"[#{numbers.get(match.group(1), 0)}]", text)


def _marker_numbers(source_ids: Sequence[str]) -> dict[str, int]:
    """Source id -> marker number (its position from 1; the first, should an id repeat)."""
    numbers: dict[str, int] = {}
    for number, source_id in enumerate(source_ids, start=1):
        numbers.setdefault(source_id, number)
    return numbers


def citation_for(marker: int, context: Sequence[ScoredChunk]) -> Citation | None:
    """The citation of marker n: the n-th packed chunk, or None when n matches no chunk."""
    if not 1 <= marker <= len(context):
        return None
    scored = context[marker - 1]
    return Citation(marker=marker, chunk=scored.chunk, relevance_score=scored.score, rank_score=scored.rank_score)


def is_claim(sentence: str, valid: Collection[int]) -> bool:
    """Whether `sentence` is a valid cited claim: a clause of it carries a marker numbered in `valid` and does not
    say the evidence is insufficient ("I don't have enough information [#1]." claims nothing)."""
    return any(
        not says_insufficient(clause) and any(int(n) in valid for n in MARKER.findall(clause))
        for clause in _CONTRAST.split(sentence)
    )


@dataclass(frozen=True, slots=True)
class Verdict:
    citations: tuple[Citation, ...]
    grounded: bool
    refusal: RefusalReason
    invalid_markers: tuple[int, ...]
    confidence: Confidence
    action: Action
    # Set when the action is ROUTE: why, and the evidence's primary tag, whose owner the question goes to.
    route_reason: str = ""
    primary_tag: str = ""
    # Grounded, and it also says what the evidence does not cover (R-000-11: answer what you can, note the rest).
    partial: bool = False


@dataclass(frozen=True, slots=True)
class AnswerPolicy:
    confidence_threshold: float
    default_llm_score: float

    def judge(
        self,
        text: str,
        context: Sequence[ScoredChunk],
        *,
        refusal: RefusalReason | None = None,
        llm_score: float | None = None,
        strict: bool = False,
        judgement: Judgement | None = None,
        answerability: float = 1.0,
    ) -> Verdict:
        """Validate generated `text` against the packed `context`; `refusal` forces a refusal (gate, no chunks);
        `judgement` is the reader's (ragsvc.reading) of the answer and `answerability` its score of the evidence
        (0-1); `llm_score` the model's own 0-100 rating (see `_confidence`); `strict` (STRICTNESS_STRICT) refuses
        an answer with any sentence that carries no citation."""
        numbers = list(dict.fromkeys(int(m) for m in MARKER.findall(text)))
        citations = tuple(c for n in numbers if (c := citation_for(n, context)) is not None)
        invalid = tuple(n for n in numbers if citation_for(n, context) is None)
        if refusal is None:
            refusal = self._refusal_of(text, citations, invalid)
        if refusal is RefusalReason.NONE and strict and uncited_sentences(text):
            refusal = RefusalReason.UNSUPPORTED_ANSWER
        grounded = refusal is RefusalReason.NONE
        partial = grounded and says_insufficient(text)
        confidence = self._confidence(text, citations, context, llm_score, judgement, answerability) if grounded else Confidence()
        if grounded and confidence.overall >= self.confidence_threshold:
            return Verdict(citations, True, refusal, invalid, confidence, Action.CITE, partial=partial)
        reason = (
            f"Confidence {confidence.overall:.0f} is under {self.confidence_threshold:.0f}, the least an answer is cited with"
            if grounded
            else f"Refused: {refusal.value}"
        )
        tag = primary_tag([scored.chunk.tags for scored in context])
        return Verdict(citations, grounded, refusal, invalid, confidence, Action.ROUTE, reason, tag, partial)

    @staticmethod
    def _refusal_of(text: str, citations: Sequence[Citation], invalid: Sequence[int]) -> RefusalReason:
        """Invalid markers refuse; so does an answer without a valid cited claim (see `is_claim`). An answer with
        one that also notes what the evidence lacks is a partial answer, not a refusal."""
        if invalid:
            return RefusalReason.INVALID_CITATIONS
        valid = {citation.marker for citation in citations}
        if not any(is_claim(sentence, valid) for sentence in sentences(text)):
            return RefusalReason.UNSUPPORTED_ANSWER
        return RefusalReason.NONE

    def _confidence(
        self,
        text: str,
        citations: Sequence[Citation],
        context: Sequence[ScoredChunk],
        llm_score: float | None,
        judgement: Judgement | None,
        answerability: float,
    ) -> Confidence:
        """With a reader that estimates it, overall = 100 * P(answer right) (the trained reader: ragsvc.reading);
        else overall = 30 * retrieval + 40 * coverage + 30 * llm / 100, clamped to 0-100. `llm` is the model's
        own score when one scored the answer, else 100 * the mean of three judgements: the reader's support (how
        well the answer answers the question), answerability (how well the evidence can), and whether the answer
        leads with the evidence retrieval ranked best (its first citation is [#1]); the configured
        RAG_DEFAULT_LLM_SCORE without a judgement."""
        retrieval = _clamp(sum(c.relevance_score for c in citations) / len(citations)) if citations else 0.0
        cited_first = [*(context[c.marker - 1] for c in citations), *context]  # where the phrases most likely are
        coverage = coverage_of(MARKER.sub(" ", text), cited_first)
        if llm_score is None and judgement is not None:
            leads_with_best = 1.0 if citations and citations[0].marker == 1 else 0.0
            llm_score = 100 * (judgement.support + answerability + leads_with_best) / 3
        elif llm_score is None:
            llm_score = self.default_llm_score
        llm = max(0.0, min(100.0, llm_score))
        if judgement is not None and judgement.p_right is not None:
            overall = 100 * _clamp(judgement.p_right)
        else:
            overall = max(0.0, min(100.0, 30 * retrieval + 40 * coverage + 30 * llm / 100))
        return Confidence(overall=overall, retrieval=retrieval, coverage=coverage, llm=llm)


def uncited_sentences(text: str) -> list[str]:
    """The sentences of `text` (with at least one word) that carry no [#n] marker."""
    return [s for s in sentences(text) if re.search(r"\w", MARKER.sub("", s)) and not MARKER.search(s)]


def strip_invalid_markers(text: str, invalid: Sequence[int]) -> str:
    """`text` without the markers that cite no packed chunk, followed by the needs-verification disclaimer."""
    drop = set(invalid)
    kept = MARKER.sub(lambda m: "" if int(m.group(1)) in drop else m.group(0), text)
    return re.sub(r"[ \t]+([.,;:!?])", r"\1", re.sub(r"[ \t]{2,}", " ", kept)).strip() + "\n\n" + DISCLAIMER


def primary_tag(tag_lists: Sequence[Sequence[str]]) -> str:
    """The most common tag across the evidence (ties: the first seen), or "" when none has tags (R-000-22)."""
    counts: dict[str, int] = {}
    for tags in tag_lists:
        for tag in tags:
            counts[tag] = counts.get(tag, 0) + 1
    return max(counts, key=counts.__getitem__) if counts else ""


def _clamp(value: float) -> float:
    return max(0.0, min(1.0, value))
