"""Erasure over a real channel (issue 28, item 4): AdminService.EraseCaller removes every text one caller stored,
and DeleteSession the text of its session from the audit log, proven by reading the stores directly afterwards:
the SQLite file with sqlite3 and the in-memory caches (the embedded backends), or PostgreSQL with asyncpg and
Redis with a client of its own (the shared ones). Another caller's records are read the same way, to show the
erasure took only what it should.

Authentication is on: `acme-fin` reads the finance document (the figure 12000), `acme-hr` the HR one, `acme-ops`
is an admin of acme, `globex-ops` an admin of another tenant, `acme-plain` a key without the admin scope."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import pytest
import redis.asyncio as aioredis
from google.longrunning import operations_pb2_grpc as lro_grpc
from google.longrunning import operations_proto_pb2 as lro

from ragsvc.answering.cache import AnswerStore
from ragsvc.retrieval.embedders import MiniLMEmbedder
from ragsvc.server.app import RagServer
from ragsvc.v1 import admin_service_pb2 as admin_pb
from ragsvc.v1 import rag_service_pb2 as pb
from tests.server.test_auth import QUESTION, bearer, ingest_finance_and_hr
from tests.support.rpc_details import Details, details_of
from tests.support.servers import Stubs, connected, running_server

KEYS = {
    "keys": [
        {"name": "acme-fin", "token": "tok-fin", "tenant": "acme", "tags": ["finance"]},
        {"name": "acme-hr", "token": "tok-hr", "tenant": "acme", "tags": ["hr"]},
        {"name": "acme-plain", "token": "tok-plain", "tenant": "acme", "tags": []},
        {"name": "acme-ops", "token": "tok-ops", "tenant": "acme", "tags": ["*"], "index": True, "admin": True},
        {"name": "globex-ops", "token": "tok-globex-ops", "tenant": "globex", "tags": ["*"], "admin": True},
    ]
}
FIGURE = "12000 euros"  # in the finance document, so in every answer acme-fin gets (digits alone occur in timings)
FIN_QUESTIONS = (QUESTION, "How much may the finance team spend on conferences?", "And per year?")
FIN_REFUSED = "How large is the finance offsite budget?"  # asked with a bad top_k: refused at admission
FIN_SUBMITTED = "Which budget does the finance team have for conferences?"  # a long-running ask (SubmitAsk)
HR_QUESTION = "When are salaries reviewed?"
ERASE_FIN = admin_pb.EraseCallerRequest(key_name="acme-fin")


@dataclass
class Deployment:
    """A server and how to read its stores directly."""

    server: RagServer
    stubs: Stubs
    data_dir: Path
    postgres_url: str = ""
    redis_url: str = ""

    async def dump(self) -> str:
        """Everything the records database and the answer stores hold, as text."""
        if self.postgres_url:
            records = await _postgres_dump(self.postgres_url)
        else:
            records = _sqlite_dump(self.data_dir / "ragsvc.sqlite3")
        if self.redis_url:
            return records + await _redis_dump(self.redis_url)
        components = self.server.components
        return records + _memory_dump(components.cache) + _memory_dump(components.replays)

    async def audit_rows(self) -> list[dict[str, Any]]:
        """The audit log's rows, read directly."""
        if self.postgres_url:
            connection = await asyncpg.connect(self.postgres_url)
            try:
                return [dict(r) for r in await connection.fetch("SELECT * FROM answers ORDER BY id")]
            finally:
                await connection.close()
        with sqlite3.connect(f"file:{self.data_dir / 'ragsvc.sqlite3'}?mode=ro", uri=True) as connection:
            connection.row_factory = sqlite3.Row
            return [dict(r) for r in connection.execute("SELECT * FROM answers ORDER BY id")]


def _sqlite_dump(path: Path) -> str:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as connection:
        tables = [name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return "".join(repr(connection.execute(f'SELECT * FROM "{table}"').fetchall()) for table in tables)


async def _postgres_dump(url: str) -> str:
    connection = await asyncpg.connect(url)
    try:
        tables = await connection.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        )
        assert {t["table_name"] for t in tables} >= {"answers", "sessions", "session_messages", "operations"}
        return "".join([repr(await connection.fetch(f'SELECT * FROM "{t["table_name"]}"')) for t in tables])
    finally:
        await connection.close()


async def _redis_dump(url: str) -> str:
    client = aioredis.Redis.from_url(url)
    parts: list[str] = []
    try:
        async for key in client.scan_iter("*"):
            kind = (await client.type(key)).decode()
            read = {"string": client.get, "set": client.smembers, "hash": client.hgetall,
                    "list": lambda k: client.lrange(k, 0, -1), "zset": lambda k: client.zrange(k, 0, -1)}[kind]  # fmt: skip
            parts.append(repr((key, await read(key))))
    finally:
        await client.aclose()
    return "".join(parts)


def _memory_dump(store: AnswerStore | None) -> str:
    assert store is not None
    return repr(list(store._entries.items()))  # type: ignore[attr-defined]  # the in-memory store's own dict


@pytest.fixture(params=["embedded", "shared"])
async def deployment(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: MiniLMEmbedder
) -> AsyncIterator[Deployment]:
    """A server on SQLite with in-memory caches, or on PostgreSQL and Redis (both with the cache on)."""
    keys_file = tmp_path / "keys.json"
    keys_file.write_text(json.dumps(KEYS))
    shared = request.param == "shared"
    stores: dict[str, str] = {}
    if shared:
        stores = {"database_url": request.getfixturevalue("postgres_url"), "redis_url": request.getfixturevalue("redis_url")}
    async with running_server(tmp_path / "data", embedder=embedder, auth_enabled=True, api_keys_file=str(keys_file),
                              cache_max_entries=100, demo_corpus=False, **stores) as server:  # fmt: skip
        await ingest_finance_and_hr(server, "tok-ops")
        async with connected(server) as stubs:
            yield Deployment(server, stubs, tmp_path / "data", stores.get("database_url", ""), stores.get("redis_url", ""))


async def ask(stubs: Stubs, token: str, query: str, **fields: Any) -> pb.Answer:
    return (await stubs.rag.Ask(pb.AskRequest(query=query, **fields), metadata=bearer(token), timeout=30)).answer


async def submitted(stubs: Stubs, token: str, query: str) -> pb.AskResponse:
    """The answer of a long-running ask (SubmitAsk), once its operation is done."""
    operation = await stubs.rag.SubmitAsk(pb.AskRequest(query=query), metadata=bearer(token), timeout=30)
    waiting = lro_grpc.OperationsStub(stubs.channel)
    for _ in range(10):
        request = lro.WaitOperationRequest(name=operation.name)
        operation = await waiting.WaitOperation(request, metadata=bearer(token), timeout=70)
        if operation.done:
            response = pb.AskResponse()
            assert operation.response.Unpack(response)
            return response
    raise AssertionError(f"{operation.name} did not finish")


async def refused(call: Any) -> Details:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return details_of(caught.value)


async def test_erasing_a_caller_leaves_none_of_its_text_in_the_stores(deployment: Deployment) -> None:
    stubs = deployment.stubs
    fin_session, hr_session = str(uuid.uuid4()), str(uuid.uuid4())
    answers = [await ask(stubs, "tok-fin", QUESTION, idempotency_key="fin-once")]  # cached and replayable
    for query in FIN_QUESTIONS[1:]:
        answers.append(await ask(stubs, "tok-fin", query, session_id=fin_session))  # two turns of a session
    bad_top_k = pb.RetrievalOptions(top_k=99)
    assert (await refused(ask(stubs, "tok-fin", FIN_REFUSED, retrieval=bad_top_k))).code == grpc.StatusCode.INVALID_ARGUMENT
    answers.append((await submitted(stubs, "tok-fin", FIN_SUBMITTED)).answer)  # an operation holding its answer
    assert answers[0].grounded and all(FIGURE in answer.text for answer in answers[:2])
    await ask(stubs, "tok-hr", HR_QUESTION, idempotency_key="hr-once")
    await ask(stubs, "tok-hr", HR_QUESTION, session_id=hr_session)

    fin_texts = [*FIN_QUESTIONS, FIN_REFUSED, FIN_SUBMITTED, FIGURE, *(answer.text for answer in answers), "acme-fin"]
    before = await deployment.dump()
    assert all(text in before for text in fin_texts), "the probe sees what it looks for"
    rows_before = await deployment.audit_rows()

    erased = await stubs.admin.EraseCaller(ERASE_FIN, metadata=bearer("tok-ops"), timeout=30)
    counts = (erased.sessions_deleted, erased.session_messages_deleted, erased.audit_records_erased,
              erased.operations_deleted, erased.cached_answers_dropped, erased.replayed_answers_dropped)  # fmt: skip
    assert counts == (1, 4, 5, 1, 2, 1), "the submitted ask was cached too"

    after = await deployment.dump()
    left = {text: after[max(0, after.index(text) - 300) : after.index(text) + 300] for text in fin_texts if text in after}
    assert left == {}
    assert HR_QUESTION in after and "acme-hr" in after, "another caller's records are untouched"
    rows_after = await deployment.audit_rows()
    assert len(rows_after) == len(rows_before) == 7, "the audit rows stay, as metadata"
    erased_rows = [row for row in rows_after if row["text_erased_at"] is not None]
    assert len(erased_rows) == 5 and all(row["caller"] == "" and row["query"] == "" for row in erased_rows)
    assert [(row["outcome"], row["error_reason"]) for row in erased_rows][3] == ("failed", "VALIDATION_ERROR")
    metadata = ("id", "created_at", "request_id", "tenant_id", "session_id", "outcome", "grounded", "action",
                "refusal_reason", "confidence", "citations", "flags", "model", "timings", "error_reason")  # fmt: skip
    assert [[row[c] for c in metadata] for row in rows_after] == [[row[c] for c in metadata] for row in rows_before]

    again = await stubs.admin.EraseCaller(ERASE_FIN, metadata=bearer("tok-ops"), timeout=30)
    assert again == admin_pb.EraseCallerResponse(), "nothing left to erase"
    replayed = await ask(stubs, "tok-fin", QUESTION, idempotency_key="fin-once")
    assert not replayed.flags.cache_hit, "neither the replay nor the cached answer is served any more"
    await refused(stubs.rag.GetSession(pb.GetSessionRequest(session_id=fin_session), metadata=bearer("tok-fin")))


async def test_deleting_a_session_erases_its_text_from_the_audit_log(deployment: Deployment) -> None:
    stubs = deployment.stubs
    session = str(uuid.uuid4())
    for query in FIN_QUESTIONS[1:]:
        await ask(stubs, "tok-fin", query, session_id=session)
    await ask(stubs, "tok-fin", QUESTION)  # no session: stays
    deleted = await stubs.rag.DeleteSession(pb.DeleteSessionRequest(session_id=session), metadata=bearer("tok-fin"))
    assert (deleted.turns_deleted, deleted.audit_records_erased) == (2, 2)
    after = await deployment.dump()
    assert [text for text in FIN_QUESTIONS[1:] if text in after] == []
    assert QUESTION in after, "the question asked outside the session is kept"
    rows = await deployment.audit_rows()
    assert [(row["session_id"], row["query"], row["caller"]) for row in rows] == [
        (session, "", "key:acme/acme-fin"), (session, "", "key:acme/acme-fin"), ("", QUESTION, "key:acme/acme-fin"),
    ]  # fmt: skip


BAD_REQUESTS = {
    "neither": ({}, ["key_name", "peer"]),
    "both": ({"key_name": "acme-fin", "peer": "10.0.0.7"}, ["key_name", "peer"]),
    "blank": ({"key_name": "   "}, ["key_name", "peer"]),
    "too long": ({"key_name": "x" * 257}, ["key_name"]),
    "control character": ({"peer": "10.0.\x1b0.7"}, ["peer"]),
    "a path as tenant": ({"tenant_id": "../acme", "key_name": "acme-fin"}, ["tenant_id"]),
}


@pytest.mark.parametrize("deployment", ["embedded"], indirect=True)
async def test_only_an_admin_of_the_callers_tenant_erases_it_and_a_bad_request_names_its_fields(
    deployment: Deployment,
) -> None:
    stubs = deployment.stubs
    await ask(stubs, "tok-fin", QUESTION)
    for token in ("tok-fin", "tok-plain"):
        details = await refused(stubs.admin.EraseCaller(ERASE_FIN, metadata=bearer(token)))
        assert details.code == grpc.StatusCode.PERMISSION_DENIED, token
    other_tenant = admin_pb.EraseCallerRequest(tenant_id="acme", key_name="acme-fin")
    details = await refused(stubs.admin.EraseCaller(other_tenant, metadata=bearer("tok-globex-ops")))
    assert details.code == grpc.StatusCode.PERMISSION_DENIED
    in_its_own = await stubs.admin.EraseCaller(ERASE_FIN, metadata=bearer("tok-globex-ops"))
    assert in_its_own == admin_pb.EraseCallerResponse(), "globex's acme-fin is another caller, with nothing stored"
    assert (await deployment.audit_rows())[0]["query"] == QUESTION

    for case, (fields, named) in BAD_REQUESTS.items():
        request = admin_pb.EraseCallerRequest(**fields)
        details = await refused(stubs.admin.EraseCaller(request, metadata=bearer("tok-ops")))
        assert (details.code, details.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "VALIDATION_ERROR"), case
        assert details.bad_request is not None
        assert sorted({violation.field for violation in details.bad_request.field_violations}) == named, case
    assert (await deployment.audit_rows())[0]["query"] == QUESTION, "nothing was erased by the refused requests"
