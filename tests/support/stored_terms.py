"""An index written by a simulated older analyser, and reading back what an engine stores as each chunk's terms and
reading."""

from __future__ import annotations

from ragsvc.domain import Chunk
from ragsvc.reading.text import ANALYSER_VERSION, index_terms
from ragsvc.retrieval.layout import Analysed, indexed_text
from ragsvc.retrieval.stored_terms import StoredTerms, TermsStore, rewrite_terms

OLD = ANALYSER_VERSION - 1  # the simulated older analyser's version


def old_terms(text: str) -> list[str]:
    """The terms the simulated older analyser writes of `text`: none of them is one the current analyser writes."""
    return sorted(f"old:{term}" for term in index_terms(text))


def old_analyser(chunk: Chunk) -> Analysed:
    """What the simulated older analyser stores: its own terms, and no reading (as version 1 stored none)."""
    return Analysed(old_terms(indexed_text(chunk)), None)


async def write_with_the_old_analyser(engine: TermsStore) -> None:
    """Makes the stored terms, readings and the recorded version those of the older analyser (a rewrite with it)."""
    await rewrite_terms(engine, current=OLD, analyse=old_analyser)
    assert await engine.analyser_version() == OLD


async def stored_rows(engine: TermsStore) -> list[StoredTerms]:
    """Every stored chunk with its terms and reading (read two chunks at a time)."""
    rows: list[StoredTerms] = []
    start = None
    while True:
        page = await engine.stored_terms(start, 2)
        rows += page.rows
        if (start := page.next_start) is None:
            return rows


async def terms_by_text(engine: TermsStore) -> dict[str, list[str]]:
    """Every stored chunk's terms, by the text they are computed from."""
    return {row.text: list(row.terms) for row in await stored_rows(engine)}
