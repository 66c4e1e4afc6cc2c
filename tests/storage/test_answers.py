from __future__ import annotations

from ragsvc.domain import (
    Action,
    Answer,
    Chunk,
    Citation,
    Confidence,
    Explanation,
    Flags,
    Question,
    RefusalReason,
    ScoredChunk,
    Timings,
)
from ragsvc.errors import FieldViolation, InvalidRequest, LLMUnavailable
from ragsvc.storage.answers import AnswerLog
from ragsvc.storage.database import Database

CHUNK = Chunk("guide", 2, "Hotels up to 180 euros.", tenant_id="acme")
PACKED = (ScoredChunk(CHUNK, 0.7),)


def question(**fields: object) -> Question:
    return Question(**{"query": "hotel limit?", "tenant_id": "acme", "request_id": "r1", **fields})  # type: ignore[arg-type]


def answer(**fields: object) -> Answer:
    base = {
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
    return Answer(**{**base, **fields})  # type: ignore[arg-type]


async def test_every_outcome_is_recorded(database: Database) -> None:
    log = AnswerLog(database)
    log.record_answer(question(), answer())
    log.record_answer(question(), answer(action=Action.ROUTE))
    log.record_answer(question(), answer(grounded=False, refusal=RefusalReason.SCORE_GATE, action=Action.ROUTE))
    log.record_answer(question(dry_run=True), answer(text=""))
    log.record_failure(question(), LLMUnavailable("down"))
    log.record_failure(question(query=""), InvalidRequest([FieldViolation("query", "empty")]))
    log.record_failure(question(), KeyError("boom"))
    log.record_failure(question(), LLMUnavailable("x"), cancelled=True)
    rows = await log.recent("acme")
    assert [r["outcome"] for r in reversed(rows)] == [
        "answered", "routed", "refused", "dry_run", "failed", "failed", "failed", "cancelled",
    ]
    assert [r["error_reason"] for r in reversed(rows)][4:] == [
        "LLM_UNAVAILABLE", "VALIDATION_ERROR", "INTERNAL", "CANCELLED",
    ]
    first = rows[-1]
    assert first["answer"] == "Up to 180 euros [#1]." and first["grounded"] is True
    assert first["citations"] == [{"marker": 1, "source_id": "guide:2", "relevance_score": 0.7}]
    assert first["confidence"]["overall"] == 81.0 and first["timings"]["total_ms"] == 12.5
    assert first["model"] == "extractive" and first["template_version"] == "rag-v1" and first["request_id"] == "r1"
    assert rows[-3]["refusal_reason"] == "score_gate"


async def test_packed_chunks_are_kept_only_when_explaining(database: Database) -> None:
    log = AnswerLog(database)
    log.record_answer(question(), answer())
    log.record_answer(question(explain=True), answer())
    explained, plain = await log.recent("acme")
    assert plain["packed_chunks"] is None
    assert explained["packed_chunks"][0]["marker"] == 1
    assert explained["packed_chunks"][0]["text"] == CHUNK.text


async def test_rows_are_per_tenant(database: Database) -> None:
    log = AnswerLog(database)
    log.record_answer(question(tenant_id="other"), answer())
    assert await log.recent("acme") == []


async def test_rows_queued_together_are_committed_in_one_transaction(database: Database) -> None:
    log = AnswerLog(database)
    for n in range(50):
        log.record_answer(question(request_id=f"r{n}"), answer())
    await log.drain()
    rows = await database.fetch_all("SELECT request_id FROM answers ORDER BY id")
    assert [r["request_id"] for r in rows] == [f"r{n}" for n in range(50)]


async def test_a_failed_write_is_logged_and_never_raised(database: Database, caplog) -> None:
    log = AnswerLog(database)
    database.close()  # every write now fails with DatabaseUnavailable
    log.record_answer(question(), answer())
    await log.drain()
    assert "the audit log lost 1 rows" in caplog.text
