from __future__ import annotations

import pytest

from ragsvc.budget import TokenBudget
from ragsvc.domain import ChatMessage, Chunk, Role, ScoredChunk
from ragsvc.encodings import get_encoding
from ragsvc.errors import TokenBudgetExceeded
from ragsvc.prompts import RAG_V1


def budget(**overrides: int) -> TokenBudget:
    limits = dict(context_window=8192, max_response_tokens=1024, system_prompt_tokens=500,
                  max_context_tokens=3000, max_history_tokens=1000)  # fmt: skip
    return TokenBudget(encoding=get_encoding("cl100k_base"), **{**limits, **overrides})


def chunks(n: int, words: int = 100) -> list[ScoredChunk]:
    return [ScoredChunk(Chunk(f"d{i}", 0, " ".join(["evidence"] * words)), 1 - i / 100) for i in range(n)]


def test_counts_with_the_real_encoding() -> None:
    assert get_encoding("cl100k_base").encode("hello world") == [15339, 1917]


def test_chunks_are_packed_by_rank_until_the_context_budget_is_full() -> None:
    packing = budget(max_context_tokens=500).pack(RAG_V1, "q", (), chunks(10))
    assert [s.chunk.document_id for s in packing.context] == ["d0", "d1", "d2", "d3"]
    assert 0 < packing.context_tokens <= 500


def test_at_least_one_chunk_is_kept_cut_to_fit() -> None:
    packing = budget(max_context_tokens=60).pack(RAG_V1, "q", (), chunks(3, words=500))
    assert len(packing.context) == 1 and packing.context_tokens <= 60
    assert packing.context[0].chunk.text.startswith("evidence") and len(packing.context[0].chunk.text) < 500 * 9


def test_history_is_kept_newest_first_within_its_cap() -> None:
    history = tuple(ChatMessage(Role.USER if i % 2 == 0 else Role.ASSISTANT, f"turn {i} " * 40) for i in range(10))
    packing = budget(max_history_tokens=300).pack(RAG_V1, "q", history, chunks(1))
    assert packing.history == history[-len(packing.history):] and 0 < len(packing.history) < 10


def test_a_query_that_cannot_fit_is_refused() -> None:
    with pytest.raises(TokenBudgetExceeded) as caught:
        budget(context_window=1600).pack(RAG_V1, "word " * 2000, (), chunks(1))
    assert caught.value.reason == "TOKEN_BUDGET_EXCEEDED"
    assert [v.field for v in caught.value.violations] == ["query"]
