"""What users write meets what the documentation says: phrases read as the documentation's word, words for the same
action counted as one."""

from __future__ import annotations

from ragsvc.reading.paraphrase import plain, same_sense
from ragsvc.reading.text import content_terms


def test_phrases_users_write_read_as_the_documentations_words() -> None:
    assert plain("How do I switch it off?") == "How do I disable?"
    assert plain("Turn on logging") == "enable logging"
    assert plain("How do I start the server by hand?") == "How do I start the server manually?"
    assert plain("What is it set to out of the box?") == "What is it set to by default?"
    assert plain("Is the switch on the left?") == "Is the switch on the left?", "'switch' as a noun stays"
    assert plain("What happens when the disk fills up?") == "What happens when the disk full?"
    assert plain("How many can connect at the same time?") == plain("How many can connect simultaneously?")
    assert plain("How many can connect simultaneously?") == "How many can connect concurrent?"


def test_words_for_the_same_action_count_as_one() -> None:
    assert same_sense(content_terms("lower it")) == same_sense(content_terms("decreasing it")) == ["lower"]
    assert same_sense(content_terms("raise the limit")) == same_sense(content_terms("increase the limit"))
    assert same_sense(content_terms("deactivate")) == same_sense(content_terms("disables"))
    assert same_sense(content_terms("is md5 safe")) == same_sense(content_terms("md5 secure"))
    assert same_sense(content_terms("security")) == ["security"], "the noun stays: 'security' is a topic of its own"
