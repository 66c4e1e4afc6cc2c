"""The citation policy: what becomes of an answer whose markers name no packed chunk (an invalid citation).

- STRICT (seed 002: an unknown marker refuses the answer; seed 003's re-runs): the answer is regenerated with the
  strict prompt (RAG_MAX_RETRIES_ON_HALLUCINATION times); when no run cites only valid markers it is refused
  (INVALID_CITATIONS) with the invalid markers stripped from its draft.
- DROP_INVALID (seed 000: unknown source ids are logged as warnings and left out of the citations): each sentence
  backed only by invalid markers is dropped, and an invalid marker beside a valid one is removed from its
  sentence; every removal is logged as a warning naming the marker (never the answer's words). When a valid cited
  claim remains, the answer stands, grounded and flagged (`Flags.citations_dropped`); only when none remains is it
  regenerated as under STRICT.

The policy is chosen per request (`GenerationOptions.citation_policy`), else per template, else by
RAG_CITATION_POLICY, whose default, DROP_INVALID, was chosen by measuring both with the local LLM (docs/llm.md).
The validated stream applies it sentence by sentence as the draft arrives (`kept_sentence`), so that what a client
is shown is what the final answer keeps.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ragsvc.domain import CitationPolicy, CitationStyle, ScoredChunk
from ragsvc.validation import MARKER, SOURCE_ID_MARKER, sentences

_log = logging.getLogger(__name__)
# What a sentence's text is split on in place of a marker of either style: the same length, read like a marker.
_MASK = "[#1]"


@dataclass(frozen=True, slots=True)
class Dropped:
    """An answer after DROP_INVALID: its text, and the invalid markers removed (with or without their sentence)."""

    text: str
    removed: tuple[str, ...]


def resolve(requested: CitationPolicy | None, template: CitationPolicy | None, default: CitationPolicy) -> CitationPolicy:
    """The policy of one request: its own, else its template's, else the server's."""
    return requested or template or default


class Markers:
    """The citation markers of one style in answers over `context`, each with its marker number (0: invalid)."""

    def __init__(self, context: Sequence[ScoredChunk], style: CitationStyle) -> None:
        self._count = len(context)
        self._style = style
        self._numbers: dict[str, int] = {}
        for number, scored in enumerate(context, start=1):
            self._numbers.setdefault(scored.chunk.source_id, number)
        self.pattern = MARKER if style is CitationStyle.MARKER else SOURCE_ID_MARKER

    def valid(self, match: re.Match[str]) -> bool:
        if self._style is CitationStyle.MARKER:
            return 1 <= int(match.group(1)) <= self._count
        return match.group(1) in self._numbers


def kept_sentence(sentence: str, markers: Markers) -> str | None:
    """`sentence` under DROP_INVALID: None when it cites only invalid markers, else without its invalid markers."""
    found = list(markers.pattern.finditer(sentence))
    invalid = [match for match in found if not markers.valid(match)]
    if not invalid:
        return sentence
    if len(invalid) == len(found):
        return None
    kept = markers.pattern.sub(lambda m: m.group(0) if markers.valid(m) else "", sentence)
    return re.sub(r"[ \t]+([.,;:!?])", r"\1", re.sub(r"[ \t]{2,}", " ", kept))


def drop_invalid(text: str, markers: Markers, request_id: str = "") -> Dropped:
    """`text` under DROP_INVALID (see the module docstring): its lines, each split into sentences as validation
    splits them (a list item ends at its line break, as the validated stream ends it); each removal logged as a
    warning naming the marker."""
    masked = markers.pattern.sub(lambda match: _MASK.ljust(len(match.group(0))), text)
    parts: list[str] = []
    removed: list[str] = []
    position = 0
    for sentence in (part for line in masked.split("\n") for part in sentences(line)):
        start = masked.find(sentence, position)
        end = start + len(sentence)
        original = text[start:end]
        kept = kept_sentence(original, markers)
        if kept is not original:
            invalid = [match.group(0) for match in markers.pattern.finditer(original) if not markers.valid(match)]
            removed += invalid
            message = (
                "citation policy drop_invalid: removed a sentence citing only unknown sources %s (request %s)"
                if kept is None
                else "citation policy drop_invalid: removed unknown sources %s beside a valid one (request %s)"
            )
            _log.warning(message, ", ".join(invalid), request_id or "-")
        if kept is not None:  # a dropped sentence takes the space before it along
            parts += [text[position:start], kept]
        position = end
    parts.append(text[position:])
    return Dropped("".join(parts).strip(), tuple(removed))


__all__ = ["Dropped", "Markers", "drop_invalid", "kept_sentence", "resolve"]
