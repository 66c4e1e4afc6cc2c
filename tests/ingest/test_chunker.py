from __future__ import annotations

import itertools
import random

import pytest

from ragsvc.encodings import get_encoding
from ragsvc.ingest.chunker import chunk_sections
from ragsvc.ingest.loaders import Section


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


def sentences(count: int, seed: int = 3) -> str:
    """Numbered sentences of 4 to 16 words in paragraphs of 1 to 4, so chunk borders are easy to check."""
    rng = random.Random(seed)
    vocabulary = ["the", "table", "row", "index", "page", "is", "a", "of"]
    written, paragraph = [], []
    for i in range(count):
        words = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(3, 15)))
        paragraph.append(f"Sentence{i} {words}{rng.choice(['.', '?', '!', '.'])}")
        if len(paragraph) == rng.randint(1, 4):
            written.append(" ".join(paragraph))
            paragraph = []
    return "\n\n".join([*written, " ".join(paragraph)]).strip()


@pytest.mark.parametrize(("size", "overlap"), [(200, 40), (64, 16), (30, 0)])
def test_chunks_hold_at_most_the_token_limit(size: int, overlap: int) -> None:
    chunks = chunk_sections([Section(prose(3000))], chunk_tokens=size, overlap_tokens=overlap)

    assert len(chunks) > 5
    assert max(tokens(c.text) for c in chunks) <= size
    # A chunk ends early only at a sentence end that keeps it about half full.
    assert min(tokens(c.text) for c in chunks[:-1]) >= size * 0.45


@pytest.mark.parametrize(("size", "overlap"), [(180, 40), (120, 30), (100, 0)])
def test_chunks_start_and_end_with_whole_sentences(size: int, overlap: int) -> None:
    chunks = chunk_sections([Section(sentences(400))], chunk_tokens=size, overlap_tokens=overlap)

    assert len(chunks) > 20
    for chunk in chunks:
        assert chunk.text.startswith("Sentence")
        assert chunk.text.endswith((".", "?", "!"))


def test_neighbouring_chunks_share_the_whole_sentences_that_fit_the_overlap() -> None:
    chunks = chunk_sections([Section(sentences(400))], chunk_tokens=120, overlap_tokens=30)

    overlaps = []
    for first, second in itertools.pairwise(chunks):
        shared = " ".join(shared_words(first.text, second.text))
        assert not shared or (shared.startswith("Sentence") and shared.endswith((".", "?", "!")))
        assert tokens(shared) <= 30
        overlaps.append(tokens(shared))
    assert sum(1 for shared in overlaps if shared) > len(overlaps) / 3  # short sentences are shared


def test_a_sentence_longer_than_half_a_chunk_is_cut_between_words() -> None:
    text = "Short one. " + " ".join(f"long{i}" for i in range(300)) + "."

    chunks = chunk_sections([Section(text)], chunk_tokens=60, overlap_tokens=10)

    assert all(tokens(c.text) <= 60 for c in chunks)
    assert chunks[0].text.split()[:2] == ["Short", "one."]
    assert tokens(chunks[0].text) > 30  # not ended after "Short one.": that would leave it nearly empty
    assert chunks[-1].text.endswith("long299.")


def test_an_abbreviation_does_not_end_a_sentence() -> None:
    text = ("Lead sentence here. " + " ".join(f"w{i}" for i in range(20)) + " e.g. more words follow here. ") * 8

    chunks = chunk_sections([Section(text.strip())], chunk_tokens=40, overlap_tokens=0)

    assert all(not c.text.startswith("more") for c in chunks)
    assert all(c.text.startswith("Lead") or c.text.startswith("w") for c in chunks)


def test_without_overlap_every_word_is_in_exactly_one_chunk() -> None:
    text = prose(2000)

    chunks = chunk_sections([Section(text)], chunk_tokens=100, overlap_tokens=0)

    assert [w for c in chunks for w in c.text.split()] == text.split()


def test_chunks_start_and_end_on_word_boundaries() -> None:
    text = prose(2000)
    words = text.split()

    chunks = chunk_sections([Section(text)], chunk_tokens=90, overlap_tokens=20)

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

    chunks = chunk_sections([Section(text)], chunk_tokens=50, overlap_tokens=0)

    assert len(chunks) >= 4
    assert all(tokens(c.text) <= 50 for c in chunks)
    assert "".join("".join(c.text.split()) for c in chunks) == f"before{giant}after"


def test_chunks_never_cross_sections_and_keep_their_heading() -> None:
    sections = [
        Section(prose(400, seed=1), "Install", None),
        Section("One short paragraph.", "Usage", 2),
        Section(prose(400, seed=2), None, 3),
    ]

    chunks = chunk_sections(sections, chunk_tokens=100, overlap_tokens=20)

    assert Section("One short paragraph.", "Usage", 2) in chunks
    for chunk in chunks:
        section = next(s for s in sections if (s.heading, s.page_number) == (chunk.heading, chunk.page_number))
        assert chunk.text in section.text
    assert [c.heading for c in chunks] == sorted((c.heading for c in chunks), key=[s.heading for s in sections].index)


def test_a_short_section_is_one_chunk() -> None:
    assert chunk_sections([Section("  Hello there, world.\n")], chunk_tokens=50, overlap_tokens=10) == [
        Section("Hello there, world.")
    ]


def test_a_blank_section_has_no_chunks() -> None:
    assert chunk_sections([Section(" \n\t "), Section("word")], chunk_tokens=50, overlap_tokens=10) == [
        Section("word")
    ]


def test_text_that_looks_like_special_tokens_is_plain_text() -> None:
    chunks = chunk_sections([Section("before <|endoftext|> after")], chunk_tokens=50, overlap_tokens=10)

    assert [c.text for c in chunks] == ["before <|endoftext|> after"]


@pytest.mark.parametrize(("size", "overlap"), [(40, 40), (40, 50), (40, -1), (0, 0)])
def test_the_overlap_must_be_smaller_than_the_chunk(size: int, overlap: int) -> None:
    with pytest.raises(ValueError, match="need chunk_tokens > overlap_tokens >= 0"):
        chunk_sections([Section("text")], chunk_tokens=size, overlap_tokens=overlap)


def test_a_chunk_starting_inside_an_entry_carries_its_label() -> None:
    entry = "max_connections (integer)\n\n" + " ".join(f"Sentence {i} about connections." for i in range(60))
    text = f"{entry}\n\nshared_buffers (integer)\n\nSets the amount of memory. The default is 128MB."

    chunks = chunk_sections([Section(text)], chunk_tokens=80, overlap_tokens=10)

    assert chunks[0].text.startswith("max_connections (integer)\n\nSentence 0 ")
    assert all(tokens(c.text) <= 80 for c in chunks)
    inside = [c.text for c in chunks[1:] if "Sentence" in c.text.split("\n\n")[1]]
    assert inside and all(t.startswith("max_connections (integer)\n\n") for t in inside)
    assert chunks[-1].text.startswith("max_connections (integer)") or chunks[-1].text.startswith("shared_buffers")
    assert chunks[-1].text.endswith("The default is 128MB.")


def test_a_chunk_cut_inside_code_opens_and_closes_its_fence() -> None:
    code = "\n".join(f"SELECT {i} FROM t{i};" for i in range(80))
    text = f"Run these statements:\n\n```\n{code}\n```\n\nThen check the result."

    chunks = chunk_sections([Section(text)], chunk_tokens=60, overlap_tokens=10)

    assert len(chunks) > 3
    for chunk in chunks:
        assert tokens(chunk.text) <= 60
        assert sum(1 for line in chunk.text.splitlines() if line.startswith("```")) % 2 == 0, chunk.text
    assert all(c.text.startswith("```\n") for c in chunks[1:-1])
    assert all(c.text.endswith("\n```") for c in chunks[:-1])
