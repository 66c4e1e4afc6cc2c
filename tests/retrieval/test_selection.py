"""Selected-text mode (R-001-06, R-001-07): passages come only from the selection, with offsets into it."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragsvc.config import RetrievalSettings
from ragsvc.domain import RetrievalQuery
from ragsvc.retrieval.base import Candidate, IndexedChunk
from ragsvc.retrieval.edge import EdgeEngine
from ragsvc.retrieval.embedders import MiniLMEmbedder
from ragsvc.retrieval.hybrid import HybridRetriever
from ragsvc.retrieval.selection import (
    SELECTION_DOCUMENT_ID,
    SELECTION_SOURCE_URL,
    SELECTION_TITLE,
    not_in_selection_message,
    split_selection,
)

SELECTION = """The refund policy
Annual plans can be refunded within 14 days of purchase. Monthly plans are not refundable.

Backups run every night at 2 am and are kept for 30 days.
Restores are requested through the service desk.

The corporate VPN must be connected before opening the intranet."""


class SpyEngine:
    """A real engine that counts every call made to it."""

    def __init__(self, engine: EdgeEngine) -> None:
        self.engine = engine
        self.calls: list[str] = []

    async def query(self, query: RetrievalQuery, dense: Sequence[float], limit: int) -> list[Candidate]:
        self.calls.append("query")
        return await self.engine.query(query, dense, limit)

    async def replace_document(self, tenant_id: str, document_id: str, chunks: Sequence[IndexedChunk]) -> None:
        self.calls.append("replace_document")
        await self.engine.replace_document(tenant_id, document_id, chunks)

    async def delete_document(self, tenant_id: str, document_id: str) -> int:
        self.calls.append("delete_document")
        return await self.engine.delete_document(tenant_id, document_id)

    async def count(self, tenant_id: str | None = None) -> int:
        self.calls.append("count")
        return await self.engine.count(tenant_id)

    async def check_health(self) -> None:
        self.calls.append("check_health")
        await self.engine.check_health()

    async def close(self) -> None:
        await self.engine.close()


def test_passages_are_paragraphs_with_offsets_into_the_selection() -> None:
    passages = split_selection(SELECTION)

    assert [p.text for p in passages] == [
        "The refund policy\nAnnual plans can be refunded within 14 days of purchase. Monthly plans are not refundable.",
        "Backups run every night at 2 am and are kept for 30 days.\nRestores are requested through the service desk.",
        "The corporate VPN must be connected before opening the intranet.",
    ]
    assert [(p.line_start, p.line_end) for p in passages] == [(1, 2), (4, 5), (7, 7)]
    for index, passage in enumerate(passages):
        assert SELECTION[passage.char_start : passage.char_end] == passage.text
        assert passage.chunk_index == index
        assert (passage.document_id, passage.source_url, passage.page_title) == (
            SELECTION_DOCUMENT_ID,
            SELECTION_SOURCE_URL,
            SELECTION_TITLE,
        )


def test_a_long_paragraph_is_cut_between_sentences_then_words() -> None:
    sentence = "Each sentence here says something about the archive retention rules. "
    text = sentence * 20 + "x" * 30 + " " + "word " * 200

    passages = split_selection(text, max_chars=300)

    assert all(len(p.text) <= 300 for p in passages)
    assert passages[0].text.endswith("rules.")  # cut after a sentence
    assert all(not p.text[0].isspace() and not p.text[-1].isspace() for p in passages)
    words = [w for p in passages for w in p.text.split()]
    assert words == text.split()  # nothing lost, no word cut


selections = st.lists(
    st.one_of(st.sampled_from(["\n", "\n\n", " ", "\t", "\r\n", ". ", "! "]), st.text("abc xyz", min_size=1)),
    max_size=60,
).map("".join)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(text=selections, limit=st.integers(5, 60))
def test_passages_cover_every_word_exactly_once_in_order(text: str, limit: int) -> None:
    passages = split_selection(text, max_chars=limit)

    spans = [(p.char_start, p.char_end) for p in passages]
    assert all(s < e for s, e in spans)
    assert all(e1 <= s2 for (_, e1), (s2, _) in itertools.pairwise(spans))
    covered = {i for s, e in spans for i in range(s, e)}
    assert {m.start() for m in re.finditer(r"\S", text)} <= covered
    for p in passages:
        assert text[p.char_start : p.char_end] == p.text
        assert len(p.text) <= limit
        assert p.line_start == text.count("\n", 0, p.char_start) + 1
        assert p.line_end == text.count("\n", 0, p.char_end - 1) + 1


async def test_selection_passages_are_scored_against_the_query_and_the_engine_is_never_called(
    tmp_path: Path, embedder: MiniLMEmbedder
) -> None:
    engine = SpyEngine(EdgeEngine.open(tmp_path / "shard"))
    try:
        retriever = HybridRetriever(embedder, engine, RetrievalSettings(min_similarity=0.3))

        answerable = await retriever.retrieve_selection("How long are backups kept?", SELECTION, top_k=2, score_threshold=None)
        unanswerable = await retriever.retrieve_selection("What is the boiling point of tin?", SELECTION, top_k=2)

        assert engine.calls == []
        best = answerable.hits[0]
        assert best.chunk.text.startswith("Backups run every night")
        assert (best.chunk.char_start, best.chunk.line_start) == (SELECTION.index("Backups"), 4)
        assert best.score >= 0.3
        assert len(answerable.hits) <= 2
        assert unanswerable.hits == ()
        assert 1 <= len(unanswerable.rejected) <= 3
        assert all(r.chunk.document_id == SELECTION_DOCUMENT_ID for r in unanswerable.rejected)
    finally:
        await engine.close()


def test_the_not_in_selection_message_is_the_one_of_r_001_07() -> None:
    assert not_in_selection_message("What is the boiling point of tin?") == (
        'The provided selection does not contain information about "What is the boiling point of tin". '
        "Would you like me to search the full documentation?"
    )


@pytest.mark.parametrize("threshold", [0.0, 1.0])
async def test_a_request_threshold_applies_to_the_selection(tmp_path: Path, embedder: MiniLMEmbedder, threshold: float) -> None:
    engine = SpyEngine(EdgeEngine.open(tmp_path / "shard"))
    try:
        retriever = HybridRetriever(embedder, engine, RetrievalSettings(min_similarity=0.3))
        result = await retriever.retrieve_selection("refunds", SELECTION, top_k=3, score_threshold=threshold)
        assert all(h.score >= threshold for h in result.hits) and all(r.score < threshold for r in result.rejected)
        assert len(result.hits) == (2 if threshold == 0.0 else 0)  # one passage is negatively correlated
        assert engine.calls == []
    finally:
        await engine.close()
