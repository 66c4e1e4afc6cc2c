"""The DROP_INVALID citation policy on its own (citation_policy.py): which sentences go, which markers go, what is
logged, in both citation styles; and how a request's policy is chosen."""

from __future__ import annotations

import logging

import pytest

from ragsvc.citation_policy import Attributor, Markers, attribute, drop_invalid, kept_sentence, resolve
from ragsvc.domain import Chunk, CitationPolicy, CitationStyle, ScoredChunk

CONTEXT = (
    ScoredChunk(Chunk("travel.md", 0, "Hotels are reimbursed up to 180 euros per night."), 0.8),
    ScoredChunk(Chunk("travel.md", 1, "Flights are booked two weeks ahead."), 0.6),
)
MARKERS = Markers(CONTEXT, CitationStyle.MARKER)


@pytest.mark.parametrize(
    ("draft", "kept", "removed"),
    [
        (
            "Hotels cost 180 euros [#1]. Taxis are free [#7]. Flights [#2].",
            "Hotels cost 180 euros [#1]. Flights [#2].",
            ("[#7]",),
        ),
        ("Taxis are free [#7]. Hotels cost 180 euros [#1].", "Hotels cost 180 euros [#1].", ("[#7]",)),
        ("Flights are booked ahead [#2] [#9].", "Flights are booked ahead [#2].", ("[#9]",)),
        (
            "Hotels cost 180 euros. [#1]\n\nTaxis are free. [#3]\n\nFlights. [#2]",
            "Hotels cost 180 euros. [#1]\n\nFlights. [#2]",
            ("[#3]",),
        ),
        ("Taxis are free [#0]. Trains too [#12].", "", ("[#0]", "[#12]")),
        ("Costs:\n- hotels [#1]\n- taxis [#9]\n- flights [#2]", "Costs:\n- hotels [#1]\n- flights [#2]", ("[#9]",)),
        ("Hotels cost 180 euros [#1]. Nothing else.", "Hotels cost 180 euros [#1]. Nothing else.", ()),
    ],
)
def test_sentences_backed_only_by_invalid_markers_are_dropped(draft: str, kept: str, removed: tuple[str, ...]) -> None:
    dropped = drop_invalid(draft, MARKERS)
    assert (dropped.text, dropped.removed) == (kept, removed)


def test_source_ids_that_name_no_packed_chunk_are_dropped_even_with_dots_in_them() -> None:
    markers = Markers(CONTEXT, CitationStyle.SOURCE_ID)
    draft = "Hotels [SourceId: travel.md:0]. Taxis [SourceId: taxis.md:3]. Flights [SourceId: travel.md:1] [SourceId: x:1]."
    dropped = drop_invalid(draft, markers)
    assert dropped.text == "Hotels [SourceId: travel.md:0]. Flights [SourceId: travel.md:1]."
    assert dropped.removed == ("[SourceId: taxis.md:3]", "[SourceId: x:1]")
    assert kept_sentence("In [#7] style it is no marker [SourceId: travel.md:1].", markers) is not None


def test_every_removal_is_logged_as_a_warning_naming_the_marker(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="ragsvc.citation_policy"):
        drop_invalid("Taxis are free [#7]. Flights are booked [#2] [#9].", MARKERS, "req-42")
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 2 and all(record.levelno == logging.WARNING for record in caplog.records)
    assert "[#7]" in messages[0] and "only unknown sources" in messages[0] and "req-42" in messages[0]
    assert "[#9]" in messages[1] and "beside a valid one" in messages[1]
    assert "Taxis" not in " ".join(messages), "the answer's words stay out of the log"


def test_a_requests_policy_wins_over_its_templates_which_wins_over_the_servers() -> None:
    strict, drop = CitationPolicy.STRICT, CitationPolicy.DROP_INVALID
    assert resolve(strict, drop, drop) is strict
    assert resolve(None, drop, strict) is drop
    assert resolve(None, None, drop) is drop


@pytest.mark.parametrize(
    ("draft", "attributed", "count"),
    [
        (
            "Hotels are reimbursed up to 180 euros per night. Flights are booked two weeks ahead.",
            "Hotels are reimbursed up to 180 euros per night [#1]. Flights are booked two weeks ahead [#2].",
            2,
        ),
        (  # a marked sentence is left as written; an unsupported one stays uncited
            "Flights are booked two weeks ahead [#1]. Taxis are free for managers on Fridays.",
            "Flights are booked two weeks ahead [#1]. Taxis are free for managers on Fridays.",
            0,
        ),
        (  # the insufficient-evidence sentence and the question stay as they are
            "Hotels are reimbursed up to 180 euros per night\nThe passages do not contain enough information about "
            "flights booked two weeks ahead. Are flights booked two weeks ahead?",
            "Hotels are reimbursed up to 180 euros per night [#1]\nThe passages do not contain enough information "
            "about flights booked two weeks ahead. Are flights booked two weeks ahead?",
            1,
        ),
        (  # code and a copy of the prompt's passages are not attributed
            "```\nHotels are reimbursed up to 180 euros per night.\n```\n<<<\nFlights are booked two weeks ahead.\n>>>",
            "```\nHotels are reimbursed up to 180 euros per night.\n```\n<<<\nFlights are booked two weeks ahead.\n>>>",
            0,
        ),
    ],
)
def test_attribution_marks_the_supported_sentences_without_a_marker(draft: str, attributed: str, count: int) -> None:
    assert attribute(draft, MARKERS) == (attributed, count)


def test_attribution_writes_the_markers_of_the_citation_style_and_reads_a_stream_as_the_whole() -> None:
    markers = Markers(CONTEXT, CitationStyle.SOURCE_ID)
    draft = "Flights are booked two weeks ahead! Hotels are reimbursed up to 180 euros per night"
    assert attribute(draft, markers)[0] == (
        "Flights are booked two weeks ahead [SourceId: travel.md:1]! "
        "Hotels are reimbursed up to 180 euros per night [SourceId: travel.md:0]"
    )
    pieces = [
        "Hotels are reimbursed up to 180 euros per night.\n",
        "```\n",
        "Flights are booked two weeks ahead.\n",  # code: left alone
        "```\n",
        "Flights are booked two weeks ahead.",
    ]
    attributor = Attributor(MARKERS)
    streamed = "".join(attributor.text(piece) for piece in pieces)
    assert streamed == attribute("".join(pieces), MARKERS)[0] and attributor.attributed == 2
    assert streamed.endswith("```\nFlights are booked two weeks ahead [#2].")
