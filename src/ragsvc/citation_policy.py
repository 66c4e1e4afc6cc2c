"""The citation policy: what becomes of an answer whose markers name no packed chunk (an invalid citation).

- STRICT (R-002-10: an unknown marker refuses the answer; R-003-18's re-runs): the answer is regenerated with the
  strict prompt (RAG_MAX_RETRIES_ON_HALLUCINATION times); when no run cites only valid markers it is refused
  (INVALID_CITATIONS) with the invalid markers stripped from its draft.
- DROP_INVALID (R-000-16: unknown source ids are logged as warnings and left out of the citations): each sentence
  backed only by invalid markers is dropped, and an invalid marker beside a valid one is removed from its
  sentence; every removal is logged as a warning naming the marker (never the answer's words). When a valid cited
  claim remains, the answer stands, grounded and flagged (`Flags.citations_dropped`); only when none remains is it
  regenerated as under STRICT.

Attribution (RAG_CITATION_ATTRIBUTION, on both paths like the policy): a sentence the model wrote without any marker
gets the marker of the packed chunk that clearly supports it (ragsvc.reading.attribution: most of its key phrases
in one chunk; never a question, instructions, code or a sentence saying the evidence is insufficient), so that an
answer that restates its evidence without citing it is judged by what it says. A sentence that no chunk clearly
supports stays uncited and counts as before: a claim without a citation.

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
from ragsvc.reading.attribution import attribution
from ragsvc.reading.sentences import MARKER, sentences, spans
from ragsvc.validation import SOURCE_ID_MARKER

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
        self.context = tuple(context)
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

    def marker(self, number: int) -> str:
        """The marker of the `number`-th packed chunk in this style."""
        if self._style is CitationStyle.SOURCE_ID:
            return f"[SourceId: {self.context[number - 1].chunk.source_id}]"
        return f"[#{number}]"


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


# Where code, or a copy of the prompt's passages (data between <<< and >>>), starts or ends.
_FENCE = re.compile(r"```|<<<|>>>")
# The closing punctuation of a sentence, before which an attributed marker goes ("Claim [#1].").
_SENTENCE_END = re.compile(r"[.!?]+[\"')\]]*$")


class Attributor:
    """Gives each unmarked sentence of an answer, read piece by piece as it arrives (the validated stream) or whole
    (validation), the marker of the packed chunk that clearly supports it (see the module docstring); lines
    of code and of a copy of the prompt's passages (between ``` fences, or <<< and >>>) are left alone.
    `attributed` counts the sentences given a marker."""

    def __init__(self, markers: Markers) -> None:
        self._markers = markers
        self._in_code = False
        self.attributed = 0

    def text(self, piece: str) -> str:
        """`piece` (the next part of the answer) with its supported unmarked sentences marked."""
        parts: list[str] = []
        position = 0
        for line_start, line in _lines(piece):
            fenced = self._in_code or _FENCE.search(line) is not None
            self._in_code ^= len(_FENCE.findall(line)) % 2 == 1
            if fenced:
                continue
            for start, end in spans(line):
                sentence = line[start:end]
                support = attribution(sentence, self._markers.context)
                if support is None:
                    continue
                closing = _SENTENCE_END.search(sentence)
                cut = line_start + start + (closing.start() if closing else len(sentence))
                parts += [piece[position:cut].rstrip(" \t"), " ", self._markers.marker(support.marker)]
                position = cut
                self.attributed += 1
        parts.append(piece[position:])
        return "".join(parts)


def _lines(text: str) -> list[tuple[int, str]]:
    """The lines of `text`, each with its offset."""
    found: list[tuple[int, str]] = []
    offset = 0
    for line in text.split("\n"):
        found.append((offset, line))
        offset += len(line) + 1
    return found


def attribute(text: str, markers: Markers) -> tuple[str, int]:
    """`text` with each supported unmarked sentence given its chunk's marker, and how many were."""
    attributor = Attributor(markers)
    return attributor.text(text), attributor.attributed


__all__ = ["Attributor", "Dropped", "Markers", "attribute", "drop_invalid", "kept_sentence", "resolve"]
