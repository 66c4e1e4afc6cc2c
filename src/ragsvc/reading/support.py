"""How far an answer's words are supported by its evidence: the share of its key phrases the evidence holds."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from ragsvc.domain import ScoredChunk
from ragsvc.reading.text import content_terms, key_phrases


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


@functools.lru_cache(maxsize=4096)  # the same chunks come back as evidence query after query
def _term_line(text: str) -> str:
    """The content terms of `text` between single spaces, with a space at each end."""
    return " " + " ".join(content_terms(text)) + " "
