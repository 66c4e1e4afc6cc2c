from __future__ import annotations

from ragsvc.lexical import content_terms, key_phrases, stem


def test_stems_meet() -> None:
    assert {stem(w) for w in ("configures", "configured", "configuring", "configure")} == {"configur"}
    assert stem("running") == "run" and stem("policies") == "policy" and stem("180") == "180"
    assert stem("connections") == stem("connect") and stem("authentication") == stem("authenticates")
    assert stem("option") == "option", "too short to strip"


def test_content_terms_drop_stopwords_and_keep_numbers() -> None:
    assert content_terms("What is the limit for hotels? It's 180 euros.") == ["limit", "hotel", "180", "euro"]


def test_key_phrases_are_runs_between_stopwords_and_punctuation() -> None:
    text = "Hotel expenses are reimbursed up to 180 euros per night, with an itemised receipt."
    assert key_phrases(text) == [("hotel", "expens"), ("reimburs",), ("180", "euro"), ("night",),
                                 ("itemis", "receipt")]


def test_long_runs_are_cut_and_repeats_kept_once() -> None:
    assert key_phrases("alpha beta gamma delta epsilon zeta. Alpha beta gamma delta epsilon zeta") == [
        ("alpha", "beta", "gamma", "delta"),
        ("epsilon", "zeta"),
    ]

