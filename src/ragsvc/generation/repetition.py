"""The repetition guard: a model that loops (the same sentence, or the same few words, over and over until its
token limit) is stopped as soon as its text ends in MIN_COPIES copies of the same passage.

A passage is 1 to MAX_UNIT_CHARS characters (whitespace runs count as one space); the copies must add up to at least
MIN_LOOP_CHARS, so that short legitimate repeats ("no, no, no", a table rule) never trip it. The check looks at
the tail of the text only, each time a delta arrives, so a long answer costs no more than a short one.
"""

from __future__ import annotations

import re

from ragsvc.reading.sentences import sentences

MIN_COPIES = 3
MIN_LOOP_CHARS = 64
MAX_UNIT_CHARS = 200
_TAIL_CHARS = MAX_UNIT_CHARS * MIN_COPIES
# A text ending in copies of a passage ends in these many characters that also stand one passage earlier (every
# loop is longer than a passage plus this: MIN_LOOP_CHARS and MIN_COPIES see to it).
_PROBE_CHARS = 8
_WHITESPACE = re.compile(r"\s+")


class RepetitionGuard:
    """Watches one generation's text as it arrives; `feed` says when it has started looping."""

    def __init__(self) -> None:
        self._tail = ""
        self.tripped = False

    def feed(self, delta: str) -> bool:
        """Add `delta`; True once the text ends in a loop (and from then on)."""
        if not self.tripped:
            piece = _WHITESPACE.sub(" ", delta)
            if piece[:1] == " " and self._tail[-1:] == " ":  # the tail's whitespace is already one space a run
                piece = piece[1:]
            self._tail = (self._tail + piece)[-_TAIL_CHARS:]
            self.tripped = looping(self._tail)
        return self.tripped


def looping(text: str) -> bool:
    """Whether `text` ends in MIN_COPIES or more copies of one passage adding up to MIN_LOOP_CHARS or more."""
    size = len(text)
    if size < MIN_LOOP_CHARS:
        return False
    # A passage of `unit` characters repeats only where the text's last _PROBE_CHARS characters recur `unit`
    # characters earlier: in prose, seldom within MAX_UNIT_CHARS.
    probe = text[-_PROBE_CHARS:]
    start = size - _PROBE_CHARS
    lowest = max(0, start - MAX_UNIT_CHARS)
    while (start := text.rfind(probe, lowest, start + _PROBE_CHARS - 1)) >= 0:
        unit = size - _PROBE_CHARS - start
        span = unit * max(MIN_COPIES, -(-MIN_LOOP_CHARS // unit))
        if span <= size and text[-span:] == text[-unit:] * (span // unit):
            return True
    return False


def without_repeats(text: str) -> str:
    """The text of a generation the guard stopped: each sentence once (the first time), and the unfinished
    sentence it was cut in dropped."""
    seen: set[str] = set()
    kept: list[str] = []
    for sentence in sentences(text):
        key = _WHITESPACE.sub(" ", sentence).strip().lower()
        if key in seen or not sentence.rstrip().endswith((".", "!", "?", "]")):
            continue
        seen.add(key)
        kept.append(sentence)
    return " ".join(kept)
