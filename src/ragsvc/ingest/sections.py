"""What reading a document gives: its sections of text, and the encoding its text was in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

# Kinds of block that follow one another on the next line (a list's items, a table's rows); others are a blank
# line apart, as Markdown writes them.
LINE_KINDS = frozenset({"item", "row"})


@dataclass(frozen=True, slots=True)
class Section:
    """A run of text under one heading (None before the first heading, and for plain text)."""

    text: str
    heading: str | None = None
    page_number: int | None = None


@dataclass(frozen=True, slots=True)
class Loaded:
    """A document read: its non-empty sections in order, and the IANA name of the encoding its text was read in
    (empty for the binary formats, PDF and .docx)."""

    sections: list[Section] = field(default_factory=list)
    encoding: str = ""


def joined(blocks: Sequence[tuple[str, str]]) -> str:
    """The (kind, text) blocks of a section as its text: consecutive items, or rows, one line apart; any other
    blocks a blank line apart."""
    text = ""
    for i, (kind, block) in enumerate(blocks):
        if i:
            text += "\n" if kind == blocks[i - 1][0] and kind in LINE_KINDS else "\n\n"
        text += block
    return text
