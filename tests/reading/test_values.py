import pytest

from ragsvc.reading.values import AMOUNT, DURATION, SIZE, VERSION, answers_value, asked_values, stated_values


@pytest.mark.parametrize(
    ("question", "asked"),
    [
        ("How long is the grace period?", {DURATION}),
        ("How often does a checkpoint run?", {DURATION}),
        ("How big is the WAL buffer?", {SIZE}),
        ("How many autovacuum workers can run at once?", {AMOUNT}),
        ("max_wal_size default", {AMOUNT}),
        ("And what is it set to out of the box?", {AMOUNT}),
        ("Which addresses does it listen on out of the box?", {AMOUNT}),  # read as "by default"
        ("Why is track_io_timing off by default?", set()),
        ("How do I restore a dump?", set()),
        ("Which SQLite release added ALTER TABLE DROP COLUMN?", {VERSION}),
    ],
)
def test_what_a_question_asks_for(question: str, asked: set[str]) -> None:
    assert asked_values(question) == asked


@pytest.mark.parametrize(
    ("text", "stated"),
    [
        ("The default is one minute (1min).", {DURATION, AMOUNT}),
        ("It defaults to 64 megabytes (64MB).", {SIZE, AMOUNT}),
        ("The default is three.", {AMOUNT}),
        ("Only one process may run at any one time.", set()),
        ("For more information see Section 25.1.5 and Table 9.90.", set()),
        ("If several large tables become eligible, workers are busy.", set()),
        ("This pragma invokes the sqlite3_soft_heap_limit64() interface with utf8 names.", set()),
        ("DROP COLUMN is supported since version 3.35.0.", {VERSION, AMOUNT}),
    ],
)
def test_what_a_text_states(text: str, stated: set[str]) -> None:
    assert stated_values(text) == stated


def test_a_value_of_the_kind_asked_answers_fully_another_kind_half() -> None:
    asked = asked_values("How long is the grace period?")
    assert answers_value(asked, stated_values("Ten seconds by default.")) == 1.0
    assert answers_value(asked, stated_values("It holds 16 megabytes.")) == 0.5
    assert answers_value(asked, stated_values("It is configurable.")) == 0.0
    assert answers_value(frozenset(), stated_values("Ten seconds by default.")) == 0.0
