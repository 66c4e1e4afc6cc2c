"""Erasure and retention of stored text on both backends (the `database` fixture runs each test on SQLite and on
PostgreSQL): the audit log's text erased apart from its metadata (by age, by session, by caller), a caller's
sessions deleted, and a database written before rows named their caller, upgraded in place. Every check reads the
tables back with plain SQL, not through the stores."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ragsvc.access import Evidence
from ragsvc.domain import ChatMessage, Role
from ragsvc.errors import FieldViolation, InvalidRequest
from ragsvc.storage.answers import AnswerLog
from ragsvc.storage.backend import Backend, utc_now
from ragsvc.storage.database import open_database
from ragsvc.storage.dialect import SQLITE_TYPES, render
from ragsvc.storage.retention import Purged, RetentionJob
from ragsvc.storage.schema import MIGRATIONS
from ragsvc.storage.sessions import SessionKey, SessionStore
from tests.storage.samples import answer, question

FIN = "key:acme/fin"
HR = "key:acme/hr"
PEER = "peer:10.0.0.7"
TEXT_COLUMNS = ("query", "answer", "draft", "search_query", "error_message")


async def rows(database: Backend) -> list[dict[str, Any]]:
    return await database.fetch_all("SELECT * FROM answers ORDER BY id")


def text_of(row: dict[str, Any]) -> str:
    return " ".join(str(row[column]) for column in (*TEXT_COLUMNS, "packed_chunks"))


async def record(log: AnswerLog, caller: str, query: str, **fields: Any) -> None:
    await log.record_answer(question(caller=caller, query=query, explain=True, **fields), answer(draft=f"draft of {query}"))


async def test_each_row_names_its_caller(database: Backend) -> None:
    log = AnswerLog(database)
    await record(log, FIN, "fin asks")
    log.record_failure(question(caller=PEER, query="peer asks"), InvalidRequest([FieldViolation("top_k", "bad")]))
    await log.drain()
    assert [(r["caller"], r["query"], r["text_erased_at"]) for r in await rows(database)] == [
        (FIN, "fin asks", None), (PEER, "peer asks", None),
    ]  # fmt: skip


async def test_text_past_its_retention_is_erased_and_the_metadata_stays(database: Backend) -> None:
    log = AnswerLog(database)
    await record(log, FIN, "old question")
    [before] = await rows(database)
    assert "old question" in text_of(before) and before["packed_chunks"] is not None
    assert await log.purge_text(retention_days=30) == 0, "not old enough yet"
    later = utc_now() + timedelta(days=31)
    assert await log.purge_text(retention_days=30, now=later) == 1
    [after] = await rows(database)
    assert [after[column] for column in TEXT_COLUMNS] == [""] * len(TEXT_COLUMNS) and after["packed_chunks"] is None
    assert after["text_erased_at"] == later.replace(microsecond=later.microsecond // 1000 * 1000)
    kept = ("id", "created_at", "request_id", "tenant_id", "session_id", "caller", "outcome", "grounded", "action",
            "confidence", "citations", "flags", "model", "template_version", "timings", "refusal_reason")  # fmt: skip
    assert {c: after[c] for c in kept} == {c: before[c] for c in kept}, "the metadata is untouched"
    assert await log.purge_text(retention_days=30, now=later + timedelta(days=1)) == 0, "erased once"


async def test_deleting_a_session_erases_its_rows_text_only(database: Backend) -> None:
    log = AnswerLog(database)
    await record(log, FIN, "first turn", session_id="s1")
    await record(log, FIN, "second turn", session_id="s1")
    await record(log, FIN, "another session", session_id="s2")
    await record(log, FIN, "same id, other tenant", session_id="s1", tenant_id="globex")
    assert await log.erase_session("acme", "s1") == 2
    assert [r["query"] for r in await rows(database)] == ["", "", "another session", "same id, other tenant"]
    assert [r["caller"] for r in await rows(database)] == [FIN] * 4, "a deleted session's rows keep their caller"
    assert await log.erase_session("acme", "s1") == 0


async def test_erasing_a_caller_blanks_its_rows_and_its_name(database: Backend) -> None:
    log = AnswerLog(database)
    await record(log, FIN, "fin in acme")
    await record(log, HR, "hr in acme")
    await record(log, FIN, "fin elsewhere", tenant_id="globex")
    log.record_failure(question(caller=FIN, query="fin refused"), InvalidRequest([FieldViolation("top_k", "bad")]))
    assert await log.erase_caller(FIN, "acme") == 2, "the failure's row (handed over, not yet committed) included"
    assert [(r["caller"], r["query"]) for r in await rows(database)] == [
        ("", ""), (HR, "hr in acme"), (FIN, "fin elsewhere"), ("", ""),
    ]  # fmt: skip
    assert await log.erase_caller(FIN) == 1, "None: every tenant"
    assert await log.erase_caller(FIN) == 0
    assert all("fin" not in text_of(r) and r["caller"] != FIN for r in await rows(database))


async def test_a_caller_whose_text_retention_erased_is_still_anonymised(database: Backend) -> None:
    log = AnswerLog(database)
    await record(log, FIN, "old")
    assert await log.purge_text(retention_days=1, now=utc_now() + timedelta(days=2)) == 1
    assert await log.erase_caller(FIN) == 1
    [row] = await rows(database)
    assert (row["caller"], row["query"]) == ("", "") and row["text_erased_at"] is not None


async def test_erasing_a_caller_deletes_its_sessions_and_their_messages(database: Backend) -> None:
    store = SessionStore(database)
    turn = [ChatMessage(Role.USER, "question"), ChatMessage(Role.ASSISTANT, "answer")]
    for tenant, session, owner in (("acme", "s1", FIN), ("acme", "s2", FIN), ("acme", "s3", HR), ("globex", "s1", FIN)):
        key = SessionKey(tenant, session)
        await store.claim(key, owner, ())
        await store.append(key, turn, Evidence())
    assert await store.erase_caller(FIN, "acme") == (2, 4)
    left = await database.fetch_all("SELECT tenant_id, session_id, owner FROM sessions ORDER BY tenant_id, session_id")
    assert [(r["tenant_id"], r["session_id"], r["owner"]) for r in left] == [("acme", "s3", HR), ("globex", "s1", FIN)]
    messages = await database.fetch_all("SELECT tenant_id, session_id FROM session_messages")
    assert sorted((m["tenant_id"], m["session_id"]) for m in messages) == [("acme", "s3")] * 2 + [("globex", "s1")] * 2
    assert await store.erase_caller(FIN) == (1, 2)
    assert await store.erase_caller(FIN) == (0, 0)


async def test_the_retention_job_erases_text_before_the_rows_go(database: Backend) -> None:
    log = AnswerLog(database)
    await record(log, FIN, "kept a while")
    now = [utc_now()]
    job = RetentionJob(answers=log, audit_retention_days=365, audit_text_retention_days=30, clock=lambda: now[0])
    assert await job.purge_once() == Purged()
    now[0] += timedelta(days=31)
    assert await job.purge_once() == Purged(audit_texts=1)
    [row] = await rows(database)
    assert row["query"] == "" and row["outcome"] == "answered"
    now[0] += timedelta(days=365)
    assert await job.purge_once() == Purged(audit_rows=1)
    assert await rows(database) == []


@pytest.mark.parametrize("days", [None, 0])
async def test_no_text_retention_keeps_the_text_as_long_as_the_row(database: Backend, days: float | None) -> None:
    log = AnswerLog(database)
    await record(log, FIN, "kept")
    job = RetentionJob(answers=log, audit_text_retention_days=days, clock=lambda: utc_now() + timedelta(days=9999))
    assert await job.purge_once() == Purged()
    assert [r["query"] for r in await rows(database)] == ["kept"]


async def test_a_log_written_before_rows_named_their_caller_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    before = MIGRATIONS.index(next(m for m in MIGRATIONS if "text_erased_at" in m))
    with sqlite3.connect(path) as connection:
        for number, migration in enumerate(MIGRATIONS[:before], start=1):
            connection.executescript(f"BEGIN; {render(migration, SQLITE_TYPES)} PRAGMA user_version = {number}; COMMIT;")
        connection.execute(
            "INSERT INTO answers (created_at, request_id, tenant_id, session_id, query, outcome, answer, grounded, "
            "refusal_reason, action, confidence, citations, flags, model, template_version, timings, error_reason, "
            "error_message) VALUES ('2025-01-01T00:00:00.000+00:00', 'r', 'acme', 's1', 'old question', 'answered', "
            "'a', 1, 'none', 'cite', '{}', '[]', '{}', 'm', 'rag-v1', '{}', '', '')"
        )
    database = await open_database(path)
    try:
        [row] = await rows(database)
        assert (row["caller"], row["query"], row["text_erased_at"]) == ("", "old question", None)
        assert await AnswerLog(database).erase_session("acme", "s1") == 1, "its session still finds it"
    finally:
        await database.aclose()
