"""The repetition guard: loops are caught within a few copies, real text never trips it, and the text of a stopped
generation keeps each sentence once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragsvc.generation.repetition import (
    MAX_UNIT_CHARS,
    MIN_COPIES,
    MIN_LOOP_CHARS,
    RepetitionGuard,
    looping,
    without_repeats,
)

CORPUS = Path(__file__).parents[2] / "src/ragsvc/demo_corpus"
SENTENCE = "The daily meal allowance on Mars is 85 credits [#1]. "


def fed_until_tripped(deltas: list[str]) -> int | None:
    """How many deltas the guard read before it tripped (None: it never did)."""
    guard = RepetitionGuard()
    for count, delta in enumerate(deltas, start=1):
        if guard.feed(delta):
            return count
    return None


def words(text: str) -> list[str]:
    return [word + " " for word in text.split()]


def test_a_repeated_sentence_is_caught_at_its_third_copy() -> None:
    deltas = words("Intro sentence here. " + SENTENCE * 50)
    per_copy = len(words(SENTENCE))
    assert fed_until_tripped(deltas) == 3 + per_copy * MIN_COPIES


@pytest.mark.parametrize(
    "loop",
    ["the the the " * 40, "1. 1. 1. 1. " * 20, "Yes! " * 30, "- item\n" * 20, "[#1] " * 30, "A [#1]. B [#2]. C [#3]. " * 5],
)
def test_word_and_passage_loops_are_caught(loop: str) -> None:
    assert fed_until_tripped([loop[i : i + 3] for i in range(0, len(loop), 3)]) is not None


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.md")), ids=lambda p: p.name)
def test_real_text_never_trips_it(path: Path) -> None:
    assert fed_until_tripped(words(path.read_text())) is None


@pytest.mark.parametrize("text", ["no, no, no, no.", "a" * 63, "| --- | --- | --- |", ""])
def test_short_repeats_are_not_loops(text: str) -> None:
    assert not looping(text)


def test_whitespace_differences_do_not_hide_a_loop() -> None:
    assert fed_until_tripped([SENTENCE.strip() + "\n", SENTENCE.strip() + "  ", SENTENCE.strip() + "\n\n"]) == 3


def test_the_text_of_a_stopped_generation_keeps_each_sentence_once() -> None:
    text = "Intro [#2]. " + SENTENCE * 3 + "The daily meal"
    assert without_repeats(text) == "Intro [#2]. " + SENTENCE.strip()
    assert without_repeats("the the the the the") == "", "a loop without a sentence leaves nothing"


def loops_by_definition(text: str) -> bool:
    """`looping` as the module docstring defines it, every passage length tried."""
    for unit in range(1, MAX_UNIT_CHARS + 1):
        span = unit * max(MIN_COPIES, -(-MIN_LOOP_CHARS // unit))
        if span <= len(text) and text[-span:] == text[-unit:] * (span // unit):
            return True
    return False


@given(
    st.lists(st.sampled_from(["ab", "a", "b ", " ", "abc. ", "x" * 30]), max_size=60),
    st.integers(min_value=0, max_value=6),
)
def test_looping_agrees_with_its_definition(pieces: list[str], copies: int) -> None:
    text = "".join(pieces)
    text += text[-37:] * copies  # often a loop, of passages of every length
    assert looping(text) is loops_by_definition(text)


@given(st.lists(st.text(alphabet="ab \n\t.", max_size=12), max_size=40))
def test_the_guard_sees_the_text_with_whitespace_runs_as_one_space(deltas: list[str]) -> None:
    guard = RepetitionGuard()
    tripped = [guard.feed(delta) for delta in deltas]
    normalized = [re.sub(r"\s+", " ", "".join(deltas[: n + 1]))[-MAX_UNIT_CHARS * MIN_COPIES :] for n in range(len(deltas))]
    assert tripped == [any(looping(text) for text in normalized[: n + 1]) for n in range(len(deltas))]
