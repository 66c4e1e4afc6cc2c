"""How common a word is in everyday English (the rule reader's term weight), from wordfreq's word lists (Zipf
scale: log10 of a word's frequency per billion words; "the" is 7.7, "watch" 5.3, "vacuum" 4.1, "pg_basebackup" 0).

A question's words that everyone uses ("How far has a running VACUUM got?") are how it is asked, not what it is
about, however rare the documents make them; its subject is in the words that are rare in English ("VACUUM",
"pg_basebackup", "Kerberos")."""

from __future__ import annotations

import functools

from wordfreq import zipf_frequency

from ragsvc.reading.features import LEAST, term_weight
from ragsvc.reading.text import QuestionTerm

COMMON = 6.0  # from this Zipf frequency (one word in a thousand: "time", "take", "many") a word tells least
RARE = 3.0  # up to this one (one in a million: "md5", "incremental") a word is distinctive


@functools.lru_cache(maxsize=1 << 14)
def distinctiveness(word: str) -> float:
    """How much `word` can say what a question is about (LEAST-1): LEAST for the commonest English words, 1 for
    rare ones and for words English does not use, linear in the Zipf frequency between."""
    frequency = zipf_frequency(word, "en")
    return min(1.0, max(LEAST, (COMMON - frequency) / (COMMON - RARE)))


def weight(term: QuestionTerm) -> float:
    """How much a question's term can say what the question is about, as the rule reader weighs it (`analyse`'s
    `weigh`): a verb asking how LEAST (`features.term_weight`), a name fully, another word by its distinctiveness."""
    return min(term_weight(term), 1.0 if term.named else distinctiveness(term.surface.lower()))


def load() -> None:
    """Read the English word list now (about 0.15 s), so that the first question does not wait for it."""
    distinctiveness("postgres")
