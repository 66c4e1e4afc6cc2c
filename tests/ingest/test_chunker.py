from __future__ import annotations

import itertools
import random

import pytest

from ragsvc.encodings import get_encoding
from ragsvc.ingest.chunker import chunk_sections, least_chunks
from ragsvc.ingest.sections import Section


def tokens(text: str) -> int:
    return len(get_encoding("cl100k_base").encode_ordinary(text))


def prose(words: int, seed: int = 7) -> str:
    """Distinct, numbered words with varied whitespace and punctuation, so overlaps are unambiguous. Paragraphs end
    with a full stop: none is a label (a chunk starting under one would carry it, see the tests below)."""
    rng = random.Random(seed)
    stems = ["alpha", "Über", "café", "x-ray", "don’t"]
    separators = [" "] * 12 + ["\n", ".\n\n", ", ", ". ", "  "]
    return "".join(f"{rng.choice(stems)}{i}{rng.choice(separators)}" for i in range(words))


def shared_words(first: str, second: str) -> list[str]:
    """The longest run of words ending `first` and starting `second`."""
    a, b = first.split(), second.split()
    return max((b[:n] for n in range(len(b) + 1) if a[len(a) - n :] == b[:n]), key=len)


@pytest.mark.parametrize(("size", "overlap"), [(200, 40), (64, 16), (30, 0)])
def test_chunks_hold_at_most_the_token_limit(size: int, overlap: int) -> None:
    chunks = list(chunk_sections([Section(prose(3000))], chunk_tokens=size, overlap_tokens=overlap))

    assert len(chunks) > 5
    assert max(tokens(c.text) for c in chunks) <= size
    assert min(tokens(c.text) for c in chunks[:-1]) >= size * 0.8  # chunks are filled, not fragmented


def test_neighbouring_chunks_overlap_by_about_the_overlap() -> None:
    chunks = list(chunk_sections([Section(prose(3000))], chunk_tokens=120, overlap_tokens=30))

    for first, second in itertools.pairwise(chunks):
        shared = " ".join(shared_words(first.text, second.text))
        assert 20 <= tokens(shared) <= 32


def test_without_overlap_every_word_is_in_exactly_one_chunk() -> None:
    text = prose(2000)

    chunks = list(chunk_sections([Section(text)], chunk_tokens=100, overlap_tokens=0))

    assert [w for c in chunks for w in c.text.split()] == text.split()


def test_chunks_start_and_end_on_word_boundaries() -> None:
    text = prose(2000)
    words = text.split()

    chunks = list(chunk_sections([Section(text)], chunk_tokens=90, overlap_tokens=20))

    position = 0
    for chunk in chunks:
        assert chunk.text == chunk.text.strip()
        assert chunk.text in text
        chunk_words = chunk.text.split()
        position = words.index(chunk_words[0], position)  # numbered words are unique
        assert words[position : position + len(chunk_words)] == chunk_words
    assert chunks[-1].text.split()[-1] == words[-1]


def test_a_word_longer_than_a_chunk_is_cut() -> None:
    giant = "".join(f"segment{i}" for i in range(200))
    text = f"before {giant} after"

    chunks = list(chunk_sections([Section(text)], chunk_tokens=50, overlap_tokens=0))

    assert len(chunks) >= 4
    assert all(tokens(c.text) <= 50 for c in chunks)
    assert "".join("".join(c.text.split()) for c in chunks) == f"before{giant}after"


def test_chunks_never_cross_sections_and_keep_their_heading() -> None:
    sections = [
        Section(prose(400, seed=1), "Install", None),
        Section("One short paragraph.", "Usage", 2),
        Section(prose(400, seed=2), None, 3),
    ]

    chunks = list(chunk_sections(sections, chunk_tokens=100, overlap_tokens=20))

    assert Section("One short paragraph.", "Usage", 2) in chunks
    for chunk in chunks:
        section = next(s for s in sections if (s.heading, s.page_number) == (chunk.heading, chunk.page_number))
        assert chunk.text in section.text
    assert [c.heading for c in chunks] == sorted((c.heading for c in chunks), key=[s.heading for s in sections].index)


def test_a_short_section_is_one_chunk() -> None:
    assert list(chunk_sections([Section("  Hello there, world.\n")], chunk_tokens=50, overlap_tokens=10)) == [
        Section("Hello there, world.")
    ]


def test_a_blank_section_has_no_chunks() -> None:
    assert list(chunk_sections([Section(" \n\t "), Section("word")], chunk_tokens=50, overlap_tokens=10)) == [Section("word")]


def test_text_that_looks_like_special_tokens_is_plain_text() -> None:
    chunks = list(chunk_sections([Section("before <|endoftext|> after")], chunk_tokens=50, overlap_tokens=10))

    assert [c.text for c in chunks] == ["before <|endoftext|> after"]


@pytest.mark.parametrize(("size", "overlap"), [(40, 40), (40, 50), (40, -1), (0, 0)])
def test_the_overlap_must_be_smaller_than_the_chunk(size: int, overlap: int) -> None:
    with pytest.raises(ValueError, match="need chunk_tokens > overlap_tokens >= 0"):
        list(chunk_sections([Section("text")], chunk_tokens=size, overlap_tokens=overlap))


def test_a_chunk_starting_inside_an_entry_carries_its_label() -> None:
    entry = "max_connections (integer)\n\n" + " ".join(f"Sentence {i} about connections." for i in range(60))
    text = f"{entry}\n\nshared_buffers (integer)\n\nSets the amount of memory. The default is 128MB."

    chunks = list(chunk_sections([Section(text)], chunk_tokens=80, overlap_tokens=10))

    assert chunks[0].text.startswith("max_connections (integer)\n\nSentence 0 ")
    assert all(tokens(c.text) <= 80 for c in chunks)
    inside = [c.text for c in chunks[1:] if "Sentence" in c.text.split("\n\n")[1]]
    assert inside and all(t.startswith("max_connections (integer)\n\n") for t in inside)
    assert chunks[-1].text.startswith("max_connections (integer)") or chunks[-1].text.startswith("shared_buffers")
    assert chunks[-1].text.endswith("The default is 128MB.")


def test_a_chunk_cut_inside_code_opens_and_closes_its_fence() -> None:
    code = "\n".join(f"SELECT {i} FROM t{i};" for i in range(80))
    text = f"Run these statements:\n\n```\n{code}\n```\n\nThen check the result."

    chunks = list(chunk_sections([Section(text)], chunk_tokens=60, overlap_tokens=10))

    assert len(chunks) > 3
    for chunk in chunks:
        assert tokens(chunk.text) <= 60
        assert sum(1 for line in chunk.text.splitlines() if line.startswith("```")) % 2 == 0, chunk.text
    assert all(c.text.startswith("```\n") for c in chunks[1:-1])
    assert all(c.text.endswith("\n```") for c in chunks[:-1])


def test_the_least_chunks_bound_is_never_above_the_chunks_cut() -> None:
    """What lets a document past its chunk limit be refused before it is cut (ingest/indexer.py)."""
    for sections, size, overlap in (
        ([Section(prose(3000))], 120, 30),
        ([Section(prose(500)), Section("one"), Section(prose(80))], 40, 0),
        ([Section("x" * 20_000 + " " + prose(200))], 50, 10),  # a word longer than a chunk is cut in pieces
        ([Section(" ".join(["word"] * 1000))], 16, 0),  # one token a word: the bound is reached
    ):
        cut = len(list(chunk_sections(sections, chunk_tokens=size, overlap_tokens=overlap)))
        assert 0 < least_chunks(sections, size) <= cut
    assert least_chunks([Section(" ".join(["word"] * 1000))], 16) == 63
