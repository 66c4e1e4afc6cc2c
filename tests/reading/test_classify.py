from __future__ import annotations

import pytest

from ragsvc.domain import ChatMessage, QueryClass, Role
from ragsvc.reading.classify import classify

HISTORY = (ChatMessage(Role.USER, "How are hotel expenses reimbursed?"), ChatMessage(Role.ASSISTANT, "Up to 180 euros."))


@pytest.mark.parametrize(
    ("query", "history", "expected"),
    [
        ("Hello!", (), QueryClass.GREETING),
        ("thanks a lot", HISTORY, QueryClass.GREETING),
        ("How do I configure the embedder?", (), QueryClass.PROCEDURAL),
        ("What are the steps to ingest a PDF?", (), QueryClass.PROCEDURAL),
        ("What is the hotel limit?", (), QueryClass.FACTUAL),
        ("Which status code does an empty query get?", (), QueryClass.FACTUAL),
        ("And for flights?", HISTORY, QueryClass.CLARIFICATION),
        ("Why is that?", HISTORY, QueryClass.CLARIFICATION),
        ("what about taxis?", HISTORY, QueryClass.CLARIFICATION),
        ("And for flights?", (), QueryClass.FACTUAL),  # nothing to follow up on
    ],
)
def test_classify(query: str, history: tuple[ChatMessage, ...], expected: QueryClass) -> None:
    assert classify(query, history) is expected
