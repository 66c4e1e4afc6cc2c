"""A generator that calls no LLM: the answer is the context's sentences that best match the query, ranked by
BM25 over those sentences, each followed by the citation marker of its chunk."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import AsyncGenerator, Iterator, Sequence
from dataclasses import dataclass

from ragsvc.domain import GenerationDelta, GenerationRequest, ScoredChunk, Usage
from ragsvc.generation.base import Capabilities
from ragsvc.lexical import content_terms

# The whole answer when no sentence of the context shares a content term with the query.
FALLBACK = "I don't have information about that in the available documentation."

_K1 = 1.2
_B = 0.75
_MIN_WORDS = 3  # shorter fragments (labels, stray headings) are never an answer
_DUPLICATE_OVERLAP = 0.8  # share of the smaller sentence's terms that makes two sentences the same

_WORD = re.compile(r"\S+\s*")

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}#{1,6}(\s|$)")
_TABLE_ROW = re.compile(r"^\s*\|")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+")  # a markdown bullet or numbered item
_QUOTE = re.compile(r"^\s*>\s?")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_BOUNDARY = re.compile(r"[.!?]+[\"')\]]*\s+")
_ABBREVIATIONS = frozenset(
    "al approx cf dept dr e.g eg etc fig i.e ie inc jr ltd mr mrs ms no nos prof sr st vol vs".split()
)


@dataclass(frozen=True, slots=True)
class _Sentence:
    text: str
    marker: int
    position: int  # order within its chunk
    relevance: float  # the chunk's retrieval score
    terms: tuple[str, ...]  # stemmed content terms, in order


class ExtractiveGenerator:
    """Answers from the packed context alone; cheap, deterministic, and streamed a word at a time."""

    def __init__(self, *, max_sentences: int = 3) -> None:
        if max_sentences < 1:
            raise ValueError("max_sentences must be at least 1")
        self._max_sentences = max_sentences

    capabilities = Capabilities(follows_instructions=False)

    @property
    def name(self) -> str:
        return "extractive"

    def model_name(self, model: str) -> str:
        """No model writes the answer, whichever one the request named."""
        return "extractive"

    async def ensure_available(self, model: str) -> None:
        """Always available: there is nothing upstream."""

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationDelta, None]:
        """Yields the answer one word (with its following whitespace) per delta, then the usage."""
        words = _WORD.findall(self._compose(request))
        for word in words:
            yield GenerationDelta(text=word)
        yield GenerationDelta(usage=Usage(prompt_tokens=0, completion_tokens=len(words)))

    async def check_health(self) -> None:
        """Always healthy: there is nothing upstream."""

    async def aclose(self) -> None:
        """Holds no resources."""

    def _compose(self, request: GenerationRequest) -> str:
        query_terms = sorted(set(content_terms(request.query)))
        sentences = list(_candidates(request.context))
        chosen: list[_Sentence] = []
        for sentence in _ranked(query_terms, sentences):
            if not any(_near_duplicates(sentence, kept) for kept in chosen):
                chosen.append(sentence)
            if len(chosen) == self._max_sentences:
                break
        if not chosen:
            return FALLBACK
        return " ".join(f"{sentence.text} [#{sentence.marker}]" for sentence in chosen)


def _candidates(context: Sequence[ScoredChunk]) -> Iterator[_Sentence]:
    """Every whole sentence of the context long enough to be an answer and holding a content term."""
    for marker, scored in enumerate(context, start=1):
        sentences = _sentences(scored.chunk.text)
        for position, text in enumerate(sentences):
            if _cut_at_chunk_border(text, position, len(sentences)):
                continue
            terms = tuple(content_terms(text))
            if terms and len(text.split()) >= _MIN_WORDS:
                yield _Sentence(text, marker, position, max(scored.score, 0.0), terms)


def _cut_at_chunk_border(text: str, position: int, count: int) -> bool:
    """True for a sentence a chunk border cut: the first one starting in lower case, or the last one with no
    closing punctuation. Chunks overlap, so the whole sentence is in the neighbouring chunk."""
    if position == 0 and text[:1].islower():
        return True
    return position == count - 1 and not text.rstrip("\"')]*_ ").endswith((".", "!", "?", ":"))


def _ranked(query_terms: Sequence[str], sentences: Sequence[_Sentence]) -> list[_Sentence]:
    """The sentences sharing a term with the query, best first: BM25 over the sentences weighted by the
    relevance of their chunk (so a sentence of the best evidence wins a lexical tie), then marker, position."""
    if not query_terms or not sentences:
        return []
    count = len(sentences)
    average_length = sum(len(sentence.terms) for sentence in sentences) / count
    document_frequency = Counter(term for sentence in sentences for term in set(sentence.terms))
    idf = {
        term: math.log(1 + (count - document_frequency[term] + 0.5) / (document_frequency[term] + 0.5))
        for term in query_terms
    }
    scored: list[tuple[float, _Sentence]] = []
    for sentence in sentences:
        frequency = Counter(sentence.terms)
        norm = _K1 * (1 - _B + _B * len(sentence.terms) / average_length)
        score = sum(
            idf[term] * frequency[term] * (_K1 + 1) / (frequency[term] + norm)
            for term in query_terms
            if frequency[term]
        )
        if score > 0:
            scored.append((score * (0.5 + sentence.relevance), sentence))
    scored.sort(key=lambda pair: (-pair[0], pair[1].marker, pair[1].position))
    return [sentence for _, sentence in scored]


def _near_duplicates(a: _Sentence, b: _Sentence) -> bool:
    """True when most terms of the smaller sentence also occur in the other (overlapping chunks repeat text)."""
    terms_a, terms_b = set(a.terms), set(b.terms)
    return len(terms_a & terms_b) >= _DUPLICATE_OVERLAP * min(len(terms_a), len(terms_b))


def _sentences(text: str) -> list[str]:
    """Splits markdown or plain text into sentences: list items and paragraphs are split at sentence ends;
    headings, table rows and fenced code are dropped."""
    sentences: list[str] = []
    for block in _blocks(text):
        start = 0
        for boundary in _BOUNDARY.finditer(block):
            before = block[start : boundary.start()].split()
            last_word = before[-1].lstrip("\"'([").lower() if before else ""
            abbreviated = boundary.group().startswith(".") and (
                last_word in _ABBREVIATIONS or (len(last_word) == 1 and last_word.isalpha())
            )
            if abbreviated or block[boundary.end() : boundary.end() + 1].islower():
                continue
            sentences.append(block[start : boundary.end()].strip())
            start = boundary.end()
        if block[start:].strip():
            sentences.append(block[start:].strip())
    return sentences


def _blocks(text: str) -> Iterator[str]:
    """The paragraphs and list items of `text`, each on one line, with markdown markers and links removed."""
    lines: list[str] = []
    in_fence = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        ends_block = in_fence or not line.strip() or _HEADING.match(line) or _TABLE_ROW.match(line)
        if ends_block or _ITEM.match(line):
            if lines:
                yield " ".join(lines)
            lines = []
        if not ends_block:
            content = _LINK.sub(r"\1", _ITEM.sub("", _QUOTE.sub("", line), count=1))
            lines.append(" ".join(content.split()))
    if lines:
        yield " ".join(lines)
