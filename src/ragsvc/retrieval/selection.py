"""Selected-text mode (R-001-06): the evidence is the caller's selection, split into passages that keep their
character and line offsets into it; the index is never searched."""

from __future__ import annotations

import re

from ragsvc.domain import Chunk
from ragsvc.reading.sentences import spans as sentence_spans

SELECTION_DOCUMENT_ID = "selection"
SELECTION_NAME = "Selected text"
SELECTION_SOURCE_URL = "selected_text"  # R-001-06's citation values for selected-text mode
SELECTION_TITLE = "User Selection"
MAX_PASSAGE_CHARS = 600  # about 150 tokens: small enough to pinpoint, large enough to answer from

_PARAGRAPH_BREAK = re.compile(r"\n[ \t\r\f\v]*\n")
_SPACE = re.compile(r"\s+")


def not_in_selection_message(query: str) -> str:
    """R-001-07's answer when the selection does not hold the answer, [topic] being the question."""
    topic = query.strip().rstrip("?.! ")
    return (
        f'The provided selection does not contain information about "{topic}". '
        "Would you like me to search the full documentation?"
    )


def split_selection(selection: str, *, max_chars: int = MAX_PASSAGE_CHARS) -> list[Chunk]:
    """The selection's passages in order: paragraphs (split at blank lines), long ones cut between sentences (or
    between words when a sentence alone is too long). Each passage is a Chunk whose text is exactly
    selection[char_start:char_end], with 1-based line_start/line_end."""
    spans: list[tuple[int, int]] = []
    for start, end in _pieces(selection, 0, len(selection), _PARAGRAPH_BREAK):
        spans.extend(_fit(selection, start, end, max_chars))
    return [
        Chunk(
            document_id=SELECTION_DOCUMENT_ID,
            chunk_index=index,
            text=selection[start:end],
            document_name=SELECTION_NAME,
            source_url=SELECTION_SOURCE_URL,
            page_title=SELECTION_TITLE,
            char_start=start,
            char_end=end,
            line_start=selection.count("\n", 0, start) + 1,
            line_end=selection.count("\n", 0, end - 1) + 1,
        )
        for index, (start, end) in enumerate(spans)
    ]


def _pieces(text: str, start: int, end: int, separator: re.Pattern[str]) -> list[tuple[int, int]]:
    """The non-blank pieces of text[start:end] between matches of `separator`, whitespace trimmed."""
    pieces = []
    cursor = start
    for match in separator.finditer(text, start, end):
        pieces.append((cursor, match.start()))
        cursor = match.end()
    pieces.append((cursor, end))
    return [trimmed for s, e in pieces if (trimmed := _trim(text, s, e)) is not None]


def _trim(text: str, start: int, end: int) -> tuple[int, int] | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def _fit(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """text[start:end] as spans of at most `max_chars`, cut between sentences, else between words."""
    if end - start <= max_chars:
        return [(start, end)]
    units = [
        word
        for sentence in sentence_spans(text, start, end)
        for word in ([sentence] if sentence[1] - sentence[0] <= max_chars else _pieces(text, *sentence, _SPACE))
    ]
    spans: list[tuple[int, int]] = []
    first, last = units[0]
    for unit_start, unit_end in units[1:]:
        if unit_end - first <= max_chars:
            last = unit_end
            continue
        spans.append((first, last))
        first, last = unit_start, unit_end
    spans.append((first, last))
    # A single word longer than max_chars is cut where it must be.
    return [(s + i, min(s + i + max_chars, e)) for s, e in spans for i in range(0, e - s, max_chars)]
