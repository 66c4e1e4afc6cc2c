"""A generator that calls no LLM: the answer is the context's sentences that best answer the query, each followed by
the citation marker of its chunk.

A sentence is judged with what it sits under: its chunk's page title and section heading, and the nearest label
before it in the chunk (a Markdown heading, or a short line without a full stop such as a definition term
"max_connections (integer)"). Each query term found in the sentence counts fully, in its label less, in its
heading or title less again; terms are weighted by their rarity among the candidate sentences (IDF). A question
asking for an amount ("how many", "how long", "default" ...) prefers sentences that state one. Paragraphs that
address instructions to the reader or to a model (prompt injection planted in a document) are never quoted."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import AsyncGenerator, Iterator, Sequence
from dataclasses import dataclass

from ragsvc.domain import GenerationDelta, GenerationRequest, ScoredChunk, Usage
from ragsvc.generation.base import Capabilities
from ragsvc.lexical import asks_for_amount, compound_terms, content_terms, states_amount
from ragsvc.sanitize import injection_patterns

# The whole answer when no sentence of the context shares a content term with the query.
FALLBACK = "I don't have information about that in the available documentation."

# How much a query term counts when found in the sentence's label, or only in its section heading or page title.
_LABEL_WEIGHT = 1.2  # a sentence under a label is about it: more than one naming it in passing
_HEADING_WEIGHT = 0.5
_AMOUNT_BONUS = 0.5  # extra share of the score of a sentence stating an amount, when the question asks for one
_LABEL_MAX_WORDS = 8
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


# Words addressing a model or the reader with instructions about the answer (besides sanitize's patterns).
_ADDRESSES_A_MODEL = re.compile(
    r"\b(note|instructions?|message)\s+(for|to)\s+(the\s+|any\s+)?(ai|assistant|model|llm|chatbot|bot)\b"
    r"|\b(ai|language model|llm|chatbot)\s+(assistant\s+)?(must|should|answering)\b|\bsystem prompt\b"
    r"|\btell the user\b|\bevery answer\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class _Sentence:
    text: str
    marker: int
    position: int  # order within its chunk
    relevance: float  # the chunk's retrieval score
    terms: tuple[str, ...]  # stemmed content terms and compound names, in order
    label: frozenset[str] = frozenset()  # terms of the nearest label before it
    heading: frozenset[str] = frozenset()  # terms of its chunk's section heading and page title


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
        query_terms = _query_terms(request.query)
        sentences = list(_candidates(request.context))
        chosen: list[_Sentence] = []
        for sentence in _ranked(query_terms, sentences, asks_amount=bool(asks_for_amount(request.query))):
            if not any(_near_duplicates(sentence, kept) for kept in chosen):
                chosen.append(sentence)
            if len(chosen) == self._max_sentences:
                break
        if not chosen:
            return FALLBACK
        return " ".join(f"{sentence.text} [#{sentence.marker}]" for sentence in chosen)


def _terms(text: str) -> list[str]:
    """Content terms and compound names ("max_connections" is a term besides its parts)."""
    return [*content_terms(text), *compound_terms(text)]


def _query_terms(query: str) -> list[str]:
    """The query's compound names, and its other content terms: a compound's parts do not count again."""
    compounds = compound_terms(query)
    rest = query.lower()
    for compound in compounds:
        rest = rest.replace(compound, " ")
    return sorted({*compounds, *content_terms(rest)})


def _candidates(context: Sequence[ScoredChunk]) -> Iterator[_Sentence]:
    """Every whole sentence of the context long enough to be an answer and holding a content term, with its
    label and headings; none of a paragraph that instructs a model."""
    for marker, scored in enumerate(context, start=1):
        chunk = scored.chunk
        heading = frozenset(_terms(f"{chunk.page_title}\n{chunk.section or ''}"))
        label: frozenset[str] = frozenset()
        position = 0
        blocks = list(_blocks(chunk.text))
        for index, (block, is_label) in enumerate(blocks):
            if is_label:
                label = frozenset(_terms(block))
                continue
            if _instructs_a_model(block):
                continue
            sentences = _sentences(block)
            for order, text in enumerate(sentences):
                position += 1
                first, last = index == 0 and order == 0, index == len(blocks) - 1 and order == len(sentences) - 1
                if _cut_at_chunk_border(text, first=first, last=last):
                    continue
                terms = tuple(_terms(text))
                if terms and len(text.split()) >= _MIN_WORDS:
                    yield _Sentence(text, marker, position, max(scored.score, 0.0), terms, label, heading)


def _instructs_a_model(block: str) -> bool:
    """True for a paragraph that gives instructions to a model or to whoever answers (a planted injection)."""
    return bool(injection_patterns(block)) or bool(_ADDRESSES_A_MODEL.search(block))


def _cut_at_chunk_border(text: str, *, first: bool, last: bool) -> bool:
    """True for a sentence a chunk border cut: the chunk's first one starting in lower case, or its last one with
    no closing punctuation. Chunks overlap, so the whole sentence is in the neighbouring chunk."""
    if first and text[:1].islower():
        return True
    return last and not text.rstrip("\"')]*_ ").endswith((".", "!", "?", ":"))


def _ranked(query_terms: Sequence[str], sentences: Sequence[_Sentence], *, asks_amount: bool) -> list[_Sentence]:
    """The sentences matching a query term (in themselves or their label), best first: each query term found
    counts its IDF among the sentences (fully in the sentence, less in its label, less again only in its heading),
    a sentence stating an amount gains when the question asks for one, and the whole is weighted by its chunk's
    relevance; ties: marker, position."""
    if not query_terms or not sentences:
        return []
    count = len(sentences)
    frequency = Counter(term for sentence in sentences for term in {*sentence.terms, *sentence.label})
    idf = {term: math.log(1 + (count - frequency[term] + 0.5) / (frequency[term] + 0.5)) for term in query_terms}
    scored: list[tuple[float, _Sentence]] = []
    for sentence in sentences:
        own = set(sentence.terms)
        if not any(term in own or term in sentence.label for term in query_terms):
            continue
        score = sum(idf[term] * _found(term, own, sentence) for term in query_terms)
        if asks_amount and states_amount(sentence.text):
            score *= 1 + _AMOUNT_BONUS
        scored.append((score * (0.5 + sentence.relevance), sentence))
    scored.sort(key=lambda pair: (-pair[0], pair[1].marker, pair[1].position))
    return [sentence for _, sentence in scored]


def _found(term: str, own: set[str], sentence: _Sentence) -> float:
    """How much a query term counts for a sentence: found in it, in its label, in its headings, or not at all."""
    if term in own:
        return 1.0
    if term in sentence.label:
        return _LABEL_WEIGHT
    return _HEADING_WEIGHT if term in sentence.heading else 0.0


def _near_duplicates(a: _Sentence, b: _Sentence) -> bool:
    """True when most terms of the smaller sentence also occur in the other (overlapping chunks repeat text)."""
    terms_a, terms_b = set(a.terms), set(b.terms)
    return len(terms_a & terms_b) >= _DUPLICATE_OVERLAP * min(len(terms_a), len(terms_b))


def _sentences(block: str) -> list[str]:
    """Splits a paragraph or list item into sentences, at sentence ends that no abbreviation explains."""
    sentences: list[str] = []
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


def _blocks(text: str) -> Iterator[tuple[str, bool]]:
    """The paragraphs and list items of `text`, each on one line with markdown markers and links removed, and
    whether it is a label (a heading, or a short line without closing punctuation); table rows and fenced code
    are dropped."""
    lines: list[str] = []
    in_fence = False

    def flush() -> Iterator[tuple[str, bool]]:
        if lines:
            block = " ".join(lines)
            yield block, len(lines) == 1 and _is_label(block)

    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        heading = not in_fence and _HEADING.match(line)
        ends_block = in_fence or not line.strip() or heading or _TABLE_ROW.match(line)
        if ends_block or _ITEM.match(line):
            yield from flush()
            lines = []
        if heading:
            yield _HEADING.sub("", line).strip(), True
        elif not ends_block:
            content = _LINK.sub(r"\1", _ITEM.sub("", _QUOTE.sub("", line), count=1))
            lines.append(" ".join(content.split()))
    yield from flush()


def _is_label(block: str) -> bool:
    """A short line that names what follows: few words, no closing punctuation."""
    return len(block.split()) <= _LABEL_MAX_WORDS and not block.rstrip("\"')]*_ ").endswith((".", "!", "?", ":", ";", ","))
