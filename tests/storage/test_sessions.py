"""The session store on both backends (the `database` fixture runs each test on SQLite and on PostgreSQL): history,
tenants, retention, the owner a session is bound to, and the evidence stored with each turn; and a database
written before sessions had owners, upgraded in place."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ragsvc.access import Evidence
from ragsvc.domain import ChatMessage, Chunk, Role
from ragsvc.storage.backend import Backend
from ragsvc.storage.database import open_database
from ragsvc.storage.dialect import SQLITE_TYPES, render
from ragsvc.storage.schema import MIGRATIONS
from ragsvc.storage.sessions import SessionKey, SessionStore, StoredMessage

SESSION = "9f1c1d4e-8a7b-4c6d-9e2f-0a1b2c3d4e5f"
KEY = SessionKey("acme", SESSION)
FINANCE = Evidence.of([Chunk("budget", 0, "12000 euros", tags=("finance",)), Chunk("faq", 0, "hello")])


def turn(i: int) -> list[ChatMessage]:
    return [ChatMessage(Role.USER, f"question {i}"), ChatMessage(Role.ASSISTANT, f"answer {i}")]


def messages(history: tuple[StoredMessage, ...]) -> list[ChatMessage]:
    return [stored.message for stored in history]


async def test_history_is_the_last_ten_messages_oldest_first(database: Backend) -> None:
    store = SessionStore(database)
    for i in range(8):
        await store.append(KEY, turn(i), Evidence())
    history = messages(await store.history(KEY))
    assert len(history) == 10
    assert history[0] == ChatMessage(Role.USER, "question 3") and history[-1] == ChatMessage(Role.ASSISTANT, "answer 7")


async def test_sessions_never_cross_tenants(database: Backend) -> None:
    store = SessionStore(database)
    await store.claim(KEY, "key:acme/fin", ["finance"])
    await store.append(KEY, turn(0), Evidence())
    assert await store.history(SessionKey("globex", SESSION)) == ()
    assert await store.owner(SessionKey("globex", SESSION)) is None
    assert await store.history(SessionKey("acme", "another")) == ()


async def test_the_first_caller_to_claim_a_session_owns_it(database: Backend) -> None:
    store = SessionStore(database)
    assert await store.owner(KEY) is None
    assert await store.claim(KEY, "key:acme/fin", ["finance"]) == "key:acme/fin"
    assert await store.claim(KEY, "key:acme/plain", []) == "key:acme/fin", "a later claim does not take it over"
    assert await store.owner(KEY) == "key:acme/fin"
    [row] = await database.fetch_all("SELECT owner_tags FROM sessions")
    assert row["owner_tags"] == '["finance"]', "the owner's tags when it created the session"


async def test_each_message_keeps_the_evidence_of_its_turn(database: Backend) -> None:
    store = SessionStore(database)
    await store.append(KEY, turn(0), FINANCE)
    await store.append(KEY, turn(1), Evidence())
    history = await store.history(KEY)
    assert [stored.evidence for stored in history] == [FINANCE, FINANCE, Evidence(), Evidence()]
    assert Evidence(((), ("finance",)), confidential=False) == FINANCE, "the distinct tag sets, sorted"


async def test_purge_drops_messages_past_retention_and_their_empty_sessions(database: Backend) -> None:
    store = SessionStore(database)
    await store.claim(KEY, "key:acme/fin", [])
    await store.append(KEY, turn(0), Evidence())
    assert await store.purge(retention_days=30) == 0
    assert await store.owner(KEY) == "key:acme/fin"
    assert await store.purge(retention_days=30, now=datetime.now(UTC) + timedelta(days=31)) == 2
    assert await store.history(KEY) == ()
    assert await store.owner(KEY) is None


async def test_messages_stored_before_evidence_was_recorded_read_back_without_it(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    connection = sqlite3.connect(path)
    script = "".join(render(migration, SQLITE_TYPES) for migration in MIGRATIONS[:-2])
    connection.executescript(f"BEGIN; {script} PRAGMA user_version = {len(MIGRATIONS) - 2}; COMMIT;")
    connection.execute("INSERT INTO session_messages (tenant_id, session_id, seq, role, content, created_at) "
                       "VALUES ('acme', ?, 1, 'assistant', 'old answer', '2026-01-02T03:04:05.678+00:00')",
                       (SESSION,))  # fmt: skip
    connection.commit()
    connection.close()
    database = await open_database(path)
    try:
        store = SessionStore(database)
        assert await store.history(KEY) == (StoredMessage(ChatMessage(Role.ASSISTANT, "old answer"), None),)
        assert await store.owner(KEY) is None, "no owner recorded: the first caller to use it claims it"
    finally:
        await database.aclose()
