"""What reading a document gives: its sections of text, and the encoding its text was in."""

from __future__ import annotations

from dataclasses import dataclass, field


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
