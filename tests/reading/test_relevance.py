"""Candidate passages: what a definition list's term adds to a quote; a passage placed in a context."""

from __future__ import annotations

import dataclasses

from ragsvc.domain import Chunk, ScoredChunk
from ragsvc.reading.chunks import candidates
from ragsvc.reading.passages import Kind
from ragsvc.reading.relevance import Candidate
from ragsvc.reading.traits import Traits


def test_a_passage_under_definition_terms_is_quoted_after_them_and_one_under_a_heading_is_not() -> None:
    text = (
        "# Options\n\n-f\n\n--force\n\nAllow adding otherwise ignored files.\n\n"
        "--dry-run\n\nDon't actually add the file(s), just show if they exist and/or will be ignored.\n\n"
        "## Discussion\n\nThe optional configuration variable core.excludesFile names a file of patterns."
    )
    found = {c.text: c for c in candidates([ScoredChunk(Chunk("git-add", 0, text), 0.5)])}

    assert found["Allow adding otherwise ignored files."].quote == "-f, --force: Allow adding otherwise ignored files."
    assert found["Allow adding otherwise ignored files."].label >= {"-f", "--force"}, "both terms are read with it"
    dry = "Don't actually add the file(s), just show if they exist and/or will be ignored."
    assert found[dry].quote == f"--dry-run: {dry}"
    plain = "The optional configuration variable core.excludesFile names a file of patterns."
    assert found[plain].quote == plain, "a section heading is not a term the passage defines"


def test_a_passage_naming_its_term_is_quoted_as_it_is() -> None:
    text = "max_connections (integer)\n\nThe default is 100.\n\nmax_connections (integer) caps the connections."
    first, second = candidates([ScoredChunk(Chunk("runtime", 0, text), 0.5)])

    assert first.quote == "max_connections (integer): The default is 100."
    assert second.quote == "max_connections (integer) caps the connections.", "it names its term already"


def test_a_placed_passage_is_the_passage_replaced_field_by_field() -> None:
    passage = Candidate(
        "The default is 100.", 0, 3, 0.0, frozenset({"default"}), frozenset({"max_connections"}), 2,
        frozenset({"runtime"}), (0, 4, 5), frozenset({"amount"}), Traits(4, True, True, False, False, False),
        cut=True, kind=Kind.LABEL, term="max_connections",
    )  # fmt: skip
    assert {f.name for f in dataclasses.fields(Candidate)} == {
        "text", "marker", "position", "relevance", "terms", "label", "depth", "heading", "scope", "values", "traits",
        "cut", "kind", "term",
    }, "a new field: `placed` must carry it"  # fmt: skip

    placed = passage.placed(2, 0.7)

    assert placed == dataclasses.replace(passage, marker=2, relevance=0.7, scope=(2, 4, 5))
