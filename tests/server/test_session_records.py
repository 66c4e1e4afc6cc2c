"""Sessions and the tag-owner directory over a real channel (issue 17, item 8).

With authentication on (the keys of tests/server/test_caller_binding.py: `acme-fin` holds `finance`, `acme-fin-2`
too under another name, `acme-plain` no tag, `acme-ops` any tag with the admin scope, `globex-fin` another
tenant): a session is read back only by the caller that created it, without the turns its tags do not cover, and
deleted by it or by an admin of its tenant; everyone else gets the NOT_FOUND of a session that does not exist.
Then the owner directory: changed over AdminService, used by the next routed answer."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import grpc

from ragsvc.v1 import admin_service_pb2 as admin_pb
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import rag_service_pb2 as pb
from tests.server.test_auth import bearer
from tests.server.test_caller_binding import FIGURE, ask, refused, server, stubs
from tests.support.servers import Stubs, connected, running_server

__all__ = ["server", "stubs"]  # the module-scoped fixtures of test_caller_binding, served here too


async def get_session(stubs: Stubs, token: str, session: str, **fields: object) -> pb.GetSessionResponse:
    request = pb.GetSessionRequest(session_id=session, **fields)  # type: ignore[arg-type]
    return await stubs.rag.GetSession(request, metadata=bearer(token), timeout=10)


async def test_only_the_owner_reads_its_session_back(stubs: Stubs) -> None:
    session = str(uuid.uuid4())
    answer = await ask(stubs, "tok-fin", session_id=session)
    assert FIGURE in answer.text

    read = await get_session(stubs, "tok-fin", session)
    [turn] = read.session.turns
    assert (turn.turn_number, turn.answer, list(turn.cited_document_ids)) == (1, answer.text, ["travel"])
    assert read.session.tenant_id == "acme" and not read.next_page_token

    unknown = await refused(get_session(stubs, "tok-fin", str(uuid.uuid4())))
    assert (unknown.code, unknown.reason) == (grpc.StatusCode.NOT_FOUND, "NOT_FOUND")
    for token in ("tok-plain", "tok-fin-2", "tok-ops", "tok-globex"):  # another key, an admin, another tenant
        details = await refused(get_session(stubs, token, session))
        assert (details.code, details.reason, details.message) == (
            grpc.StatusCode.NOT_FOUND, "NOT_FOUND", f"no session {session!r}",
        ), token  # fmt: skip
        assert FIGURE not in str(details) and "acme-fin" not in str(details.error_info)
    naming = await refused(get_session(stubs, "tok-globex", session, tenant_id="acme"))
    assert naming.code == grpc.StatusCode.PERMISSION_DENIED, "a key naming another tenant is refused before"


async def test_a_turn_the_callers_tags_do_not_cover_is_left_out(stubs: Stubs) -> None:
    session = str(uuid.uuid4())
    finance = await ask(stubs, "tok-ops", session_id=session, user_tags=["finance"])
    hr = await ask(stubs, "tok-ops", query="When are salaries reviewed?", session_id=session, user_tags=["hr"])
    both = await get_session(stubs, "tok-ops", session, user_tags=["finance", "hr"])
    assert [t.answer for t in both.session.turns] == [finance.text, hr.text]
    only_hr = await get_session(stubs, "tok-ops", session, user_tags=["hr"])
    assert [t.turn_number for t in only_hr.session.turns] == [2]
    assert FIGURE not in " ".join(f"{t.query} {t.answer}" for t in only_hr.session.turns)
    narrowed = await refused(get_session(stubs, "tok-fin", session, user_tags=["hr"]))
    assert narrowed.code == grpc.StatusCode.PERMISSION_DENIED, "a key reads only with tags it holds"


async def test_the_owner_or_an_admin_of_its_tenant_deletes_a_session(stubs: Stubs) -> None:
    mine, theirs = str(uuid.uuid4()), str(uuid.uuid4())
    for session in (mine, theirs):
        await ask(stubs, "tok-fin", session_id=session)
        await ask(stubs, "tok-fin", query="And per year?", session_id=session)
    for token in ("tok-plain", "tok-fin-2", "tok-globex"):
        details = await refused(
            stubs.rag.DeleteSession(pb.DeleteSessionRequest(session_id=mine), metadata=bearer(token), timeout=10)
        )
        assert (details.code, details.message) == (grpc.StatusCode.NOT_FOUND, f"no session {mine!r}"), token
    assert len((await get_session(stubs, "tok-fin", mine)).session.turns) == 2, "the refused deletes changed nothing"

    deleted = await stubs.rag.DeleteSession(pb.DeleteSessionRequest(session_id=mine), metadata=bearer("tok-fin"), timeout=10)
    by_admin = await stubs.rag.DeleteSession(pb.DeleteSessionRequest(session_id=theirs), metadata=bearer("tok-ops"), timeout=10)
    assert (deleted.turns_deleted, by_admin.turns_deleted) == (2, 2)
    for session in (mine, theirs):
        assert (await refused(get_session(stubs, "tok-fin", session))).code == grpc.StatusCode.NOT_FOUND
    # Forgotten: the session id starts a new, empty session (its old turns never reach a prompt).
    again = await ask(stubs, "tok-fin", session_id=mine, explain=True)
    assert [m.role for m in again.explanation.prompt] == [pb.ROLE_SYSTEM, pb.ROLE_USER]


async def test_only_admin_keys_manage_the_owner_directory(stubs: Stubs) -> None:
    request = admin_pb.SetTagOwnerRequest(
        tag_owner=admin_pb.TagOwner(name="tagOwners/finance", owner_user_id="u1", owner_email="cfo@example.com")
    )
    details = await refused(stubs.admin.SetTagOwner(request, metadata=bearer("tok-fin"), timeout=10))
    assert details.code == grpc.StatusCode.PERMISSION_DENIED
    set_by_admin = await stubs.admin.SetTagOwner(request, metadata=bearer("tok-ops"), timeout=10)
    assert set_by_admin.tag_owner == request.tag_owner
    listed = await stubs.admin.ListTagOwners(admin_pb.ListTagOwnersRequest(), metadata=bearer("tok-ops"), timeout=10)
    assert list(listed.tag_owners) == [request.tag_owner]
    await stubs.admin.DeleteTagOwner(
        admin_pb.DeleteTagOwnerRequest(name="tagOwners/finance"), metadata=bearer("tok-ops"), timeout=10
    )


async def test_routing_uses_an_owner_change_at_once(tmp_path: Path) -> None:
    owners = tmp_path / "owners.json"
    owners.write_text(json.dumps({"users": [{"id": "u7", "email": "travel-lead@example.com"}],
                                  "tags": [{"name": "travel", "owner_user_id": "u7"}]}))  # fmt: skip
    # Every answer is ROUTEd: the extractive answer's confidence is at most 85 (see test_answer_trust).
    async with running_server(tmp_path / "data", owners_file=str(owners), confidence_threshold=100.0,
                              demo_corpus=False) as server, connected(server) as stubs:  # fmt: skip
        document = index_pb.Document(document_id="travel", name="travel.md", media_type="text/markdown",
                                     tags=["travel"], content=b"# Travel\n\nFlights are booked two weeks ahead.")  # fmt: skip
        await stubs.index.IngestDocuments(index_pb.IngestDocumentsRequest(tenant_id="acme", documents=[document]))

        async def route() -> pb.RouteTarget:
            request = pb.AskRequest(query="How are flights booked?", tenant_id="acme", user_tags=["travel"])
            answer = (await stubs.rag.Ask(request, timeout=30)).answer
            assert answer.action == pb.ACTION_ROUTE
            return answer.route

        assert (await route()).owner_email == "travel-lead@example.com", "the owners file, at start"
        owner = admin_pb.TagOwner(name="tagOwners/travel", owner_user_id="u8", owner_email="new-lead@example.com")
        await stubs.admin.SetTagOwner(admin_pb.SetTagOwnerRequest(tag_owner=owner), timeout=10)
        changed = await route()
        assert (changed.owner_user_id, changed.owner_email, changed.fallback) == ("u8", "new-lead@example.com", False)
        await stubs.admin.DeleteTagOwner(admin_pb.DeleteTagOwnerRequest(name="tagOwners/travel"), timeout=10)
        removed = await route()
        assert removed.fallback and removed.owner_email == "admin@example.com" and "no owner" in removed.reason


async def test_the_server_purges_audit_rows_past_their_retention_periodically(tmp_path: Path) -> None:
    # 0.00002 days is 1.7 s: a row written now is past it within seconds, and the job runs every 0.5 s.
    async with running_server(tmp_path, audit_retention_days=0.00002, retention_interval_s=0.5) as server:
        async with connected(server) as stubs:
            await stubs.rag.Ask(pb.AskRequest(query="What happens on SIGTERM?"), timeout=30)
        answers, retention = server.components.answers, server.components.retention
        assert len(await answers.recent("default")) == 1, "the answer is in the audit log"
        runs = retention.runs
        for _ in range(200):
            if not await answers.recent("default"):
                break
            await asyncio.sleep(0.1)
        assert await answers.recent("default") == [], "the row past its retention was purged"
        assert retention.runs > runs, "by the periodic job, after the purge at start"
