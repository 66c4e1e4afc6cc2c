from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from ragsvc.reading.text import compound_terms, content_terms, index_terms, key_phrases, option_terms, stem


def test_stems_meet() -> None:
    assert {stem(w) for w in ("configures", "configured", "configuring", "configure")} == {"configur"}
    assert stem("running") == "run" and stem("policies") == "policy" and stem("180") == "180"
    assert stem("connections") == stem("connect") and stem("authentication") == stem("authenticates")
    assert stem("option") == "option", "too short to strip"


def test_content_terms_drop_stopwords_and_keep_numbers() -> None:
    assert content_terms("What is the limit for hotels? It's 180 euros.") == ["limit", "hotel", "180", "euro"]


def test_key_phrases_are_runs_between_stopwords_and_punctuation() -> None:
    text = "Hotel expenses are reimbursed up to 180 euros per night, with an itemised receipt."
    assert key_phrases(text) == (("hotel", "expens"), ("reimburs",), ("180", "euro"), ("night",), ("itemis", "receipt"))


def test_long_runs_are_cut_and_repeats_kept_once() -> None:
    assert key_phrases("alpha beta gamma delta epsilon zeta. Alpha beta gamma delta epsilon zeta") == (
        ("alpha", "beta", "gamma", "delta"),
        ("epsilon", "zeta"),
    )


def test_compound_names_are_kept_whole() -> None:
    assert compound_terms("Set max_connections in pg_hba.conf (9.2 and later); e.g. not this.") == [
        "max_connections",
        "pg_hba.conf",
        "9.2",
        "e.g",
    ]


def test_command_line_options_are_kept_whole() -> None:
    text = "Without -D, use --PGDATA or --globals-only; not read-only, -1, -- a comment or -Fc."
    assert option_terms(text) == ["-D", "--pgdata", "--globals-only"]
    assert {"-D", "--pgdata", "--globals-only"} <= set(index_terms(text))
    assert option_terms("-d") == ["-d"], "a short option keeps its case: -d is not -D"


@given(st.text(alphabet="aZ09._ -\u00e9\n", max_size=40))
def test_options_are_what_the_plain_pattern_finds(text: str) -> None:
    """The pattern that opens with the dash finds what the one that looks behind first does."""
    plain = re.findall(r"(?<![\w-])(?:--[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*|-[A-Za-z])(?![\w-])", text)
    assert option_terms(text) == [o if len(o) == 2 else o.lower() for o in plain]


@given(st.text(alphabet="aZ09._ -\u00e9\n", max_size=60))
def test_compound_names_are_what_the_plain_pattern_finds(text: str) -> None:
    """The pattern that never backtracks finds what the plain one does (which is quadratic in word length)."""
    assert compound_terms(text) == re.findall(r"[a-z0-9]+(?:[._][a-z0-9]+)+", text.lower())
