"""How far an answer's words are supported by its evidence: the share of its key phrases the evidence holds, in all
and by one chunk; and whether a text says that the evidence does not answer."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ragsvc.domain import ScoredChunk
from ragsvc.reading.text import content_terms, key_phrases

_REFUSAL = re.compile(
    r"(don't|do not|does not|doesn't) (have|contain) (enough )?(information|evidence)"
    r"|not enough (information|evidence)|insufficient (information|evidence)|cannot answer",
    re.IGNORECASE,
)


def says_insufficient(text: str) -> bool:
    """Whether `text` says the evidence does not answer (the refusal phrases)."""
    return _REFUSAL.search(text) is not None


def coverage_of(answer: str, context: Sequence[ScoredChunk]) -> float:
    """Share of the answer's key phrases (see lexical.key_phrases) found in the evidence: a phrase is found when
    its terms occur in a row in one chunk (stopwords and inflections aside)."""
    phrases = key_phrases(answer)
    if not phrases:
        return 0.0
    unread = (scored.chunk.text for scored in context)
    lines: list[str] = []  # the term lines of the chunks read so far: a chunk is read only when a phrase needs it

    def found(phrase: tuple[str, ...]) -> bool:
        run = " " + " ".join(phrase) + " "
        if any(run in line for line in lines):
            return True
        for text in unread:
            lines.append(_term_line(text))
            if run in lines[-1]:
                return True
        return False

    return sum(found(phrase) for phrase in phrases) / len(phrases)


@dataclass(frozen=True, slots=True)
class ChunkSupport:
    """The chunk of the evidence that best holds a text's words: its marker (its position, from 1) and how strongly
    it holds them (`strongest_support`)."""

    marker: int
    share: float


def strongest_support(text: str, context: Sequence[ScoredChunk]) -> ChunkSupport | None:
    """The one chunk of `context` that best holds `text`, the first of equals, with its share: the lesser of the
    share of `text`'s key-phrase terms it holds (a phrase is held when its terms occur in a row in the chunk, as in
    `coverage_of`; each phrase weighs its number of terms) and the share of `text`'s runs of three neighbouring
    content terms that the chunk holds in a row too (stopwords aside: so a sentence that recombines one chunk's
    phrases in another order is not held). None when `text` has no key phrase or fewer than three content terms, or
    `context` no chunk."""
    phrases, weights, runs = _held_parts(text)
    if not runs or not phrases:  # nothing to weigh (the held share would divide by zero)
        return None
    best: ChunkSupport | None = None
    for marker, scored in enumerate(context, start=1):
        line = _term_line(scored.chunk.text)
        held = sum(weight for run, weight in zip(phrases, weights, strict=True) if run in line) / sum(weights)
        share = min(held, sum(run in line for run in runs) / len(runs))
        if best is None or share > best.share:
            best = ChunkSupport(marker, share)
    return best


@functools.lru_cache(maxsize=1024)  # an answer's sentences are attributed as they stream, then again when validated
def _held_parts(text: str) -> tuple[tuple[str, ...], tuple[int, ...], frozenset[str]]:
    """What `strongest_support` looks for of `text` in a chunk's term line: its key phrases (each between spaces),
    their weights (their terms), and its runs of three neighbouring content terms (each between spaces)."""
    phrases = tuple(" " + " ".join(phrase) + " " for phrase in key_phrases(text))
    terms = content_terms(text)
    runs = frozenset(" " + " ".join(terms[start : start + 3]) + " " for start in range(len(terms) - 2))
    return phrases, tuple(run.count(" ") - 1 for run in phrases), runs


@functools.lru_cache(maxsize=4096)  # the same chunks come back as evidence query after query
def _term_line(text: str) -> str:
    """The content terms of `text` between single spaces, with a space at each end."""
    return " " + " ".join(content_terms(text)) + " "
