"""An index written by a simulated older analyser, and reading back what an engine stores as each chunk's terms."""

from __future__ import annotations

from ragsvc.reading.text import ANALYSER_VERSION, index_terms
from ragsvc.retrieval.stored_terms import TermsStore, rewrite_terms

OLD = ANALYSER_VERSION - 1  # the simulated older analyser's version


def old_analyser(text: str) -> list[str]:
    """The terms the simulated older analyser writes: none of them is one the current analyser writes."""
    return sorted(f"old:{term}" for term in index_terms(text))


async def write_with_the_old_analyser(engine: TermsStore) -> None:
    """Makes the stored terms and the recorded version those of the older analyser (a rewrite with it)."""
    await rewrite_terms(engine, current=OLD, analyse=old_analyser)
    assert await engine.analyser_version() == OLD


async def terms_by_text(engine: TermsStore) -> dict[str, list[str]]:
    """Every stored chunk's terms, by the text they are computed from (read two chunks at a time)."""
    found: dict[str, list[str]] = {}
    start = None
    while True:
        page = await engine.stored_terms(start, 2)
        found |= {row.text: list(row.terms) for row in page.rows}
        if (start := page.next_start) is None:
            return found
