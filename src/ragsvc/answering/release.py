"""The stream policy: what of a draft reaches an AskStream client before the final answer. It sits between the
generate stage and the transport.

- RAW relays every token and each citation as its marker completes: the client renders a draft it must replace
  with the final answer when that differs.
- VALIDATED releases the draft a sentence at a time, once the sentence is complete (something other than a marker
  follows it, or the draft ended) and each of its markers names a packed chunk. A sentence without a marker, or
  one that only says the evidence is insufficient, is held until a valid cited claim follows (validation.is_claim)
  and is never released under STRICT strictness. After a sentence that fails, nothing more is released; under the
  DROP_INVALID citation policy a sentence backed only by invalid markers is skipped instead, and one that also
  cites a valid marker goes out without its invalid ones, as the final answer keeps them (citation_policy.py). With
  attribution on (RAG_CITATION_ATTRIBUTION), a sentence without a marker first gets the marker of the packed chunk
  that clearly supports it, as validation gives it (citation_policy.Attributor). So a draft
  that ends refused has shown nothing beyond its validated sentences, and one without a valid cited claim has shown
  nothing at all. Citations go out with the first released sentence that cites them. (A looping draft, stopped by
  the repetition guard, may have shown a repeat that its final text leaves out: the final answer replaces it.)

The cost is latency: the first text arrives when the first cited sentence is complete, not with the first token
(bench/generation.py measures both).
"""

from __future__ import annotations

import re
from typing import Protocol

from ragsvc.answering.generate import Drafting
from ragsvc.citation_policy import Attributor, Markers, kept_sentence
from ragsvc.domain import (
    Citation,
    CitationPolicy,
    CitationStyle,
    Event,
    ScoredChunk,
    StreamPolicy,
    Strictness,
    TextDelta,
)
from ragsvc.reading.sentences import MARKER
from ragsvc.validation import citation_for, is_claim, normalize_source_ids

# Where a sentence may end: closing punctuation before a space or a marker, or a line break.
_END = re.compile(r"[.!?]+(?=\s|\[)|\n")
# The markers after a sentence's closing punctuation, which belong to it ("Claim. [#1]").
_TRAILING_MARKERS = re.compile(r"(?:\s*(?:\[#\d{1,3}\]|\[SourceId:\s{0,2}[A-Za-z0-9._-]{1,128}:\d{1,6}\]))*")
_LONGEST_MARKER = len("[SourceId:") + 2 + 128 + len(":999999]")


class Release(Protocol):
    def feed(self, item: Drafting | TextDelta | Citation) -> list[Event]:
        """The events to send for `item`, a piece of the generate stage's stream."""
        ...

    def finish(self, *, complete: bool) -> list[Event]:
        """The events to send when the draft ended; `complete` is False when it was cut (a loop stopped)."""
        ...


def release_for(
    policy: StreamPolicy,
    style: CitationStyle,
    strictness: Strictness,
    citations: CitationPolicy = CitationPolicy.STRICT,
    *,
    attribute: bool = False,
) -> Release:
    if policy is StreamPolicy.RAW:
        return RawRelease()
    return ValidatedRelease(
        style,
        strict=strictness is Strictness.STRICT,
        drop_invalid=citations is CitationPolicy.DROP_INVALID,
        attribute=attribute,
    )


class RawRelease:
    def feed(self, item: Drafting | TextDelta | Citation) -> list[Event]:
        return [] if isinstance(item, Drafting) else [item]

    def finish(self, *, complete: bool) -> list[Event]:
        return []


class ValidatedRelease:
    def __init__(self, style: CitationStyle, *, strict: bool, drop_invalid: bool = False, attribute: bool = False) -> None:
        self._style = style
        self._strict = strict
        self._drop_invalid = drop_invalid
        self._attribute = attribute
        self._start(())

    def _start(self, context: tuple[ScoredChunk, ...]) -> None:
        self._context = context
        self._markers = Markers(context, self._style)
        self._attributor = Attributor(self._markers) if self._attribute else None
        self._valid = set(range(1, len(context) + 1))
        self._pending = ""  # text not yet split into complete sentences
        self._held: list[str] = []  # complete sentences waiting for a valid cited claim
        self._claimed = False
        self._blocked = False  # a sentence failed: nothing more is released
        self._cited: set[int] = set()

    def feed(self, item: Drafting | TextDelta | Citation) -> list[Event]:
        if isinstance(item, Drafting):  # an attempt starts (another model's, after a failure): nothing was shown
            self._start(item.context)
            return []
        if isinstance(item, Citation):  # sent with the sentence that cites it, once that is released
            return []
        self._pending += item.text
        return self._release(self._complete_sentences())

    def finish(self, *, complete: bool) -> list[Event]:
        last, self._pending = self._pending.rstrip(), ""  # the final answer's text ends with no whitespace either
        return self._release([last] if complete and last else [])

    def _complete_sentences(self) -> list[str]:
        """Takes the complete sentences off the pending text, each with the whitespace before it."""
        complete: list[str] = []
        position = 0
        while (end := _END.search(self._pending, position)) is not None:
            markers = _TRAILING_MARKERS.match(self._pending, end.end())
            stop = markers.end() if markers is not None else end.end()
            rest = self._pending[stop:].lstrip()
            if not rest or (rest.startswith("[") and "]" not in rest and len(rest) < _LONGEST_MARKER):
                break  # a marker of this sentence may still come
            if not self._pending[:stop].strip():  # a line break alone: it goes with the next sentence
                position = stop
                continue
            complete.append(self._pending[:stop])
            self._pending = self._pending[stop:]
            position = 0
        return complete

    def _release(self, complete: list[str]) -> list[Event]:
        released: list[str] = []
        for whole in complete:
            if self._blocked:
                break
            if self._attributor is not None:
                whole = self._attributor.text(whole)
            sentence = kept_sentence(whole, self._markers) if self._drop_invalid else whole
            if sentence is None:
                continue  # dropped: the final answer leaves it out too
            judged = self._as_markers(sentence)
            numbers = {int(n) for n in MARKER.findall(judged)}
            if not numbers <= self._valid or (self._strict and not numbers and re.search(r"\w", sentence)):
                self._blocked = True
                break
            self._held.append(sentence)
            self._claimed = self._claimed or is_claim(judged, self._valid)
            if self._claimed:
                released += self._held
                self._held = []
        return self._events(released)

    def _events(self, sentences: list[str]) -> list[Event]:
        text = ""
        citations: list[Event] = []
        for sentence in sentences:
            text += sentence
            for number in (int(n) for n in MARKER.findall(self._as_markers(sentence))):
                if number not in self._cited and (citation := citation_for(number, self._context)) is not None:
                    self._cited.add(number)
                    citations.append(citation)
        return [TextDelta(text), *citations] if text else []

    def _as_markers(self, sentence: str) -> str:
        """`sentence` with its citations as [#n] markers, whatever the citation style."""
        if self._style is CitationStyle.SOURCE_ID:
            return normalize_source_ids(sentence, self._context)
        return sentence
