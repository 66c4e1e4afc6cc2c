"""What only the PostgreSQL backend does: replicas migrating together, the server going away and coming back,
concurrent writers on separate pools (as two replicas are)."""

from __future__ import annotations

import asyncio
import time

import pytest

from ragsvc.access import Evidence
from ragsvc.domain import Answer, ChatMessage, Event, Role
from ragsvc.errors import DatabaseUnavailable
from ragsvc.storage.answers import AnswerLog
from ragsvc.storage.backend import Backend
from ragsvc.storage.database import open_database
from ragsvc.storage.schema import MIGRATIONS, TIMESTAMP_COLUMNS
from ragsvc.storage.sessions import SessionKey, SessionStore
from ragsvc.storage.settings import SettingStore
from tests.storage.samples import answer, consumed, events, question
from tests.support.postgres_server import PostgresServer


async def test_replicas_migrating_together_end_with_one_schema(postgres_url: str) -> None:
    replicas = await asyncio.gather(*(open_database(postgres_url) for _ in range(4)))
    try:
        assert [await r.schema_version() for r in replicas] == [len(MIGRATIONS)] * 4
        rows = await replicas[0].fetch_all("SELECT version FROM schema_migrations ORDER BY version")
        assert [r["version"] for r in rows] == list(range(1, len(MIGRATIONS) + 1)), "each migration applied once"
        tables = await replicas[0].fetch_all(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1"
        )
        assert [t["table_name"] for t in tables] == [
            "answers", "index_versions", "metadata_keys", "operations", "prompt_templates", "schema_migrations",
            "session_messages", "sessions", "settings", "tags", "users",
        ]  # fmt: skip
    finally:
        for replica in replicas:
            await replica.aclose()


async def test_the_timestamp_columns_are_timestamptz(postgres_url: str) -> None:
    database = await open_database(postgres_url)
    rows = await database.fetch_all(
        "SELECT DISTINCT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND data_type = 'timestamp with time zone' AND table_name <> 'schema_migrations'"
    )
    await database.aclose()
    assert {r["column_name"] for r in rows} == TIMESTAMP_COLUMNS


@pytest.mark.parametrize("mode", ["fast", "kill"])
async def test_server_down_is_unavailable_and_its_return_needs_no_restart(
    postgres_server: PostgresServer, postgres_url: str, mode: str
) -> None:
    database = await open_database(postgres_url, pool_max_size=4)
    settings = SettingStore(database)
    await settings.put("ranking_weights", {"trust": 0.1})
    await asyncio.to_thread(postgres_server.stop, mode)
    try:
        began = time.monotonic()
        with pytest.raises(DatabaseUnavailable):
            await database.check_health()
        assert time.monotonic() - began < 3, "a down server is reported promptly"
        with pytest.raises(DatabaseUnavailable):
            await settings.get("ranking_weights")
        with pytest.raises(DatabaseUnavailable):
            await settings.put("ranking_weights", {"trust": 0.2})
    finally:
        await asyncio.to_thread(postgres_server.start)
    # The same backend, not reopened: the pool connects again at the first call.
    await database.check_health()
    assert await settings.get("ranking_weights") == {"trust": 0.1}
    await settings.put("ranking_weights", {"trust": 0.3})
    assert await settings.get("ranking_weights") == {"trust": 0.3}
    await database.aclose()


async def test_two_replicas_appending_to_one_session_keep_every_message(postgres_url: str) -> None:
    replicas: list[Backend] = [await open_database(postgres_url) for _ in range(2)]
    stores = [SessionStore(replica, max_messages=100) for replica in replicas]

    async def turn(n: int) -> None:
        messages = [ChatMessage(Role.USER, f"q{n}"), ChatMessage(Role.ASSISTANT, f"a{n}")]
        await stores[n % 2].append(SessionKey("acme", "shared-session"), messages, Evidence())

    await asyncio.gather(*(turn(n) for n in range(20)))
    history = [stored.message for stored in await stores[0].history(SessionKey("acme", "shared-session"))]
    assert len(history) == 40
    assert sorted(m.content for m in history if m.role is Role.USER) == sorted(f"q{n}" for n in range(20))
    for user, assistant in zip(history[::2], history[1::2], strict=True):
        assert assistant.content == "a" + user.content[1:], "a turn's two messages stay together"
    for replica in replicas:
        await replica.aclose()


async def test_an_answer_is_not_sent_while_the_server_is_down(postgres_server: PostgresServer, postgres_url: str) -> None:
    database = await open_database(postgres_url)
    log = AnswerLog(database)
    await asyncio.to_thread(postgres_server.stop, "immediate")
    try:
        seen: list[Event] = []
        with pytest.raises(DatabaseUnavailable):
            await consumed(log.recorded(question(request_id="lost"), events(answer())), seen)
        assert not any(isinstance(event, Answer) for event in seen)
    finally:
        await asyncio.to_thread(postgres_server.start)
    async for _ in log.recorded(question(request_id="after"), events(answer())):
        pass
    await log.drain()
    rows = await database.fetch_all("SELECT request_id, outcome FROM answers ORDER BY id")
    assert rows[-1] == {"request_id": "after", "outcome": "answered"}
    await database.aclose()


async def test_a_hung_server_is_unavailable_within_the_timeouts(postgres_server: PostgresServer, postgres_url: str) -> None:
    database = await open_database(postgres_url, connect_timeout_s=1.0, command_timeout_s=1.0)  # health: 2 s
    settings = SettingStore(database)
    await settings.put("k", 1)
    postgres_server.pause()
    try:
        for call in (database.check_health, lambda: settings.get("k")):
            began = time.monotonic()
            with pytest.raises(DatabaseUnavailable):
                await call()  # bounded by the health, command and connect timeouts: not a hang
            print(f"unavailable after {time.monotonic() - began:.2f} s")
            assert time.monotonic() - began < 4.5
    finally:
        postgres_server.resume()
    assert await settings.get("k") == 1, "thawed: the same backend works again"
    await database.aclose()
