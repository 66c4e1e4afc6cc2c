"""CallerErasure over the real stores (the `database` fixture runs each test on SQLite and on PostgreSQL; the
answer stores in memory, and on a real Redis-protocol server where Redis matters): what one erasure removes from
each store, counted once; rows written before rows named their caller, found through the caller's sessions; the
shared stores first, so that Redis out erases nothing; and the operations hook."""

from __future__ import annotations

import dataclasses

import pytest

from ragsvc.access import Evidence
from ragsvc.answering.cache import MemoryAnswerCache, is_cacheable, keeps_every_answer
from ragsvc.domain import Action, Answer, ChatMessage, Question, Role
from ragsvc.errors import FieldViolation, InvalidRequest, SharedStateUnavailable
from ragsvc.management.erasure import CallerErasure, Erased
from ragsvc.shared.cache import RedisAnswerCache
from ragsvc.shared.guard import RedisGuard, connect
from ragsvc.storage.answers import AnswerLog
from ragsvc.storage.backend import Backend
from ragsvc.storage.sessions import SessionKey, SessionStore
from tests.storage.samples import answer, question
from tests.support.redis_server import RedisServer

FIN, HR = "key:acme/fin", "key:acme/hr"
GROUNDED = Answer(text="It is 42 [#1].", grounded=True, action=Action.CITE)
TURN = [ChatMessage(Role.USER, "q"), ChatMessage(Role.ASSISTANT, "a")]


async def stored(sessions: SessionStore, tenant: str, session: str, owner: str) -> None:
    key = SessionKey(tenant, session)
    await sessions.claim(key, owner, ())
    await sessions.append(key, TURN, Evidence())


async def test_one_erasure_removes_a_caller_from_every_store_and_counts_each_row_once(database: Backend) -> None:
    answers, sessions = AnswerLog(database), SessionStore(database)
    cache = MemoryAnswerCache(max_entries=10, ttl_s=60)
    replays = MemoryAnswerCache(max_entries=10, ttl_s=60, admits=keeps_every_answer)
    for tenant, session, owner in (("acme", "s1", FIN), ("acme", "s2", FIN), ("acme", "s3", HR)):
        await stored(sessions, tenant, session, owner)
    await answers.record_answer(question(caller=FIN, session_id="s1"), answer())
    await answers.record_answer(question(caller="", session_id="s2", query="before callers"), answer())  # an old row
    await answers.record_answer(question(caller=FIN), answer())
    answers.record_failure(question(caller=FIN), InvalidRequest([FieldViolation("top_k", "bad")]))
    await answers.record_answer(question(caller=HR, session_id="s3"), answer())
    for store in (cache, replays):
        for caller in (FIN, HR):
            q = Question(query=f"asked by {caller}", tenant_id="acme", caller=caller)
            await store.put(caller, GROUNDED, question=q, generation=0)

    erasure = CallerErasure(answers, sessions=sessions, cache=cache, replays=replays)
    assert await erasure.erase(FIN, "acme") == Erased(
        sessions=2, session_messages=4, audit_records=4, cached_answers=1, replayed_answers=1
    )
    left = await database.fetch_all("SELECT caller, query FROM answers ORDER BY id")
    assert [(r["caller"], r["query"]) for r in left] == [("", "")] * 4 + [(HR, "hotel limit?")]
    assert await sessions.owned_by(FIN) == [] and await sessions.owned_by(HR) == [SessionKey("acme", "s3")]
    assert len(cache) == len(replays) == 1
    assert await erasure.erase(FIN, "acme") == Erased(), "a repeat finds nothing"


async def test_redis_out_fails_the_erasure_before_anything_is_erased(
    database: Backend, redis_server: RedisServer, redis_url: str
) -> None:
    answers, sessions = AnswerLog(database), SessionStore(database)
    await stored(sessions, "acme", "s1", FIN)
    await answers.record_answer(question(caller=FIN, session_id="s1"), answer())
    guard = RedisGuard(connect(redis_url), retry_after_s=0.0)  # tried again at once once Redis is back
    cache = RedisAnswerCache(guard, ttl_s=60, admits=is_cacheable)
    erasure = CallerErasure(answers, sessions=sessions, cache=cache)
    redis_server.stop()
    try:
        with pytest.raises(SharedStateUnavailable):
            await erasure.erase(FIN, None)
        assert await sessions.owned_by(FIN) == [SessionKey("acme", "s1")]
        [row] = await answers.recent("acme")
        assert row["caller"] == FIN, "untouched: the erasure can be repeated whole"
    finally:
        redis_server.start()
    assert await erasure.erase(FIN, None) == Erased(sessions=1, session_messages=2, audit_records=1)
    await guard.aclose()


@dataclasses.dataclass
class Operations:
    """A store of operations bound to their caller, as `CallerRecords` asks of one."""

    owners: list[tuple[str, str]]

    async def erase_caller(self, caller: str, tenant_id: str | None = None) -> int:
        kept = [(owner, tenant) for owner, tenant in self.owners if owner != caller or tenant_id not in (None, tenant)]
        erased, self.owners = len(self.owners) - len(kept), kept
        return erased


async def test_the_operations_store_is_erased_through_its_hook(database: Backend) -> None:
    operations = Operations([(FIN, "acme"), (FIN, "globex"), (HR, "acme")])
    erasure = CallerErasure(AnswerLog(database), operations=operations)
    assert await erasure.erase(FIN, "acme") == Erased(operations=1)
    assert await erasure.erase(FIN, None) == Erased(operations=1)
    assert operations.owners == [(HR, "acme")]
