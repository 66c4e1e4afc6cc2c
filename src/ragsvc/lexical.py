"""Cheap lexical analysis shared by the extractive generator and answer validation: content terms of a text."""

from __future__ import annotations

import re

_WORD = re.compile(r"[a-z0-9][a-z0-9_\-']*")

STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having he
    her here hers herself him himself his how i if in into is it its itself just me more most my myself no nor
    not now of off on once only or other our ours ourselves out over own same she should so some such than that
    the their theirs them themselves then there these they this those through to too under until up very was we
    were what when where which while who whom why will with would you your yours yourself yourselves tell show
    explain describe please does do""".split()
)


def stem(word: str) -> str:
    """A light suffix stripper: enough to match "indexes"/"indexing"/"indexed" with "index"."""
    for suffix in ("ingly", "edly", "ing", "ies", "ied", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            stemmed = word[: -len(suffix)]
            return stemmed + "y" if suffix in ("ies", "ied") else stemmed
    return word


def content_terms(text: str) -> list[str]:
    """The stemmed words of `text` that carry meaning (stopwords and one-letter words removed), in order."""
    words = (word.strip("'-") for word in _WORD.findall(text.lower()))
    return [stem(word) for word in words if len(word) > 1 and word not in STOPWORDS]
