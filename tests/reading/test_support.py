"""An answer's support: the share of its key phrases its evidence holds."""

from __future__ import annotations

import pytest

from ragsvc.domain import Chunk, ScoredChunk
from ragsvc.reading.support import _term_line, coverage_of

CONTEXT = (
    ScoredChunk(Chunk("guide", 0, "Hotel expenses are reimbursed up to 180 euros per night.", tags=("finance",)), 0.8),
    ScoredChunk(Chunk("guide", 1, "Flights are booked through the travel desk.", tags=("finance", "travel")), 0.6),
)


def test_coverage_counts_key_phrases_found_in_the_evidence() -> None:
    assert coverage_of("Hotel expenses are reimbursed up to 180 euros", CONTEXT) == 1.0
    # "hotel expenses" and "180 euros" are in the evidence; "taxi fares" and "200 dollars" are not
    assert coverage_of("Hotel expenses and taxi fares are reimbursed up to 200 dollars", CONTEXT) == pytest.approx(2 / 4)


def test_coverage_reads_a_chunk_only_when_a_phrase_needs_it_and_order_does_not_matter() -> None:
    unread = ScoredChunk(Chunk("other", 0, "A chunk no phrase of the answer needs: elephants dance at dawn."), 0.5)
    answer = "Hotel expenses are reimbursed up to 180 euros"
    _term_line.cache_clear()
    assert coverage_of(answer, [*CONTEXT, unread]) == 1.0
    assert _term_line.cache_info().currsize == 1, "only the first chunk was read: it holds every phrase"
    mixed = "Hotel expenses and flights are booked through the travel desk, not by elephants at noon"
    orders = [[*CONTEXT, unread], [unread, *CONTEXT], [CONTEXT[1], unread, CONTEXT[0]]]
    assert len({coverage_of(mixed, order) for order in orders}) == 1
