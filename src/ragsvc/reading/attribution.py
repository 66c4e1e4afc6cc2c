"""Which packed chunk a sentence written without a citation marker comes from, when one clearly does.

A small model often restates its evidence without citing it (docs/local-llm.md). Such a sentence is attributed to
the chunk holding the largest share of its key phrases (`support.strongest_support`) only when all of these hold:

- it carries no citation marker of either style (a sentence with one is left as the model wrote it);
- it states something: it is not a question, not instructions (addressed to the reader: "you", "please"; opening
  with a verb in the imperative; introducing what follows with a closing ":"), not code, and does not say that the
  evidence is insufficient (`support.says_insufficient`);
- it has at least MIN_TERMS key-phrase terms: a few words prove nothing;
- one chunk holds at least SUPPORT_BAR of those terms, each phrase found with its terms in a row, and at least
  SUPPORT_BAR of the sentence's runs of three neighbouring content terms in a row. So a paraphrase, a sentence joining two
  chunks' facts or one chunk's phrases in another order, or one adding words of its own falls short and stays
  uncited.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragsvc.domain import ScoredChunk
from ragsvc.reading.support import ChunkSupport, says_insufficient, strongest_support
from ragsvc.reading.text import key_phrases

SUPPORT_BAR = 0.8
MIN_TERMS = 3

_ANY_MARKER = re.compile(r"\[#\d{1,3}\]|\[SourceId:[^\]\n]{0,160}\]")
_ADDRESSED = re.compile(r"\b(?:you|your|yours|yourself|please)\b", re.IGNORECASE)
# The verbs an instruction opens with ("Use only the passages.", "- Cite every claim.", "Run make llm.").
_IMPERATIVE = re.compile(
    r"^[\s\-*\d.)>#]*(?:add|always|answer|avoid|base|call|check|cite|consult|contact|do|don't|ensure|follow|ignore"
    r"|include|install|let's|make|never|note|read|refer|remember|reply|respond|run|see|set|start|try|use|write)\b",
    re.IGNORECASE,
)
_CLOSING = "\"')]*_ \t"


def attributable(sentence: str) -> bool:
    """Whether `sentence` may be attributed at all: no marker, and a statement (see the module docstring)."""
    if _ANY_MARKER.search(sentence) or "```" in sentence or says_insufficient(sentence):
        return False
    end = sentence.rstrip(_CLOSING)
    if end.endswith(("?", ":")):
        return False
    return not (_ADDRESSED.search(sentence) or _IMPERATIVE.match(sentence))


def attribution(sentence: str, evidence: Sequence[ScoredChunk]) -> ChunkSupport | None:
    """The chunk of `evidence` that clearly supports `sentence`, with how strongly; None when none does or the
    sentence may not be attributed (see the module docstring)."""
    if not attributable(sentence) or sum(len(phrase) for phrase in key_phrases(sentence)) < MIN_TERMS:
        return None
    support = strongest_support(sentence, evidence)
    return support if support is not None and support.share >= SUPPORT_BAR else None


__all__ = ["MIN_TERMS", "SUPPORT_BAR", "attributable", "attribution"]
