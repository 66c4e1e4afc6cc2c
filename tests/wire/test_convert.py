"""proto <-> domain conversion: what a citation and an answer's timings carry over the wire."""

from __future__ import annotations

from ragsvc.domain import Answer, Chunk, Citation, Timings
from ragsvc.wire.convert import answer_to_proto, citation_to_proto


def test_a_citation_carries_the_whole_text_and_its_snippet() -> None:
    text = "The overall confidence is 30 times the retrieval score. " * 5  # 280 characters
    chunk = Chunk("guide", 3, text, document_name="guide.md", section="Confidence", page_number=2)
    proto = citation_to_proto(Citation(marker=2, chunk=chunk, relevance_score=0.75))
    assert proto.snippet == text[:200] + "..." and proto.text == text
    assert (proto.marker, proto.source_id, proto.document_id, proto.chunk_index) == (2, "guide:3", "guide", 3)
    assert (proto.document_name, proto.section, proto.page_number) == ("guide.md", "Confidence", 2)
    assert proto.relevance_score == 0.75
    short = citation_to_proto(Citation(marker=1, chunk=Chunk("faq", 0, "Short."), relevance_score=0.5))
    assert short.snippet == short.text == "Short."


def test_the_timings_carry_the_store_time_apart_from_embedding() -> None:
    timings = Timings(retrieval_ms=4.5, embedding_ms=0.25, store_ms=1.75, total_ms=30.0)
    proto = answer_to_proto(Answer("An answer.", timings=timings)).timings
    assert proto.store.ToNanoseconds() == 1_750_000 and proto.embedding.ToNanoseconds() == 250_000
    assert proto.retrieval.ToNanoseconds() == 4_500_000 and proto.total.ToNanoseconds() == 30_000_000
    assert answer_to_proto(Answer("Cached.")).timings.store.ToNanoseconds() == 0, "no engine call, no store time"
