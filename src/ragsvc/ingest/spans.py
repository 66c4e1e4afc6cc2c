"""Where each chunk lies in its document (R-004-03): character offsets into the document's text as ingest extracted
it, which is its sections' texts in order, separated by a blank line ("\\n\\n"); for a plain-text document that is
its text as decoded.

The chunker cuts each chunk from one section's text, and may carry what it needs to be read alone from before its
start (its entry's label and a blank line, an opening code fence) and a closing fence after its end (see
ingest/chunker.py). A chunk's span is the part cut from the section, without what it carries. Spans are found
after chunking, by looking each chunk up in its section from where the previous chunk started (chunks come in
order and overlap), so the chunker itself is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ragsvc.ingest.chunker import FENCE
from ragsvc.ingest.sections import Section

SEPARATOR = "\n\n"  # between two sections in the document's text


def document_text(sections: Sequence[Section]) -> str:
    """The text that spans are offsets into."""
    return SEPARATOR.join(section.text for section in sections)


def chunk_spans(sections: Sequence[Section], chunks: Sequence[Section]) -> list[tuple[int, int] | None]:
    """The (start, end) of each chunk of `sections` (as chunk_sections made them, in order) in `document_text`;
    None for a chunk not found, which only a chunker that rewrites text would make."""
    spans: list[tuple[int, int] | None] = []
    index, cursor, offset = 0, 0, 0
    for chunk in chunks:
        while index < len(sections) - 1 and not _same_place(sections[index], chunk, cursor):
            offset += len(sections[index].text) + len(SEPARATOR)
            index, cursor = index + 1, 0
        found = _find(sections[index].text, chunk.text, cursor) if sections else None
        if found is None:
            spans.append(None)
            continue
        start, end = found
        spans.append((offset + start, offset + end))
        cursor = start + 1
    return spans


def _same_place(section: Section, chunk: Section, cursor: int) -> bool:
    """Whether `chunk` can come from `section` at or after `cursor`."""
    if (section.heading, section.page_number) != (chunk.heading, chunk.page_number):
        return False
    return _find(section.text, chunk.text, cursor) is not None


def _find(text: str, chunk: str, cursor: int) -> tuple[int, int] | None:
    for body in _bodies(chunk):
        at = text.find(body, cursor)
        if at >= 0:
            return at, at + len(body)
    return None


def _bodies(chunk: str) -> Iterator[str]:
    """What of `chunk` may have been cut from its section, longest first: all of it, then without a closing fence,
    an opening fence, a carried label (its first paragraph), and their combinations."""
    closing = f"\n{FENCE}"
    ends = [chunk, chunk.removesuffix(closing)] if chunk.endswith(closing) else [chunk]
    for text in ends:
        starts = [text]
        if SEPARATOR in text:
            starts.append(text.split(SEPARATOR, 1)[1])
        for start in list(starts):
            if start.startswith(f"{FENCE}\n"):
                starts.append(start.removeprefix(f"{FENCE}\n"))
        yield from (start for start in starts if start.strip())
