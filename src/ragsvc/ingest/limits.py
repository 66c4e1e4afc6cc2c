"""The bounds reading one document stays within, each a setting (IngestSettings) that the error past it names.

Time is checked between steps (pages, sections, HTML nodes, chunks): a step that has started runs to its end. The
other limits bound what one step can cost before it starts: an HTML page nesting its elements deeper than a
browser would render, or an element with more attributes than any page needs, is refused before it is parsed (an
HTML5 parser takes time quadratic in both: lexbor takes 90 s on 200,000 nested elements), a line
longer than any paragraph before the text is split, a PDF stream that decompresses to more than the limit (and a
.docx part likewise) while it is read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ragsvc.errors import DocumentLimitExceeded, FieldViolation

# The settings (environment variables) of the limits, as the errors name them.
PARSE_SECONDS = "RAG_INGEST_PARSE_SECONDS"
MAX_HTML_DEPTH = "RAG_INGEST_MAX_HTML_DEPTH"
MAX_HTML_ATTRIBUTES = "RAG_INGEST_MAX_HTML_ATTRIBUTES"
MAX_LINE_CHARS = "RAG_INGEST_MAX_LINE_CHARS"
MAX_DECOMPRESSED_BYTES = "RAG_INGEST_MAX_DECOMPRESSED_BYTES"
MAX_CHUNKS = "RAG_INGEST_MAX_CHUNKS"
MAX_CALL_CHUNKS = "RAG_INGEST_MAX_CALL_CHUNKS"
# What to do with a document too large to ingest within one call.
CALL_ADVICE = "ingest it as a long-running operation with IndexService.SubmitIngest, which reports its progress"


@dataclass(frozen=True, slots=True)
class DocumentLimits:
    """What reading one document may take (see the module's docstring); the defaults are the settings'."""

    parse_seconds: float = 120.0
    html_depth: int = 1000
    html_attributes: int = 1000
    line_chars: int = 100_000
    decompressed_bytes: int = 32 * 1024 * 1024
    chunks: int = 50_000


@dataclass(frozen=True, slots=True)
class ChunkLimit:
    """The most chunks one document may make on one way in, the setting that says so, and what to do past it."""

    maximum: int
    setting: str = MAX_CHUNKS
    advice: str = ""


def exceeded(limit: str, maximum: float, found: str, *, advice: str = "") -> DocumentLimitExceeded:
    """The error of a document past `limit` (a setting) of value `maximum`: "content <found>; the limit is
    <limit>=<maximum>[; <advice>]", e.g. "content nests HTML elements more than 1,000 deep; the limit is
    RAG_INGEST_MAX_HTML_DEPTH=1000"."""
    shown = f"{maximum:g}" if isinstance(maximum, float) else str(maximum)
    description = f"{found}; the limit is {limit}={shown}" + (f"; {advice}" if advice else "")
    error = DocumentLimitExceeded([FieldViolation("content", description)], f"content {description}")
    error.metadata = {"limit": limit, "maximum": shown}
    return error


class Deadline:
    """The parse time of one document, from its creation: `check` raises once `seconds` have passed."""

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._ends = time.monotonic() + seconds

    def check(self) -> None:
        """Raises DocumentLimitExceeded (naming RAG_INGEST_PARSE_SECONDS) past the deadline."""
        if time.monotonic() > self._ends:
            raise exceeded(PARSE_SECONDS, self._seconds, f"takes more than {self._seconds:g} s to read")


def check_lines(text: str, limit: int) -> None:
    """Raises DocumentLimitExceeded when a line of `text` is longer than `limit` characters."""
    if len(text) <= limit:
        return
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        if end - start > limit:
            line = text.count("\n", 0, start) + 1
            raise exceeded(MAX_LINE_CHARS, limit, f"has a line of {end - start:,} characters (line {line})")
        start = end + 1
