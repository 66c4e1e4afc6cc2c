"""Rules the domain types state themselves."""

from __future__ import annotations

import pytest

from ragsvc.domain import Chunk, Citation


def citation(text: str) -> Citation:
    return Citation(marker=1, chunk=Chunk("doc", 0, text), relevance_score=0.9)


@pytest.mark.parametrize("length", [0, 1, 199, 200])
def test_a_snippet_of_at_most_200_characters_is_the_whole_text(length: int) -> None:
    text = "x" * length
    assert citation(text).snippet == text


@pytest.mark.parametrize("length", [201, 1000])
def test_a_longer_text_is_cut_to_its_first_200_characters_and_an_ellipsis(length: int) -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(length))
    snippet = citation(text).snippet
    assert snippet == text[:200] + "..."
    assert len(snippet) == 203


def test_the_cut_counts_characters_not_bytes_or_words() -> None:
    text = "é" * 150 + " word" * 20  # 250 characters, 400 bytes in UTF-8
    assert citation(text).snippet == text[:200] + "..."
