"""What a passage's text shows whatever the question, as the trained reader's sentence features read it
(`features.SENTENCE_FEATURES`): read once with the passage (`chunks.read_chunk`), so stored with its chunk."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["DEFAULT", "Traits", "traits"]

DEFAULT = re.compile(r"\bdefaults?\b", re.IGNORECASE)  # a default, stated or asked for
_NEGATION_OR_MODAL = re.compile(r"\b(?:not|no|never|cannot|can't|must|may|only|always)\b", re.IGNORECASE)
_CODE_OR_KEYWORD = re.compile(r"`|\b[A-Z]{3,}(?:\s+[A-Z]{2,})*\b|\(\)")
_POINTER = re.compile(r"\b(?:see|refer to|described in|discussed in|explained in|documented in)\b", re.IGNORECASE)
_NUMBER = re.compile(r"\d")


@dataclass(frozen=True, slots=True)
class Traits:
    words: int  # its words, split at white space
    number: bool  # it holds a digit
    default: bool  # it says "default"
    negation_or_modal: bool  # it says "not", "never", "must", "only" ...
    pointer: bool  # it refers elsewhere ("see ...")
    code: bool  # it names something to use: code, a function's "()", an option or a compound name, a keyword in capitals

    @property
    def flags(self) -> int:
        """The five flags as the bits of one number, `number` the lowest (what a packed reading stores)."""
        bits = (self.number, self.default, self.negation_or_modal, self.pointer, self.code)
        return sum(1 << i for i, bit in enumerate(bits) if bit)

    @classmethod
    def of_flags(cls, words: int, flags: int) -> Traits:
        """The traits whose `flags` are `flags`."""
        return cls(words, *(bool(flags >> i & 1) for i in range(5)))


def traits(text: str, terms: Iterable[str]) -> Traits:
    """The traits of a passage's `text`, its terms (`relevance.passage_terms`) being `terms`."""
    named = any(("_" in t or "." in t or t.startswith("-")) and any(c.isalpha() for c in t) for t in terms)
    return Traits(
        words=len(text.split()),
        number=_NUMBER.search(text) is not None,
        default=DEFAULT.search(text) is not None,
        negation_or_modal=_NEGATION_OR_MODAL.search(text) is not None,
        pointer=_POINTER.search(text) is not None,
        code=named or _CODE_OR_KEYWORD.search(text) is not None,
    )
