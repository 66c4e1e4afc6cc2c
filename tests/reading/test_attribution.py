"""Attribution: which packed chunk clearly supports a sentence written without a marker, and which sentences may
never be attributed."""

from __future__ import annotations

import pytest

from ragsvc.domain import Chunk, ScoredChunk
from ragsvc.reading.attribution import SUPPORT_BAR, attributable, attribution
from ragsvc.reading.support import ChunkSupport, strongest_support

EVIDENCE = (
    ScoredChunk(Chunk("travel", 0, "Hotel expenses are reimbursed up to 180 euros per night in every city."), 0.8),
    ScoredChunk(
        Chunk("travel", 1, "Flights are booked through the travel desk two weeks ahead. Taxis are paid by the traveller."),
        0.6,
    ),
)


@pytest.mark.parametrize(
    ("sentence", "marker"),
    [
        ("Hotel expenses are reimbursed up to 180 euros per night.", 1),
        ("Flights are booked through the travel desk two weeks ahead.", 2),
        ("The travel desk books flights two weeks ahead", None),  # a paraphrase: not its words in a row
        ("Hotel expenses are reimbursed up to 250 dollars per night.", None),  # words of its own
        ("Hotel expenses are reimbursed by the travel desk two weeks ahead.", None),  # two chunks' facts joined
        ("Taxis are reimbursed up to 180 euros per night.", None),  # one chunk's phrases recombined
    ],
)
def test_a_sentence_is_attributed_only_to_a_chunk_holding_most_of_its_words_in_order(sentence: str, marker: int | None) -> None:
    support = attribution(sentence, EVIDENCE)
    assert (support.marker if support is not None else None) == marker
    if support is not None:
        assert support.share >= SUPPORT_BAR


@pytest.mark.parametrize(
    "sentence",
    [
        "The documents do not contain enough information about hotel expenses per night.",  # insufficient evidence
        "I cannot answer whether hotel expenses are reimbursed up to 180 euros per night.",
        "Are hotel expenses reimbursed up to 180 euros per night?",  # a question
        "You can book flights through the travel desk two weeks ahead.",  # instructions, to the reader
        "Book flights through the travel desk two weeks ahead, please.",
        "- Use the travel desk: flights are booked two weeks ahead.",  # an imperative opening
        "Hotel expenses are reimbursed up to 180 euros per night as follows:",  # introduces what follows
        "Hotel expenses are reimbursed up to 180 euros per night [#2].",  # a marker: left as the model wrote it
        "Hotel expenses are reimbursed up to 180 euros per night [#7].",  # an invalid one too
        "Flights are booked through the travel desk [SourceId: travel:1].",
        "```Hotel expenses are reimbursed up to 180 euros```",  # code
        "Hotel expenses.",  # too few words to prove anything
    ],
)
def test_insufficient_evidence_questions_instructions_marked_and_short_sentences_are_never_attributed(
    sentence: str,
) -> None:
    assert attribution(sentence, EVIDENCE) is None


def test_a_plain_statement_is_attributable_whatever_its_evidence() -> None:
    assert attributable("Hotel expenses are reimbursed up to 250 dollars per night.")
    assert not attributable("What are hotel expenses reimbursed up to?")


def test_the_strongest_support_is_the_best_chunk_with_how_much_of_the_sentence_it_holds() -> None:
    # "taxi" and "paid traveller" are in chunk 2, "180 euros" in chunk 1: chunk 2 holds more, not enough
    support = strongest_support("Taxis are paid by the traveller up to 180 euros.", EVIDENCE)
    assert support is not None and support.marker == 2 and 0 < support.share < SUPPORT_BAR
    assert strongest_support("Hotel expenses are reimbursed up to 180 euros per night.", EVIDENCE) == ChunkSupport(1, 1.0)
    assert strongest_support("Hotels.", EVIDENCE) is None, "fewer than three content terms"
    assert strongest_support("Hotel expenses are reimbursed up to 180 euros.", ()) is None
