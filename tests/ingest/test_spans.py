"""Chunk spans (R-004-03): every chunk's span in its document's text holds the text the chunker cut for it."""

from __future__ import annotations

import pytest

from ragsvc.domain import SourceDocument
from ragsvc.ingest.chunker import chunk_sections
from ragsvc.ingest.sections import Section
from ragsvc.ingest.spans import chunk_spans, document_text
from tests.ingest.reading import sections_of

LABELLED = (
    "Server settings\n\n"
    "max_connections (integer)\n\n"
    + " ".join(f"Sentence {n} of the entry about connections and how many clients may connect." for n in range(40))
    + "\n\n```\n"
    + "\n".join(f"SELECT {n} FROM pg_settings WHERE name = 'max_connections';" for n in range(30))
    + "\n```\n\nAfter the code, a last paragraph."
)


def spans_of(sections: list[Section], tokens: int = 60, overlap: int = 12) -> tuple[str, list[Section], list]:
    chunks = list(chunk_sections(sections, chunk_tokens=tokens, overlap_tokens=overlap))
    return document_text(sections), chunks, chunk_spans(sections, chunks)


def test_each_span_is_its_chunk_without_what_it_carries() -> None:
    text, chunks, spans = spans_of([Section(LABELLED)])
    assert any(c.text.startswith("max_connections (integer)\n\nSentence") for c in chunks[2:]), "a label is carried"
    assert any(c.text.startswith("max_connections (integer)\n\n```\n") for c in chunks), "and a fence reopened"
    for chunk, span in zip(chunks, spans, strict=True):
        assert span is not None
        cut = text[span[0] : span[1]]
        assert cut in chunk.text and len(cut) >= len(chunk.text) - len("max_connections (integer)\n\n```\n\n```")
    starts = [span[0] for span in spans if span]
    assert starts == sorted(starts) and len(set(starts)) == len(starts), "in order, each chunk its own place"
    assert spans[0][0] == 0 and spans[-1][1] == len(text)


def test_spans_count_the_sections_before_them() -> None:
    sections = [
        Section("First page text. " * 30, page_number=1),
        Section("Second page text. " * 30, page_number=2),
        Section("Same words. " * 20, heading="A"),
        Section("Same words. " * 20, heading="B"),
    ]
    text, chunks, spans = spans_of(sections, tokens=40, overlap=8)
    for chunk, span in zip(chunks, spans, strict=True):
        assert span is not None and text[span[0] : span[1]] == chunk.text
        section = next(i for i, s in enumerate(sections) if (s.heading, s.page_number) == (chunk.heading, chunk.page_number))
        begins = sum(len(s.text) + 2 for s in sections[:section])
        assert begins <= span[0] and span[1] <= begins + len(sections[section].text), "within its own section"


@pytest.mark.parametrize("media_type", ["text/plain", "text/markdown"])
def test_a_plain_text_documents_spans_are_offsets_into_its_text(media_type: str) -> None:
    content = "Refunds are possible within 14 days. " * 40
    sections = sections_of(SourceDocument("d", "d.txt", content.encode(), media_type=media_type))
    text, chunks, spans = spans_of(sections)
    if media_type == "text/plain":
        assert text == content
    assert all(span is not None and text[span[0] : span[1]] == c.text for c, span in zip(chunks, spans, strict=True))
