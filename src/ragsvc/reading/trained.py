"""The trained reader: a sentence model ranks the evidence's candidate sentences, and an answer model gives the
probability that the answer they compose is right (see bench/reader for how both are trained)."""

from __future__ import annotations

from collections.abc import Sequence

from ragsvc.reading.relevance import Candidate

MAX_QUOTES = 3  # sentences an extractive answer quotes
_DUPLICATE_OVERLAP = 0.8  # share of the smaller passage's terms that makes two passages the same


def choose(found: Sequence[Candidate], scores: Sequence[float], *, max_quotes: int = MAX_QUOTES) -> list[int]:
    """The candidates to quote (indices into `found`), best score first, near-duplicates (overlapping chunks repeat
    text) once."""
    order = sorted(range(len(found)), key=lambda i: (-scores[i], found[i].marker, found[i].position))
    chosen: list[int] = []
    for i in order:
        if any(near_duplicates(found[i], found[j]) for j in chosen):
            continue
        chosen.append(i)
        if len(chosen) == max_quotes:
            break
    return chosen


def near_duplicates(a: Candidate, b: Candidate) -> bool:
    """True when most terms of the smaller passage also occur in the other."""
    return len(a.terms & b.terms) >= _DUPLICATE_OVERLAP * min(len(a.terms), len(b.terms))
