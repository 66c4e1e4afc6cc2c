"""Markdown to sections: one per ATX heading ("## Title"), never for a "#" line inside a fenced code block. A
heading line is parsed in time linear in its length, whatever it holds."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from ragsvc.ingest.limits import Deadline
from ragsvc.ingest.sections import Section

_HEADING = re.compile(r" {0,3}(#{1,6})(?=[ \t]|$)")  # an ATX heading's opening sequence
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_CHECK_EVERY = 4096  # lines between two looks at the deadline


@dataclass(frozen=True, slots=True)
class _Heading:
    level: int
    text: str | None


def markdown_sections(text: str, *, deadline: Deadline | None = None) -> list[Section]:
    """The non-empty sections of Markdown `text`."""
    sections: list[Section] = []
    heading: str | None = None
    lines: list[str] = []
    for number, (line, found) in enumerate(_lines_with_headings(text)):
        if deadline is not None and number % _CHECK_EVERY == _CHECK_EVERY - 1:
            deadline.check()
        if found is None:
            lines.append(line)
            continue
        sections.append(Section("\n".join(lines).strip(), heading))
        heading, lines = found.text, []
    sections.append(Section("\n".join(lines).strip(), heading))
    return [section for section in sections if section.text.strip()]


def markdown_title(text: str) -> str | None:
    """The text of the first level-1 heading, if any."""
    for _, found in _lines_with_headings(text):
        if found is not None and found.level == 1 and found.text:
            return found.text
    return None


def _heading(line: str) -> _Heading | None:
    """The ATX heading `line` is, if it is one: its level, and its text without a closing sequence of "#"."""
    opening = _HEADING.match(line)
    if opening is None:
        return None
    text = line[opening.end() :].strip(" \t")
    unclosed = text.rstrip("#")
    if unclosed != text and (not unclosed or unclosed[-1] in " \t"):
        text = unclosed.rstrip(" \t")
    return _Heading(len(opening.group(1)), text.strip() or None)


def _lines_with_headings(text: str) -> Iterator[tuple[str, _Heading | None]]:
    """Each line, with the heading it is (never for lines inside fenced code blocks)."""
    fence: str | None = None
    for line in text.splitlines():
        marker = _FENCE.match(line)
        if fence is None and marker:
            fence = marker.group(1)
        elif fence is not None and marker and marker.group(1)[0] == fence[0] and len(marker.group(1)) >= len(fence):
            fence = None
        elif fence is None:
            yield line, _heading(line)
            continue
        yield line, None
