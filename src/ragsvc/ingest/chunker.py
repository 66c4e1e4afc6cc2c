"""Split sections into overlapping chunks of at most N tokens (cl100k_base), cut between words."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import tiktoken

from ragsvc.encodings import get_encoding
from ragsvc.ingest.loaders import Section

_WORD = re.compile(r"\S+")


@dataclass(frozen=True, slots=True)
class _Unit:
    """A word at text[start:end] and the tokens it adds to a chunk (its leading whitespace included)."""

    start: int
    end: int
    tokens: int


def chunk_sections(sections: Sequence[Section], *, chunk_tokens: int, overlap_tokens: int) -> list[Section]:
    """Chunks of at most `chunk_tokens` tokens, each a smaller Section keeping its section's heading and page;
    neighbours within a section share about `overlap_tokens` tokens.

    A chunk starts and ends on word boundaries, except that a word longer than a chunk is cut; chunks never span
    two sections."""
    if not chunk_tokens > overlap_tokens >= 0:
        raise ValueError(f"need chunk_tokens > overlap_tokens >= 0, got {chunk_tokens} and {overlap_tokens}")
    encoding = get_encoding("cl100k_base")
    return [
        Section(text, section.heading, section.page_number)
        for section in sections
        for text in _chunk_text(encoding, section.text, chunk_tokens, overlap_tokens)
    ]


def _chunk_text(encoding: tiktoken.Encoding, text: str, limit: int, overlap: int) -> list[str]:
    units = _units(encoding, text, limit)
    chunks: list[str] = []
    first = 0
    while first < len(units):
        end = first
        total = 0
        while end < len(units) and total + units[end].tokens <= limit:
            total += units[end].tokens
            end += 1
        end = max(end, first + 1)  # only a single character of more than `limit` tokens fits nowhere
        # Unit counts add up to the chunk's count almost always; trim in the rare case they undercount.
        while end > first + 1 and _count(encoding, text[units[first].start : units[end - 1].end]) > limit:
            end -= 1
        chunks.append(text[units[first].start : units[end - 1].end])
        if end == len(units):
            break
        following = end
        shared = 0
        while following - 1 > first and shared + units[following - 1].tokens <= overlap:
            following -= 1
            shared += units[following].tokens
        first = following
    return chunks


def _units(encoding: tiktoken.Encoding, text: str, limit: int) -> list[_Unit]:
    """The words of `text`, words of more than `limit` tokens cut into pieces that fit."""
    words = [(m.start(), m.end()) for m in _WORD.finditer(text)]
    if not words:
        return []
    leads = [0, *(end for _, end in words[:-1])]  # each word is counted with the whitespace before it
    pieces = [text[lead:end] for lead, (_, end) in zip(leads, words, strict=True)]
    counts = [len(tokens) for tokens in encoding.encode_ordinary_batch(pieces)]
    units: list[_Unit] = []
    for (start, end), tokens in zip(words, counts, strict=True):
        if tokens <= limit:
            units.append(_Unit(start, end, tokens))
        else:
            units.extend(_split_word(encoding, text, start, end, limit))
    return units


def _split_word(encoding: tiktoken.Encoding, text: str, start: int, end: int, limit: int) -> list[_Unit]:
    """Halves text[start:end] until each piece has at most `limit` tokens."""
    tokens = _count(encoding, text[start:end])
    if tokens <= limit or end - start == 1:
        return [_Unit(start, end, tokens)]
    middle = (start + end) // 2
    return _split_word(encoding, text, start, middle, limit) + _split_word(encoding, text, middle, end, limit)


def _count(encoding: tiktoken.Encoding, text: str) -> int:
    return len(encoding.encode_ordinary(text))
