"""What a passage's text shows whatever the question, as the trained reader's features read it, and its flags as a
packed reading stores them."""

from __future__ import annotations

from ragsvc.reading.relevance import passage_terms
from ragsvc.reading.traits import Traits, traits


def read(text: str) -> Traits:
    return traits(text, passage_terms(text))


def test_each_trait_is_read_from_the_text_and_its_terms() -> None:
    assert read("The default is 100 connections.") == Traits(5, number=True, default=True, negation_or_modal=False,
                                                             pointer=False, code=False)  # fmt: skip
    assert read("It cannot be changed; see the server settings.") == Traits(
        8, number=False, default=False, negation_or_modal=True, pointer=True, code=False
    )
    assert read("Set max_connections in the configuration.").code, "a compound name"
    assert read("Start it with --pgdata and a directory.").code, "an option"
    assert read("Use VACUUM FULL to reclaim the space.").code, "a keyword in capitals"
    assert read("Call `reload` or reload() after editing.").code, "code"
    assert not read("Version 9.2 changed the format.").code, "a number is no name"


def test_the_flags_read_back_as_written() -> None:
    for found in (read("The default is 100."), read("It cannot be changed; see `pg_ctl`."), read("Plain words here.")):
        assert Traits.of_flags(found.words, found.flags) == found
