"""Stored state bound to its caller (issue 16), over a real channel with authentication on: each probe of the
issue's table, with the result it must give; then what binds a replay (the caller, its effective tags, the request)
and a session (its creator; each turn's evidence against the caller's tags now).

Two keys of one tenant: `acme-fin` holds the tag `finance`, `acme-plain` holds none; a document tagged `finance`
holds the figure 12000."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator

import grpc
import pytest

from ragsvc.server.app import RagServer
from ragsvc.v1 import admin_service_pb2 as admin_pb
from ragsvc.v1 import rag_service_pb2 as pb
from tests.server.test_auth import QUESTION, bearer, ingest_finance_and_hr
from tests.support.rpc_details import Details, details_of
from tests.support.servers import Stubs, connected, running_server

KEYS = {
    "keys": [
        {"name": "acme-fin", "token": "tok-fin", "tenant": "acme", "tags": ["finance"]},
        {"name": "acme-fin-2", "token": "tok-fin-2", "tenant": "acme", "tags": ["finance"]},
        {"name": "acme-plain", "token": "tok-plain", "tenant": "acme", "tags": []},
        {"name": "acme-ops", "token": "tok-ops", "tenant": "acme", "tags": ["*"], "index": True, "admin": True},
        {"name": "globex-fin", "token": "tok-globex", "tenant": "globex", "tags": ["finance"]},
    ]
}
FIGURE = "12000"
SESSIONS = iter(f"9f1c1d4e-8a7b-4c6d-9e2f-0a1b2c3d4e{n:02x}" for n in range(256))


@pytest.fixture(scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RagServer]:
    keys_file = tmp_path_factory.mktemp("keys") / "keys.json"
    keys_file.write_text(json.dumps(KEYS))
    async with running_server(tmp_path_factory.mktemp("binding"), auth_enabled=True, api_keys_file=str(keys_file),
                              cache_max_entries=100, demo_corpus=False) as server:  # fmt: skip
        await ingest_finance_and_hr(server, "tok-ops")
        yield server


@pytest.fixture(scope="module")
async def stubs(server: RagServer) -> AsyncIterator[Stubs]:
    async with connected(server) as stubs:
        yield stubs


async def ask(stubs: Stubs, token: str, **fields: object) -> pb.Answer:
    request = pb.AskRequest(**{"query": QUESTION, **fields})
    return (await stubs.rag.Ask(request, metadata=bearer(token), timeout=30)).answer


async def ask_stream(stubs: Stubs, token: str, **fields: object) -> list[pb.AskStreamResponse]:
    request = pb.AskStreamRequest(**{"query": QUESTION, **fields})
    return [event async for event in stubs.rag.AskStream(request, metadata=bearer(token), timeout=30)]


async def refused(call: object) -> Details:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    return details_of(caught.value)


def shows_the_figure(answer: pb.Answer) -> bool:
    """Whether anything in `answer` (text, citations, candidates, explanation) carries the finance figure: the
    number itself, not its digits inside a longer one (a create_time of nanos 228112000 is not the figure)."""
    return re.search(rf"(?<!\d){FIGURE}(?!\d)", str(answer)) is not None


# The probes, in its table's order.


async def test_probe_acme_plain_asking_about_the_finance_document_is_refused(stubs: Stubs) -> None:
    answer = await ask(stubs, "tok-plain")
    assert not answer.grounded and answer.refusal_reason != pb.REFUSAL_REASON_UNSPECIFIED
    assert not shows_the_figure(answer) and not answer.citations


async def test_probe_acme_plain_naming_the_tag_finance_is_permission_denied(stubs: Stubs) -> None:
    details = await refused(stubs.rag.Ask(pb.AskRequest(query=QUESTION, user_tags=["finance"]),
                                         metadata=bearer("tok-plain"), timeout=10))  # fmt: skip
    assert (details.code, details.reason) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")


async def test_probe_another_tenants_key_naming_acme_is_permission_denied(stubs: Stubs) -> None:
    details = await refused(stubs.rag.Ask(pb.AskRequest(query=QUESTION, tenant_id="acme"),
                                         metadata=bearer("tok-globex"), timeout=10))  # fmt: skip
    assert (details.code, details.reason) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")


async def test_probe_acme_plain_sending_acme_fins_idempotency_key_gets_its_own_fresh_answer(stubs: Stubs) -> None:
    fin = await ask(stubs, "tok-fin", idempotency_key="budget-q1", explain=True)
    assert fin.grounded and shows_the_figure(fin)

    plain = await ask(stubs, "tok-plain", idempotency_key="budget-q1", explain=True)
    assert not plain.flags.cache_hit, "never a replay of another caller's answer"
    assert not plain.grounded and not plain.citations and not shows_the_figure(plain)
    streamed = await ask_stream(stubs, "tok-plain", idempotency_key="budget-q1", explain=True)
    assert not any(FIGURE in str(event) for event in streamed)

    plain_again = await ask(stubs, "tok-plain", idempotency_key="budget-q1", explain=True)
    assert plain_again.flags.cache_hit and plain_again.text == plain.text, "its own record replays"
    fin_again = await ask(stubs, "tok-fin", idempotency_key="budget-q1", explain=True)
    assert fin_again.flags.cache_hit and fin_again.text == fin.text, "and acme-fin's is untouched"


async def test_probe_acme_plain_sending_acme_fins_session_id_is_not_found(stubs: Stubs) -> None:
    session = next(SESSIONS)
    fin = await ask(stubs, "tok-fin", session_id=session)
    assert shows_the_figure(fin)

    unknown = f"no session {session!r}"
    for call in (
        stubs.rag.Ask(pb.AskRequest(query="And per year?", session_id=session), metadata=bearer("tok-plain"),
                      timeout=10),
        stubs.rag.AskStream(pb.AskStreamRequest(query="And per year?", session_id=session),
                            metadata=bearer("tok-plain"), timeout=10).read(),
        # Sending a history of its own does not get it into the session either.
        stubs.rag.Ask(pb.AskRequest(query="And per year?", session_id=session,
                                    chat_history=[pb.ChatMessage(role=pb.ROLE_USER, content="hi")]),
                      metadata=bearer("tok-plain"), timeout=10),
        # Another key of the same tenant and tags is another caller too; an admin's dry run is refused alike.
        stubs.rag.Ask(pb.AskRequest(query="And per year?", session_id=session), metadata=bearer("tok-fin-2"),
                      timeout=10),
        stubs.admin.SimulateAsk(admin_pb.SimulateAskRequest(request=pb.AskRequest(query="And per year?",
                                                                                  session_id=session)),
                                metadata=bearer("tok-ops"), timeout=10),
    ):  # fmt: skip
        details = await refused(call)
        assert (details.code, details.reason, details.message) == (grpc.StatusCode.NOT_FOUND, "NOT_FOUND", unknown)
        assert "acme-fin" not in str(details.error_info), "nothing says whose session it is"

    # (A follow-up the document answers: "how often is it reviewed?" is not in it, and the answerability gate refuses
    # it before any prompt is built.)
    follow_up = await ask(stubs, "tok-fin", query="And is that per quarter?", session_id=session, explain=True)
    prompt = " ".join(message.content for message in follow_up.explanation.prompt)
    assert QUESTION in prompt and FIGURE in prompt, "the owner's session goes on with its history"


# What binds a replay.


async def test_the_same_key_with_another_request_is_refused_with_idempotency_key_reused(stubs: Stubs) -> None:
    await ask(stubs, "tok-fin", idempotency_key="order-7")
    details = await refused(stubs.rag.Ask(pb.AskRequest(query="When are salaries reviewed?", idempotency_key="order-7"),
                                          metadata=bearer("tok-fin"), timeout=10))  # fmt: skip
    assert (details.code, details.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "IDEMPOTENCY_KEY_REUSED")
    assert details.error_info.metadata["idempotency_key"] == "order-7"
    assert "google.rpc.PreconditionFailure" in details.types
    streamed = stubs.rag.AskStream(pb.AskStreamRequest(query=QUESTION, idempotency_key="order-7",
                                                       retrieval=pb.RetrievalOptions(top_k=3)),
                                   metadata=bearer("tok-fin"), timeout=10)  # fmt: skip
    assert (await refused(streamed.read())).reason == "IDEMPOTENCY_KEY_REUSED", "top_k changes the answer too"
    assert (await ask(stubs, "tok-fin", idempotency_key="order-7")).flags.cache_hit, "the recorded request replays"


async def test_a_replay_is_bound_to_the_effective_tags(stubs: Stubs) -> None:
    """A wildcard key reading `finance`, then `hr`, with one idempotency key: the second is another request."""
    first = await ask(stubs, "tok-ops", idempotency_key="tags-1", user_tags=["finance"], explain=True)
    assert shows_the_figure(first)
    details = await refused(stubs.rag.Ask(pb.AskRequest(query=QUESTION, idempotency_key="tags-1", user_tags=["hr"],
                                                        explain=True), metadata=bearer("tok-ops"), timeout=10))  # fmt: skip
    assert details.reason == "IDEMPOTENCY_KEY_REUSED"


async def test_the_answer_cache_is_shared_by_callers_reading_the_same_tags_only(stubs: Stubs) -> None:
    query = "How much travel budget does finance get per quarter?"
    fin = await ask(stubs, "tok-fin", query=query)
    assert shows_the_figure(fin) and fin.grounded
    assert (await ask(stubs, "tok-fin-2", query=query)).flags.cache_hit, "the same tenant and tags: the same evidence"
    plain = await ask(stubs, "tok-plain", query=query)
    assert not plain.flags.cache_hit and not shows_the_figure(plain)


# What binds a session's turns.


async def test_a_turn_the_callers_tags_no_longer_cover_never_reaches_the_prompt(stubs: Stubs) -> None:
    session = next(SESSIONS)
    first = await ask(stubs, "tok-ops", session_id=session, user_tags=["finance"])
    assert shows_the_figure(first)

    def prompt_of(answer: pb.Answer) -> str:
        return " ".join(message.content for message in answer.explanation.prompt)

    def history_of(answer: pb.Answer) -> list[str]:
        """The prompt's messages between the system message and the question: the session's turns."""
        return [message.content for message in answer.explanation.prompt[1:-1]]

    hr = await ask(stubs, "tok-ops", query="When are salaries reviewed?", session_id=session, user_tags=["hr"],
                   explain=True)  # fmt: skip
    assert FIGURE not in prompt_of(hr) and history_of(hr) == [], "the finance turn is dropped"
    simulated = await stubs.admin.SimulateAsk(
        admin_pb.SimulateAskRequest(request=pb.AskRequest(query="And bonuses?", session_id=session, user_tags=["hr"])),
        metadata=bearer("tok-ops"), timeout=30,
    )  # fmt: skip
    assert FIGURE not in prompt_of(simulated.answer), "a dry run's prompt too"

    both = await ask(stubs, "tok-ops", query="What is the travel budget, and when are salaries reviewed?",
                     session_id=session, user_tags=["finance", "hr"], explain=True)  # fmt: skip
    history = history_of(both)
    assert len(history) == 4 and history[0] == QUESTION and FIGURE in history[1], "covered again: both turns are back"
    assert history[2] == "When are salaries reviewed?" and "March" in history[3]
