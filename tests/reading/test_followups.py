"""The follow-up rules: a follow-up that lacks a subject of its own is searched with the earlier questions'."""

from __future__ import annotations

import pytest

from ragsvc.domain import ChatMessage, Role
from ragsvc.reading.followups import follow_up_search, follow_up_searches, lacks_subject, with_earlier_questions

SIGTERM = (ChatMessage(Role.USER, "What happens on SIGTERM?"), ChatMessage(Role.ASSISTANT, "It drains [#1]."))


def turns(*questions: str) -> tuple[ChatMessage, ...]:
    return tuple(m for q in questions for m in (ChatMessage(Role.USER, q), ChatMessage(Role.ASSISTANT, "...")))


@pytest.mark.parametrize(
    ("follow_up", "search"),
    [
        ("How long is it?", "How long is SIGTERM?"),  # the subject in place of the pronoun that stands for it
        ("Is it ok to ignore it?", "Is it ok to ignore SIGTERM?"),  # "is it ok to" stands for nothing
        ("what's its default", "what's SIGTERM's default"),
        ("Can they be retried?", "SIGTERM Can they be retried?"),  # "they" may stand for what the answer named
        ("and how do I delete one?", "SIGTERM and how do I delete one?"),  # no personal pronoun: before it
        ("And for SIGINT?", "SIGTERM And for SIGINT?"),
        ("what about the logs", "SIGTERM what about the logs"),
        ("default?", "SIGTERM default?"),
        ("Which values are allowed?", "SIGTERM Which values are allowed?"),
        ("How are documents chunked?", "How are documents chunked?"),  # a subject of its own: searched as asked
    ],
)
def test_a_follow_up_without_a_subject_gets_the_previous_one(follow_up: str, search: str) -> None:
    assert follow_up_search(follow_up, SIGTERM) == search


@pytest.mark.parametrize(
    ("first", "search"),
    [
        ("How do I create a database from the shell?", "database shell and how do I delete one?"),  # not "create"
        ("What does work_mem control?", "work_mem and how do I delete one?"),  # a name
        ("What is trust authentication?", "trust authentication and how do I delete one?"),  # neither: its words
    ],
)
def test_a_follow_up_asking_how_carries_the_earlier_questions_noun_phrases_and_names(first: str, search: str) -> None:
    assert follow_up_search("and how do I delete one?", turns(first)) == search


@pytest.mark.parametrize(
    ("first", "follow_up", "search"),
    [
        ("How do I start the server by hand?", "Does it need root?", "Does start server manually need root?"),
        (
            "How do I back up every database at once?",
            "Does that include the roles?",
            "back database Does that include the roles?",
        ),
        ("How do I create a database from the shell?", "And how can I drop one?", "database shell And how can I drop one?"),
    ],
)
def test_a_follow_up_with_no_action_of_its_own_carries_the_earlier_questions_action(
    first: str, follow_up: str, search: str
) -> None:
    assert follow_up_search(follow_up, turns(first)) == search, "its action is the earlier one's, unless it asks how"


def test_the_subject_comes_from_the_latest_question_that_had_one() -> None:
    history = turns("What is the default chunk_overlap setting of the ingester?", "What range is allowed?")
    assert follow_up_search("and the maximum?", history) == "chunk_overlap ingester and the maximum?"
    assert follow_up_search("Can it be zero?", history) == "Can chunk_overlap ingester be zero?"
    assert follow_up_search("and the maximum?", ()) == "and the maximum?"


def test_the_second_search_carries_the_earlier_questions_word_for_word_and_no_answer() -> None:
    history = (
        ChatMessage(Role.USER, "Which dbm.open flag creates the database? "),
        ChatMessage(Role.ASSISTANT, "The 'c' flag opens it for reading and writing [#1]."),
        ChatMessage(Role.USER, "And what does 'n' do?"),
        ChatMessage(Role.ASSISTANT, "It always creates a new, empty database [#2]."),
    )
    # "And what does 'n' do?" continues the first question: both are carried; the answers' words are not.
    assert with_earlier_questions("What permissions does the new file get?", history) == (
        "Which dbm.open flag creates the database? And what does 'n' do? What permissions does the new file get?"
    )
    # A question with a subject of its own starts the chain: nothing before it is carried.
    later = (*history, ChatMessage(Role.USER, "How do I open a gzip file?"), ChatMessage(Role.ASSISTANT, "..."))
    assert with_earlier_questions("and for writing?", later) == "How do I open a gzip file? and for writing?"
    assert with_earlier_questions(" default? ", ()) == "default?"


def test_a_follow_up_is_searched_as_the_rule_rewrites_it_then_after_its_earlier_questions() -> None:
    assert follow_up_searches("How long is it?", SIGTERM) == ("How long is SIGTERM?", "What happens on SIGTERM? How long is it?")
    # one search when both are the same: a question with no earlier question
    assert follow_up_searches("How long is it?", ()) == ("How long is it?",)


@pytest.mark.parametrize(
    ("query", "lacks"),
    [
        ("Is it fast?", True),
        ("And then?", True),
        ("the default?", True),
        ("Who owns the travel tag?", False),
        ("What permissions does server.key need?", False),
    ],
)
def test_lacks_subject(query: str, lacks: bool) -> None:
    assert lacks_subject(query) is lacks
