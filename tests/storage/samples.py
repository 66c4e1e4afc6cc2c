"""Sample questions, answers and event streams for the storage tests, the crash writer and bench/audit_commit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ragsvc.domain import (
    Answer,
    Chunk,
    Citation,
    Confidence,
    Event,
    Explanation,
    Flags,
    Question,
    ScoredChunk,
    TextDelta,
    Timings,
)

CHUNK = Chunk("guide", 2, "Hotels up to 180 euros.", tenant_id="acme")
PACKED = (ScoredChunk(CHUNK, 0.7),)


def question(**fields: Any) -> Question:
    base: dict[str, Any] = {"query": "hotel limit?", "tenant_id": "acme", "request_id": "r1"}
    return Question(**{**base, **fields})


def answer(**fields: Any) -> Answer:
    base: dict[str, Any] = {
        "text": "Up to 180 euros [#1].",
        "citations": (Citation(1, CHUNK, 0.7),),
        "confidence": Confidence(overall=81.0, retrieval=0.7, coverage=1.0, llm=50.0),
        "grounded": True,
        "flags": Flags(hallucination_detected=False),
        "model": "extractive",
        "template_version": "rag-v1",
        "timings": Timings(total_ms=12.5),
        "explanation": Explanation((), PACKED, 40),
    }
    return Answer(**{**base, **fields})


async def consumed(stream: AsyncIterator[Event], seen: list[Event]) -> None:
    """Read `stream` to its end (or its error) into `seen`."""
    async for event in stream:
        seen.append(event)


async def events(final: Answer, *, before: int = 1) -> AsyncIterator[Event]:
    for n in range(before):
        yield TextDelta(f"part {n} ")
    yield final
