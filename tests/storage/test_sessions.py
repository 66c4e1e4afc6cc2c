from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ragsvc.domain import ChatMessage, Role
from ragsvc.storage.backend import Backend
from ragsvc.storage.sessions import SessionKey, SessionStore

SESSION = "9f1c1d4e-8a7b-4c6d-9e2f-0a1b2c3d4e5f"


def turn(i: int) -> list[ChatMessage]:
    return [ChatMessage(Role.USER, f"question {i}"), ChatMessage(Role.ASSISTANT, f"answer {i}")]


async def test_history_is_the_last_ten_messages_oldest_first(database: Backend) -> None:
    store = SessionStore(database)
    for i in range(8):
        await store.append(SessionKey("acme", SESSION), turn(i))
    history = await store.history(SessionKey("acme", SESSION))
    assert len(history) == 10
    assert history[0] == ChatMessage(Role.USER, "question 3") and history[-1] == ChatMessage(Role.ASSISTANT, "answer 7")


async def test_sessions_never_cross_tenants(database: Backend) -> None:
    store = SessionStore(database)
    await store.append(SessionKey("acme", SESSION), turn(0))
    assert await store.history(SessionKey("globex", SESSION)) == ()
    assert await store.history(SessionKey("acme", "another")) == ()


async def test_purge_drops_messages_past_retention(database: Backend) -> None:
    store = SessionStore(database)
    await store.append(SessionKey("acme", SESSION), turn(0))
    assert await store.purge(retention_days=30) == 0
    assert await store.purge(retention_days=30, now=datetime.now(UTC) + timedelta(days=31)) == 2
    assert await store.history(SessionKey("acme", SESSION)) == ()
