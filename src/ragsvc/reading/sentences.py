"""The one sentence splitter: chunk passages, answers (with their citation markers), questions and selections are
all cut into sentences here.

A sentence ends at closing punctuation (with any closing quotes or brackets) followed by whitespace, unless the
dot is an abbreviation's ("e.g.", "etc.", a single letter) or the next word starts in lower case; a dot inside a
word ("9.2", "pg_hba.conf") never ends one. Citation markers right after the end ("Claim. [#1] Next.") belong to
the sentence they follow. Text after the last end is the last sentence, unfinished.
"""

from __future__ import annotations

import re

_BOUNDARY = re.compile(r"[.!?]+[\"')\]]*\s+")
_ABBREVIATIONS = frozenset("al approx cf dept dr e.g eg etc fig i.e ie inc jr ltd mr mrs ms no nos prof sr st vol vs".split())
# A citation marker, its number the group. Strict on purpose: "[1]", "[ #1 ]", "[#1a]" and "vec![1]" are not markers.
MARKER = re.compile(r"\[#(\d{1,3})\]")
_TRAILING_MARKERS = re.compile(r"(?:(?:\[#\d{1,3}\]|\[SourceId:[^\]\n]{1,160}\])[ \t]*)+\s*")


def spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """The sentences of text[start:end] as (start, end) offsets into `text`, surrounding whitespace excluded."""
    stop = len(text) if end is None else end
    found: list[tuple[int, int]] = []
    begin = start
    for boundary in _BOUNDARY.finditer(text, start, stop):
        before = text[begin : boundary.start()].split()
        last_word = before[-1].lstrip("\"'([").lower() if before else ""
        abbreviated = boundary.group().startswith(".") and (
            last_word in _ABBREVIATIONS or (len(last_word) == 1 and last_word.isalpha())
        )
        if abbreviated or text[boundary.end() : boundary.end() + 1].islower():
            continue
        close = boundary.end()
        markers = _TRAILING_MARKERS.match(text, close, stop)
        if markers is not None:
            close = markers.end()
        _add(found, text, begin, close)
        begin = close
    _add(found, text, begin, stop)
    return found


def sentences(text: str) -> list[str]:
    """The sentences of `text` (see the module's docstring), each stripped of surrounding whitespace."""
    return [text[s:e] for s, e in spans(text)]


def _add(found: list[tuple[int, int]], text: str, start: int, end: int) -> None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if start < end:
        found.append((start, end))


def without_markers(text: str) -> str:
    """`text` without its [#n] citation markers, each replaced by a space."""
    return MARKER.sub(" ", text)
